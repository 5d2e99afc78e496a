"""Rolling deploys and the read side's indexes.

A beat of an older version (its heartbeat names no index version) runs scripts that
keep none of the indexes a scrape or a page reads (:mod:`~celery_periodiq.store.summary`):
while one lives beside this beat, the ticks it settles are not counted there. When the
last of them is gone, this beat marks the indexes as not built, and the next read
builds them afresh from every entry, once.
"""

from __future__ import annotations

import logging

from celery_periodiq.store.entry_scripts import INDEX_VERSION
from celery_periodiq.store.store import Store
from celery_periodiq.store.summary import forget_indexes

__all__ = ["IndexWatch"]

logger = logging.getLogger("celery_periodiq.scheduler")


class IndexWatch:
    """Watches the live beats for another version of the indexes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.others = False
        """Whether a beat that keeps other indexes (or none) was alive at the last look."""

    def look(self) -> bool:
        """Read the live beats; True when the last beat of other indexes just went (the
        indexes were then marked for a rebuild)."""
        others = any(beat.indexes != INDEX_VERSION for beat in self.store.beats())
        gone = self.others and not others
        if others and not self.others:
            logger.warning(
                "periodiq: a beat of an older version runs beside this one: the counts "
                "a scrape or the dashboard shows drift until it is gone (then rebuilt)"
            )
        if gone:
            forget_indexes(self.store)
            logger.info("periodiq: the older beats are gone: the read indexes will be rebuilt")
        self.others = others
        return gone
