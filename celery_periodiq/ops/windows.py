"""Maintenance windows as operations: add one (checked whole, nothing written when any
part is wrong), list, remove, and which window holds an entry now (what ``list``,
``show``, the dashboard and the admin say). The windows' model is
:mod:`celery_periodiq.model.windows`, their key :mod:`celery_periodiq.store.windows`,
their use by the beat :mod:`celery_periodiq.beat.windows`.

The functions that take a :class:`Store` run inside the caller's
:meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from celery_periodiq.errors import WindowError, did_you_mean, shown
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.windows import Cover, Window, covering, make_window
from celery_periodiq.ops.steer import stored
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.store.windows import delete_window, read_windows, write_window

__all__ = [
    "add_window",
    "held_now",
    "list_windows",
    "next_windows",
    "remove_window",
    "windows_of",
]


def add_window(
    store: Store, window_id: str, *, replace: bool, audit: Audit | None = None, **parts: object
) -> Window:
    """Check and store a window (see :func:`~celery_periodiq.model.windows.make_window`
    for ``parts``), the change recorded in the windows' audit trail by ``audit``.

    Raises:
        WindowError: a part is invalid, or a window of that id exists (``replace``
            False): nothing is written.
        EntryNotFoundError: the scope names an entry that does not exist.
    """
    window = make_window(window_id, now_ms=store.now_ms(), **parts)
    kind, _, target = window.scope.partition(":")
    if kind == "entry":
        stored(store, target)  # a window for a name mistyped would hold nothing
    if not write_window(store, window, replace=replace, audit=store.audit_argument(audit)):
        raise WindowError(
            f"window {window_id!r} exists already (remove it first, or replace=True / "
            "--replace to change it)"
        )
    return window


def list_windows(store: Store) -> list[Window]:
    """Every window, by id (an unreadable one is left out; a beat logs it)."""
    return read_windows(store)[0]


def remove_window(store: Store, window_id: str, audit: Audit | None = None) -> None:
    """Remove a window, recorded in the windows' audit trail by ``audit``.

    Raises:
        WindowError: no window has that id (nothing changes).
    """
    if not isinstance(window_id, str) or not window_id:
        raise WindowError(f"window id {shown(window_id)} is invalid")
    if delete_window(store, window_id, store.audit_argument(audit)):
        return
    known = [window.id for window in list_windows(store)]
    raise WindowError(f"no window {window_id!r}{did_you_mean(window_id, known)}")


def windows_of(windows: Iterable[Window], entry: Entry) -> tuple[Window, ...]:
    """The windows that hold ``entry``."""
    return tuple(w for w in windows if w.applies_to(entry.name, entry.owner))


def held_now(windows: Iterable[Window], stored_entry: StoredEntry, now: datetime) -> Cover | None:
    """The window ``stored_entry`` is in at ``now`` (and until when), or None."""
    entry = stored_entry.entry
    if entry is None:
        return None
    return covering(windows_of(windows, entry), now)


def next_windows(
    windows: Iterable[Window], now: datetime
) -> list[tuple[Window, tuple[datetime, datetime] | None]]:
    """Each window with its current or next opening (start, end), or None when it opens
    no more (a one-off window past)."""
    return [(window, window.next_opening(now)) for window in windows]
