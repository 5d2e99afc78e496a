"""Reading the audit trail: who changed what, one entry's or the whole schedule's,
filtered by when (``since=``: an instant, or a duration back from now) and by whom. The
trail itself is written by the scripts that make each change (``lua/_common.lua``).

The functions that take a :class:`Store` run inside the caller's
:meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from celery_periodiq.errors import EntryError, ScheduleError, shown
from celery_periodiq.model.instants import from_ms, to_ms
from celery_periodiq.ops.steer import check_count, check_name
from celery_periodiq.protocol.audit import AuditRecord
from celery_periodiq.schedules.interval import parse_duration
from celery_periodiq.schedules.once import parse_instant
from celery_periodiq.store.store import Store

__all__ = ["Since", "audit_records", "since_ms"]

Since = datetime | timedelta | float | str
"""A ``since=``: an aware datetime or ISO 8601 text with an offset, a duration back from
now (a timedelta, ``"2h"``, ``"7d"``) or seconds back from now."""

_ALLOWED = (
    "an aware datetime or ISO 8601 with an offset, a duration back from now such as '2h' "
    "or '7d', or seconds back from now"
)


def since_ms(value: Since | None, now_ms: int) -> int | None:
    """The instant (ms) a ``since=value`` given at ``now_ms`` means; None for no bound.

    Raises:
        EntryError: not an instant or a duration (or a duration not above zero).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise EntryError(f"since={shown(value)} is invalid (allowed: {_ALLOWED})")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise EntryError(f"since={shown(value)} is invalid: seconds back must be > 0")
        return now_ms - math.ceil(value * 1000)
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise EntryError(f"since={shown(str(value))} is invalid: the duration must be > 0")
        return now_ms - math.ceil(value / timedelta(milliseconds=1))
    if isinstance(value, str) and not any(c in value for c in "-:T"):
        try:
            back = parse_duration(value, value)
        except ScheduleError:
            raise EntryError(f"since={shown(value)} is invalid (allowed: {_ALLOWED})") from None
        return now_ms - math.ceil(back / timedelta(milliseconds=1))
    try:
        return to_ms(parse_instant(value, "since"))
    except ScheduleError as error:
        raise EntryError(f"{error}; a duration such as '2h' is allowed too") from None


def check_actor_filter(actor: object) -> str | None:
    """An ``actor=`` filter: None, or non-empty text.

    Raises:
        EntryError: anything else.
    """
    if actor is None:
        return None
    if not isinstance(actor, str) or not actor:
        raise EntryError(f"actor={shown(actor)} is invalid (allowed: non-empty text)")
    return actor


def audit_records(
    store: Store,
    name: str | None,
    *,
    since: Since | None = None,
    actor: str | None = None,
    limit: int | None = 100,
) -> list[AuditRecord]:
    """The audit records of ``name`` (None: every entry, deleted ones within the window),
    newest first: those at or after ``since``, by an actor whose name contains ``actor``,
    at most ``limit`` (None: all).

    Raises:
        EntryError: a bad name, ``since``, ``actor`` or ``limit`` (nothing is read).
    """
    if name is not None:
        check_name(name)
    if limit is not None:
        check_count("limit", limit)
    who = check_actor_filter(actor)
    start = since_ms(since, store.now_ms())
    if name is not None:
        found = store.audit_trail(name)
    else:  # the newest trails only, unless an actor filter may leave most records out
        found = store.audit_trails(start, limit if who is None else None)
    kept = [
        record
        for record in found
        if (start is None or record.at >= from_ms(start)) and (who is None or who in record.actor)
    ]
    return kept if limit is None else kept[:limit]
