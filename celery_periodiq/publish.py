"""Turn an entry and a tick into a Celery message.

Every message of a tick carries, in its headers, the entry name, the tick's
nominal instant, its interval and how many ticks it stands for; the worker's
guards (task.py) read them back. The task id is derived from the tick, so a
tick published twice is recognisably the same run.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery

from celery_periodiq.entry import Entry
from celery_periodiq.plan import Tick, to_ms
from celery_periodiq.schedules import IntervalSchedule

__all__ = [
    "HEADER_ENTRY",
    "HEADER_EXPIRES",
    "HEADER_INTERVAL",
    "HEADER_MANUAL",
    "HEADER_MIN_GAP",
    "HEADER_MISSED",
    "HEADER_OVERLAP",
    "HEADER_TICK",
    "HEADER_TTL",
    "marker_ttl",
    "send",
]

# Without a hard limit a dead worker's marker must still expire: after this many
# intervals, or this many seconds for runs with no interval.
_TTL_INTERVALS = 2
_TTL_FALLBACK = 3600.0
_MANUAL_GRACE = 10.0
_EXPIRY_SLACK = 60.0

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
HEADER_OVERLAP = "periodiq_overlap"
"""The entry's overlap policy, for the worker's non-final check."""
HEADER_EXPIRES = "periodiq_expires"
"""Milliseconds since the epoch after which the run is refused (checked on the Redis clock)."""
HEADER_TTL = "periodiq_ttl"
"""Milliseconds the running marker lives: the run's hard limit."""


def marker_ttl(tick: Tick | None) -> float:
    """Seconds a run's running marker lives: its hard limit, else two intervals."""
    if tick is not None and tick.time_limit is not None:
        return tick.time_limit
    if tick is not None and tick.interval > 0:
        return max(tick.interval * _TTL_INTERVALS, 1.0)
    return _TTL_FALLBACK


def manual_limits(entry: Entry) -> tuple[float | None, float | None]:
    """Soft and hard time limits of a manual run: the timebox of the entry's usual interval."""
    schedule = entry.parsed_schedule()
    if isinstance(schedule, IntervalSchedule):
        interval = schedule.period.total_seconds()
    else:
        fires = schedule.upcoming(datetime.now(UTC), 2)
        if len(fires) < 2:
            return None, None
        interval = (fires[1].astimezone(UTC) - fires[0].astimezone(UTC)).total_seconds()
    soft = entry.timebox_for(interval)
    if soft is None:
        return None, None
    return soft, soft + entry.grace_for(soft, _MANUAL_GRACE)


def message_options(entry: Entry, tick: Tick | None) -> dict[str, Any]:
    """``send_task`` keyword arguments for one run of ``entry``."""
    options: dict[str, Any] = dict(entry.options)
    headers: dict[str, Any] = {
        HEADER_ENTRY: entry.name,
        HEADER_OVERLAP: entry.overlap,
        HEADER_TTL: int(marker_ttl(tick) * 1000),
    }
    if tick is None:
        headers[HEADER_MANUAL] = True
        options["task_id"] = str(uuid.uuid4())
        soft, hard = manual_limits(entry)
        if soft is not None and hard is not None:
            options["soft_time_limit"], options["time_limit"] = soft, hard
            headers[HEADER_TTL] = int(hard * 1000)
    else:
        headers[HEADER_TICK] = to_ms(tick.nominal)
        headers[HEADER_INTERVAL] = tick.interval
        headers[HEADER_MISSED] = tick.missed
        gap = tick.gap_before
        headers[HEADER_MIN_GAP] = int((gap - entry.tolerance_for(gap)) * 1000)
        options["task_id"] = tick.task_id
        if tick.expires is not None:
            headers[HEADER_EXPIRES] = to_ms(tick.expires)
            # The worker's guard enforces the expiry on the Redis clock; Celery's own check
            # uses the worker's clock, so it only gets a generous backstop.
            slack = timedelta(seconds=max(_EXPIRY_SLACK, tick.interval))
            options["expires"] = tick.expires + slack
        if tick.soft_time_limit is not None:
            options["soft_time_limit"] = tick.soft_time_limit
        if tick.time_limit is not None:
            options["time_limit"] = tick.time_limit
    options["headers"] = headers
    return options


def send(app: Celery, entry: Entry, tick: Tick | None, producer: Any = None) -> str:
    """Publish one run of ``entry`` (``tick=None``: a manual run); returns its task id."""
    options = message_options(entry, tick)
    app.send_task(
        entry.task, args=list(entry.args), kwargs=dict(entry.kwargs), producer=producer, **options
    )
    return str(options["task_id"])
