"""The store's audit trails: the context each write hands its script (the scripts record
the change in the same call, ``lua/_common.lua``), and reading the trails back, one
entry's or every partition's, decoded by :mod:`celery_periodiq.protocol.audit`."""

from __future__ import annotations

from typing import Any

import redis

from celery_periodiq.config import Settings
from celery_periodiq.protocol.audit import Audit, AuditRecord, parse_trail
from celery_periodiq.protocol.keys import Keys

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

    def audit_trails(self) -> list[AuditRecord]:
        """Every entry's audit records (deleted entries' within the window), newest first."""
        oldest = self._oldest_ms()
        records: list[AuditRecord] = []
        for part in self.keys.all():
            try:
                for name, text in self.client.hscan_iter(part.audit, count=_SCAN):
                    records += parse_trail(name, text, oldest)
            except redis.ResponseError:  # another type: as audit_trail()
                continue
        records.sort(key=lambda record: record.at, reverse=True)
        return records
