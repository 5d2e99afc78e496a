"""The store's audit trails: the context each write hands its script (the scripts record
the change in the same call, ``lua/_common.lua``), and reading the trails back, one
entry's or every partition's and the maintenance windows', decoded by
:mod:`celery_periodiq.protocol.audit`."""

from __future__ import annotations

from typing import Any

import redis

from celery_periodiq.config import Settings
from celery_periodiq.protocol.audit import Audit, AuditRecord, parse_trail
from celery_periodiq.protocol.keys import Keys, Partition

__all__ = ["AuditTrails"]

_SCAN = 500
"""Trails read per HSCAN step when every partition is read."""


class AuditTrails:
    """The audit trails of :class:`~celery_periodiq.store.store.Store`."""

    settings: Settings
    keys: Keys
    client: Any

    def audit_argument(self, audit: Audit | None) -> str:
        """The audit context as the scripts take it ("": nothing recorded)."""
        if audit is None or self.settings.audit_length <= 0:
            return ""
        return audit.argument(self.settings.audit_length, self._window_ms())

    def _window_ms(self) -> int:
        return int(self.settings.audit_window * 1000)

    def _oldest_ms(self) -> int:
        """The oldest instant a record may have and still be kept (the Redis clock)."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000 - self._window_ms()

    def audit_trail(self, name: str) -> list[AuditRecord]:
        """One entry's audit records, newest first (a deleted entry's too, within the
        window); none when its trail cannot be read."""
        try:
            text = self.client.hget(self.keys.of(name).audit, name)
        except redis.ResponseError:  # the audit key holds another type: the next write repairs
            return []
        return parse_trail(name, text, self._oldest_ms())

    def audit_trails(
        self, since_ms: int | None = None, most: int | None = None
    ) -> list[AuditRecord]:
        """Every entry's audit records (deleted entries' within the window) and every
        maintenance window's (their actions end in ``_window``, their name is the
        window's id), newest first (those of one millisecond by name, last first);
        those before ``since_ms`` may be left out.

        ``most``: at least the newest ``most`` records are returned (the newest ``most``
        trails of each partition, by their newest record: ``audit_newest``), not all.
        A partition with a trail its index does not hold (written by an older version)
        is read whole.
        """
        oldest = max(self._oldest_ms(), since_ms or 0)
        parts = self.keys.all()
        pipe = self.client.pipeline(transaction=False)
        for part in parts:
            pipe.hlen(part.audit)
            pipe.zcard(part.audit_newest)
        counted = pipe.execute(raise_on_error=False)
        records: list[AuditRecord] = []
        indexed = []
        for index, part in enumerate(parts):
            trails, held = counted[2 * index : 2 * index + 2]
            if isinstance(trails, int) and isinstance(held, int) and trails <= held:
                indexed.append(part)
            else:  # unindexed trails, or a key of another type
                records += self._scanned(part.audit, oldest)
        records += self._newest(indexed, oldest, most)
        records += self._scanned(self.keys.windows_audit, oldest)  # windows are few
        # records of one millisecond by name, whichever way they were read (a trail's
        # own keep their order: the sort is stable)
        records.sort(key=lambda record: (record.at, record.name), reverse=True)
        return records

    def _newest(self, parts: list[Partition], oldest: int, most: int | None) -> list[AuditRecord]:
        """The trails of ``parts`` whose newest record is at ``oldest`` or later, the
        newest ``most`` of each partition (None: all): two round trips."""
        pipe = self.client.pipeline(transaction=False)
        for part in parts:
            pipe.zrevrangebyscore(part.audit_newest, "+inf", oldest, start=0, num=most or -1)
        named = pipe.execute(raise_on_error=False)
        pipe = self.client.pipeline(transaction=False)
        asked = []
        for part, names in zip(parts, named, strict=True):
            if isinstance(names, list) and names:
                pipe.hmget(part.audit, names)
                asked.append(names)
        records: list[AuditRecord] = []
        for names, texts in zip(asked, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(texts, list):
                for name, text in zip(names, texts, strict=True):
                    records += parse_trail(name, text, oldest)
        return records

    def _scanned(self, key: str, oldest: int) -> list[AuditRecord]:
        """Every trail of the audit hash ``key`` (none when it holds another type)."""
        records: list[AuditRecord] = []
        try:
            for name, text in self.client.hscan_iter(key, count=_SCAN):
                records += parse_trail(name, text, oldest)
        except redis.ResponseError:  # another type: as audit_trail()
            pass
        return records
