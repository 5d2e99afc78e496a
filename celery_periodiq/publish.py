"""Turn an entry and a tick into a Celery message.

Every message of a tick carries, in its headers, the entry name, the tick's
nominal instant, its interval and how many ticks it stands for; the worker's
guards (task.py) read them back. The task id is derived from the tick, so a
tick published twice is recognisably the same run.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from celery import Celery

from celery_periodiq import policy
from celery_periodiq.entry import Entry
from celery_periodiq.plan import Tick, to_ms
from celery_periodiq.policy import Limits

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
    "message_options",
    "send",
]

# Celery's own expiry check uses the worker's clock, so it gets this much slack.
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


def message_options(
    entry: Entry, tick: Tick | None, manual: Limits | None = None
) -> dict[str, Any]:
    """``send_task`` keyword arguments for one run of ``entry``.

    ``tick`` None is a manual run, with the limits ``manual`` (see
    :func:`celery_periodiq.policy.now_limits`).
    """
    options: dict[str, Any] = dict(entry.options)
    headers: dict[str, Any] = {HEADER_ENTRY: entry.name, HEADER_OVERLAP: entry.overlap}
    if tick is None:
        limits = manual or Limits(None, None, None, None)
        headers[HEADER_MANUAL] = True
        headers[HEADER_TTL] = int(limits.marker_ttl * 1000)
        options["task_id"] = str(uuid.uuid4())
        if limits.timebox is not None and limits.time_limit is not None:
            options["soft_time_limit"], options["time_limit"] = limits.timebox, limits.time_limit
    else:
        headers[HEADER_TTL] = int(policy.marker_ttl(tick.time_limit, tick.interval) * 1000)
        headers[HEADER_TICK] = to_ms(tick.nominal)
        headers[HEADER_INTERVAL] = tick.interval
        headers[HEADER_MISSED] = tick.missed
        headers[HEADER_MIN_GAP] = policy.min_gap_ms(entry, tick.gap_before)
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


def send(
    app: Celery,
    entry: Entry,
    tick: Tick | None,
    producer: Any = None,
    manual: Limits | None = None,
) -> str:
    """Publish one run of ``entry`` (``tick=None``: a manual run with the limits
    ``manual``); returns its task id."""
    options = message_options(entry, tick, manual)
    app.send_task(
        entry.task, args=list(entry.args), kwargs=dict(entry.kwargs), producer=producer, **options
    )
    return str(options["task_id"])
