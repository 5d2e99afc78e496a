"""Maintenance windows in Redis: one hash of the whole schedule, window id -> JSON.

Windows are few and read whole: the beats read them in Python when told of a change (a
message on the changes channel, which wakes every beat and makes it read them again)
and every :data:`REREAD` seconds besides; no script reads them, so their key needs no
partition's hash tag (it has the schedule's, ``{prefix}``, as its other global keys).
"""

from __future__ import annotations

import logging

from celery_periodiq.errors import WindowError
from celery_periodiq.model.windows import Window
from celery_periodiq.store.store import Store

__all__ = ["REREAD", "WINDOWS_CHANGED", "delete_window", "read_windows", "write_window"]

logger = logging.getLogger("celery_periodiq.store")

REREAD = 30.0
"""Seconds after which a beat reads the windows again, told of a change or not."""
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


def write_window(store: Store, window: Window, *, replace: bool) -> bool:
    """Store ``window``; returns False (nothing written) when one of its id exists and
    ``replace`` is False. Every beat is told."""
    key = store.keys.windows
    if replace:
        store.client.hset(key, window.id, window.to_json())
    elif not store.client.hsetnx(key, window.id, window.to_json()):
        return False
    store.client.publish(store.keys.changes, WINDOWS_CHANGED)
    return True


def delete_window(store: Store, window_id: str) -> bool:
    """Remove a window; False when there was none of that id. Every beat is told."""
    removed = bool(store.client.hdel(store.keys.windows, window_id))
    if removed:
        store.client.publish(store.keys.changes, WINDOWS_CHANGED)
    return removed
