"""What a run's message carries for the worker: its ``periodiq_*`` headers (and the
``periodic_task_name`` of the django-celery-beat convention) and its task id.

The beat (and ``trigger()``, ``backfill()``) write these headers into every message of
an entry; the worker's guards (:mod:`celery_periodiq.worker.task`) read them back. The
task id of a run follows one rule, :func:`task_id_for`: a tick's id is derived from the
tick, so the same tick always gets the same id, and a takeover republishes exactly the
same message, which the worker's guard then drops as a duplicate.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

__all__ = [
    "HEADER_BACKFILL",
    "HEADER_CATCHUP",
    "HEADER_ENTRY",
    "HEADER_EXPIRES",
    "HEADER_FLOOR",
    "HEADER_GROUP",
    "HEADER_INTERVAL",
    "HEADER_MANUAL",
    "HEADER_MIN_GAP",
    "HEADER_MISSED",
    "HEADER_OVERLAP",
    "HEADER_PERIODIC_TASK_NAME",
    "HEADER_TICK",
    "HEADER_TTL",
    "entry_headers",
    "task_id_for",
]

HEADER_ENTRY = "periodiq_entry"
HEADER_TICK = "periodiq_tick"
"""The tick's nominal instant, milliseconds since the epoch."""
HEADER_INTERVAL = "periodiq_interval"
"""Seconds from this tick to the entry's next one."""
HEADER_MISSED = "periodiq_missed"
"""How many ticks this run stands for."""
HEADER_MANUAL = "periodiq_manual"
"""True for ``trigger()``: outside the schedule, no tolerance drop."""
HEADER_MIN_GAP = "periodiq_min_gap"
"""Milliseconds: the gap since the previous tick minus the tolerance, the earliest this
run may follow the last one."""
HEADER_FLOOR = "periodiq_floor"
"""Milliseconds: the least time between this run's start and the last run's, whatever
made either late (half an interval; absent under ``catchup="all"``)."""
HEADER_OVERLAP = "periodiq_overlap"
"""The entry's overlap policy, for the worker's non-final check."""
HEADER_GROUP = "periodiq_group"
"""The entry's group (its ``group``, else its ``owner``), for the worker's group limit
(``periodiq_group_limits``); absent for an entry with neither."""
HEADER_EXPIRES = "periodiq_expires"
"""Milliseconds since the epoch after which the run is refused (checked on the Redis clock)."""
HEADER_TTL = "periodiq_ttl"
"""Milliseconds the running marker lives: the run's hard limit."""
HEADER_CATCHUP = "periodiq_catchup"
"""True for a run sent too late to keep its place (a catch-up run): the worker's
too-soon rule neither drops it nor counts the next run from it."""
HEADER_BACKFILL = "periodiq_backfill"
"""True for a past tick published by ``backfill()``: no tolerance drop, and not dropped
for being older than the ticks the worker's guard remembers."""

HEADER_PERIODIC_TASK_NAME = "periodic_task_name"
"""The entry name again, under the name django-celery-beat gives it (its scheduler and its
admin's "run now" set it): django-celery-results stores it as ``TaskResult.
periodic_task_name``, and a task reads it as ``self.request.periodic_task_name``."""

_NAMESPACE_BYTES = uuid.UUID("6f1c3a52-5d2e-4c47-9a8e-0d4d1b9a7e10").bytes
"""The uuid5 namespace of task ids: never to change (stored histories refer to ids)."""


def entry_headers(name: str, overlap: str, group: str | None = None) -> dict[str, Any]:
    """The headers every message of an entry carries, its tick or none: its name (ours, and
    django-celery-beat's :data:`HEADER_PERIODIC_TASK_NAME`), its overlap policy and its
    group, if it has one."""
    headers = {HEADER_ENTRY: name, HEADER_OVERLAP: overlap, HEADER_PERIODIC_TASK_NAME: name}
    if group:
        headers[HEADER_GROUP] = group
    return headers


def task_id_for(prefix: str, name: str, nominal_ms: int | None, *, backfill: bool = False) -> str:
    """The Celery task id of a run of entry ``name`` under key prefix ``prefix``.

    A tick's run gets the uuid5 of prefix, name and its nominal instant (ms): the same
    tick always gets the same id. A backfill run of a tick (``backfill``) gets another
    id of its own, as steady; a manual run (``nominal_ms`` None: no tick) a random one.
    """
    if nominal_ms is None:
        return str(uuid.uuid4())
    if backfill:
        name = f"{name}\x00backfill"
    # uuid.uuid5, without building a UUID object (the beat derives one per tick)
    text = f"{prefix}\x00{name}\x00{nominal_ms}".encode()
    raw = bytearray(hashlib.sha1(_NAMESPACE_BYTES + text, usedforsecurity=False).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
