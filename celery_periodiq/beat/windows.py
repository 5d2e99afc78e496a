"""The maintenance windows one beat decides with (:mod:`celery_periodiq.model.windows`).

Read at the start of a pass when a change was announced (the changes channel: every
beat is told at once, and after a lost subscription too) or :data:`REREAD` seconds went
by; between reads each tick asks only which of them hold its entry. With no window
defined, a tick's cost is one attribute read.
"""

from __future__ import annotations

import logging

import redis

from celery_periodiq.clock import elapsed
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.windows import Window
from celery_periodiq.store.store import Store
from celery_periodiq.store.windows import REREAD, read_windows

__all__ = ["WindowBook"]

logger = logging.getLogger("celery_periodiq.dispatch")


class WindowBook:
    """The windows as last read, and which hold each entry."""

    def __init__(self) -> None:
        self.windows: tuple[Window, ...] = ()
        """Every window, as last read; empty: no tick looks further."""
        self.stale = True
        """A change was announced since the last read."""
        self._read_at = -REREAD
        self._of: dict[tuple[str, str | None], tuple[Window, ...]] = {}
        self._bad: frozenset[str] = frozenset()

    def touched(self, name: str | None) -> None:
        """An entry changed (None: every entry, a window too, or a subscription was lost
        and changes may have been missed): the next pass reads the windows again."""
        if name is None:
            self.stale = True

    def reread(self, store: Store) -> None:
        """Read the windows again now."""
        self.stale = True
        self.refresh(store)

    def refresh(self, store: Store) -> None:
        """Read the windows again if a change was announced or it is time; a failed read
        keeps the last ones (the pass itself then fails on the same Redis, or goes on)."""
        if not self.stale and elapsed() - self._read_at < REREAD:
            return
        self.stale = False
        try:
            windows, bad = read_windows(store)
        except redis.RedisError as error:
            self.stale = True
            logger.warning("periodiq: maintenance windows not read (%s); last ones kept", error)
            return
        self._read_at = elapsed()
        if frozenset(bad) != self._bad and bad:
            logger.error("periodiq: maintenance windows unreadable, not applied: %s", bad)
        self._bad = frozenset(bad)
        if tuple(windows) != self.windows:
            logger.info(
                "periodiq: maintenance windows: %s",
                ", ".join(f"{w.id} ({w.scope}, {w.policy})" for w in windows) or "none",
            )
        self.windows = tuple(windows)
        self._of = {}

    def of(self, entry: Entry) -> tuple[Window, ...]:
        """The windows that hold ``entry`` (its scope: all, its owner, its name)."""
        key = (entry.name, entry.owner)
        found = self._of.get(key)
        if found is None:
            found = tuple(w for w in self.windows if w.applies_to(entry.name, entry.owner))
            self._of[key] = found
        return found
