"""Maintenance windows in Redis: one hash of the whole schedule, window id -> JSON.

Windows are few and read whole: the beats read them in Python when told of a change (a
message on the changes channel, which wakes every beat and makes it read them again)
and every :data:`REREAD` seconds besides. ``lua/window.lua`` writes one, with its
record in the windows' audit trail; its keys have the schedule's hash tag,
``{prefix}``, as its other global keys.
"""

from __future__ import annotations

import json
import logging

from celery_periodiq.errors import WindowError
from celery_periodiq.model.windows import Window
from celery_periodiq.store.store import Store

__all__ = [
    "REREAD",
    "WINDOWS_CHANGED",
    "delete_window",
    "read_windows",
    "redecide_held",
    "write_window",
]

logger = logging.getLogger("celery_periodiq.store")

REREAD = 30.0
"""Seconds after which a beat reads the windows again, told of a change or not."""
_KEPT_MS = 660_000
"""How long an entry is noted as redecided (ms): as long as the writers' change log."""
WINDOWS_CHANGED = "windows changed: all entries"
"""The message a window change publishes: it ends as a bulk change's (``"<n> entries"``),
so every listener looks at every partition and reads the windows again."""


def read_windows(store: Store) -> tuple[list[Window], dict[str, str]]:
    """Every window, by id; and the stored ones that are unreadable (id -> why), which
    are left out (a beat logs them; ``window list`` shows them)."""
    raw = store.client.hgetall(store.keys.windows) or {}
    windows: list[Window] = []
    bad: dict[str, str] = {}
    for window_id, text in sorted(raw.items()):
        try:
            windows.append(Window.from_json(text))
        except WindowError as error:
            bad[str(window_id)] = str(error)
    return windows, bad


def write_window(store: Store, window: Window, *, replace: bool, audit: str = "") -> bool:
    """Store ``window``, the change recorded with ``audit`` (the audit context, "": none);
    returns False (nothing written) when one of its id exists and ``replace`` is False.
    Every beat is told."""
    action = "replace" if replace else "add"
    if not store.scripts.window(action, window.id, window.to_json(), audit):
        return False
    redecide_held(store, window)
    store.client.publish(store.keys.changes, WINDOWS_CHANGED)
    return True


def redecide_held(store: Store, window: Window) -> int:
    """Note the entries ``window`` holds that have a claim in flight (a staged burst's,
    held until its instant) as redecided: the release then leaves their staged messages
    out, and the beat decides those ticks at their instant, with the windows as they are
    then. Returns how many entries it noted."""
    kind, _, target = window.scope.partition(":")
    owned = set(store.owned_by(target)) if kind == "owner" else None
    parts = store.keys.all()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        pipe.hvals(part.ticks)
    held: dict[str, set[str]] = {}
    for part, claims in zip(parts, pipe.execute(), strict=True):
        for raw in claims or []:
            try:
                name = json.loads(raw)["name"]
            except (ValueError, TypeError, KeyError):
                continue  # a damaged claim: claim.lua's to quarantine, not a window's
            if (kind == "entry" and name != target) or (owned is not None and name not in owned):
                continue
            held.setdefault(part.redecided, set()).add(str(name))
    if held:
        now = store.now_ms()
        pipe = store.client.pipeline(transaction=False)
        for key, names in held.items():
            pipe.zadd(key, dict.fromkeys(names, now))
            pipe.zremrangebyscore(key, "-inf", now - _KEPT_MS)
            pipe.pexpire(key, _KEPT_MS)
        pipe.execute()
    return sum(map(len, held.values()))


def delete_window(store: Store, window_id: str, audit: str = "") -> bool:
    """Remove a window, recorded with ``audit``; False when there was none of that id.
    Every beat is told."""
    removed = store.scripts.window("remove", window_id, "", audit)
    if removed:
        store.client.publish(store.keys.changes, WINDOWS_CHANGED)
    return removed
