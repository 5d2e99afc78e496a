"""The runtime API: ``periodiq(app)`` creates, changes, pauses, triggers, inspects
and deletes entries while everything runs. The CLI is a thin layer over it.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import redis
from celery import Celery

from celery_periodiq.config import Settings
from celery_periodiq.definitions import build_entry, changed_entry, task_name
from celery_periodiq.entry import AUTO, Entry
from celery_periodiq.errors import (
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PeriodiqError,
    StoreUnavailableError,
)
from celery_periodiq.plan import from_ms, next_tick, to_ms
from celery_periodiq.publish import send
from celery_periodiq.store import BeatInfo, Event, Store, StoredEntry

__all__ = ["FAILURE_KINDS", "Periodiq", "periodiq"]

FAILURE_KINDS = frozenset({"failed", "timeboxed"})
_CLIENTS: weakref.WeakKeyDictionary[Celery, Periodiq] = weakref.WeakKeyDictionary()


def periodiq(app: Celery) -> Periodiq:
    """The runtime API for ``app``'s schedule (one client per app).

    Raises:
        ConfigurationError: a ``periodiq_*`` setting is invalid.
    """
    client = _CLIENTS.get(app)
    if client is None:
        client = _CLIENTS[app] = Periodiq(app)
    return client


@contextlib.contextmanager
def _redis_errors(url: str) -> Iterator[None]:
    try:
        yield
    except redis.RedisError as error:
        raise StoreUnavailableError(f"Redis at {_safe(url)} failed: {error}") from error


def _safe(url: str) -> str:
    """The URL without its password (in the credentials or the query)."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        rest = f"{user}:***@{host}" if user else f"***@{host}"
    return scheme + sep + re.sub(r"(?i)(password=)[^&]*", r"\1***", rest)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise EntryError(f"entry name {name!r} is invalid (allowed: a non-empty string)")
    return name


def _check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        raise EntryError(f"owner={owner!r} is invalid (allowed: a non-empty string)")
    return owner


def _check_count(what: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PeriodiqError(f"{what}={value!r} is invalid (allowed: a whole number >= {low})")
    return value


class Periodiq:
    """Create, change and inspect the entries of one Celery app's schedule."""

    def __init__(self, app: Celery, store: Store | None = None) -> None:
        self.app = app
        self.settings = Settings.from_app(app)
        self.store = store if store is not None else Store(self.settings)

    def _guard(self) -> contextlib.AbstractContextManager[None]:
        return _redis_errors(self.settings.redis_url)

    def _stored(self, name: str) -> StoredEntry:
        found = self.store.load([_check_name(name)])
        if not found:
            raise EntryNotFoundError(f"no entry named {name!r}")
        return found[0]

    def _readable(self, name: str) -> Entry:
        stored = self._stored(name)
        if stored.entry is None:
            raise EntryError(f"entry {name!r} is quarantined: {stored.invalid}")
        return stored.entry

    def add(
        self,
        name: str,
        task: Any,
        *,
        cron: str | None = None,
        every: float | timedelta | str | None = None,
        calendar: str | None = None,
        args: list[Any] | tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        tz: str = "UTC",
        owner: str | None = None,
        tolerance: float | str = AUTO,
        timebox: float | str | None = AUTO,
        grace: float | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window: float | None = None,
        jitter: float = 0.0,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        enabled: bool = True,
    ) -> StoredEntry:
        """Create a runtime entry; beats pick it up within a second.

        Args:
            name: unique entry name (also the key of Jenkins ``H``).
            task: the task name, or the task object.
            cron: a cron expression or macro (``@daily``, ``@reboot``).
            every: an interval: seconds, a ``timedelta`` or ``"@every 1h30m"``.
            calendar: a systemd calendar event (``"Mon..Fri 09:00"``).

        Returns:
            The stored entry with its first tick.

        Raises:
            EntryError: an option is invalid (nothing is written).
            EntryExistsError: the name is taken.
            StoreUnavailableError: Redis failed.
        """
        entry = build_entry(
            _check_name(name),
            task_name(task),
            cron=cron, every=every, calendar=calendar, args=args, kwargs=kwargs,
            options=options, tz=tz, owner=owner, tolerance=tolerance, timebox=timebox,
            grace=grace,
            overlap=self.settings.default_overlap if overlap is None else overlap,
            catchup=self.settings.default_catchup if catchup is None else catchup,
            catchup_window=catchup_window,
            jitter=jitter, start_at=start_at, end_at=end_at, enabled=enabled, source="runtime",
        )  # fmt: skip
        with self._guard():
            (status,) = self.store.put("add", [entry])
            if status == "exists":
                raise EntryExistsError(f"an entry named {name!r} already exists")
            return self._stored(name)

    def get(self, name: str) -> StoredEntry:
        """One entry with its state.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self._guard():
            return self._stored(name)

    def update(self, name: str, /, **changes: Any) -> StoredEntry:
        """Change an entry's options; its next tick is computed afresh, its state kept.

        Accepts the keyword options of :meth:`add` (a schedule option replaces
        the schedule).

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: an option is unknown or invalid (nothing is written).
        """
        with self._guard():
            entry = changed_entry(self._readable(name), dict(changes))
            (status,) = self.store.put("update", [entry])
            if status == "missing":
                raise EntryNotFoundError(f"no entry named {name!r}")
            return self._stored(name)

    def delete(self, name: str) -> None:
        """Delete an entry and its state and history.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self._guard():
            if not self.store.scripts.remove([_check_name(name)]):
                raise EntryNotFoundError(f"no entry named {name!r}")

    def delete_owner(self, owner: str) -> list[str]:
        """Delete every entry tagged with ``owner``; returns their names."""
        _check_owner(owner)
        with self._guard():
            return self.store.scripts.remove(self.store.owned_by(owner))

    def pause(self, name: str, note: str | None = None) -> StoredEntry:
        """Stop an entry's ticks until :meth:`resume`; ``note`` says why."""
        if note is not None and not isinstance(note, str):
            raise EntryError(f"note={note!r} is invalid (allowed: text)")
        with self._guard():
            if not self.store.scripts.pause(_check_name(name), note or ""):
                raise EntryNotFoundError(f"no entry named {name!r}")
            return self._stored(name)

    def resume(self, name: str) -> StoredEntry:
        """Restart a paused entry from its next tick after now."""
        with self._guard():
            entry = self._readable(name)
            now = from_ms(self.store.now_ms())
            upcoming = next_tick(entry, entry.parsed_schedule(), now) if entry.enabled else None
            next_ms = None if upcoming is None else to_ms(upcoming[0])
            due_ms = None if upcoming is None else to_ms(upcoming[1])
            if not self.store.scripts.resume(name, next_ms, due_ms):
                raise EntryNotFoundError(f"no entry named {name!r}")
            return self._stored(name)

    def trigger(self, name: str) -> str:
        """Run an entry now, outside its schedule; the worker's overlap guard still applies.

        Returns:
            The task id of the run.
        """
        with self._guard():
            entry = self._readable(name)
            task_id = send(self.app, entry, None)
            self.store.record(name, "triggered", task_id=task_id)
            return task_id

    def history(self, name: str, *, limit: int = 20, failures_only: bool = False) -> list[Event]:
        """An entry's newest events, newest first (only failures with ``failures_only``)."""
        _check_count("limit", limit)
        with self._guard():
            self._stored(name)
            if not failures_only:
                return self.store.history(name, limit)
            events = self.store.history(name, self.settings.history_length)
            return [event for event in events if event.kind in FAILURE_KINDS][:limit]

    def upcoming(self, name: str, n: int = 10) -> list[datetime]:
        """The next ``n`` fire instants of an entry, from the Redis clock."""
        _check_count("n", n, low=0)
        with self._guard():
            entry = self._readable(name)
            return entry.parsed_schedule().upcoming(from_ms(self.store.now_ms()), n)

    def beats(self) -> list[BeatInfo]:
        """The live beat instances."""
        with self._guard():
            return self.store.beats()

    # Last in the class: below this line ``list`` names the method, not the builtin.
    def list(self, *, owner: str | None = None) -> list[StoredEntry]:
        """Every entry (or those of ``owner``), soonest next run first."""
        with self._guard():
            if owner is None:
                stored = self.store.load()
            else:
                stored = self.store.load(self.store.owned_by(_check_owner(owner)))
        far = datetime.max.replace(tzinfo=from_ms(0).tzinfo)
        return sorted(stored, key=lambda item: (item.next_run or far, item.name))
