"""Turn an entry and a tick into a Celery message.

Every message of a tick carries, in its headers, the entry name, the tick's
nominal instant, its interval and how many ticks it stands for; the worker's
guards (task.py) read them back. The task id is derived from the tick, so a
tick published twice is recognisably the same run.
"""

from __future__ import annotations

import uuid
from typing import Any

from celery import Celery

from celery_periodiq.entry import Entry
from celery_periodiq.plan import Tick, to_ms

__all__ = [
    "HEADER_ENTRY",
    "HEADER_INTERVAL",
    "HEADER_MANUAL",
    "HEADER_MISSED",
    "HEADER_TICK",
    "send",
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


def message_options(entry: Entry, tick: Tick | None) -> dict[str, Any]:
    """``send_task`` keyword arguments for one run of ``entry``."""
    options: dict[str, Any] = dict(entry.options)
    headers: dict[str, Any] = {HEADER_ENTRY: entry.name}
    if tick is None:
        headers[HEADER_MANUAL] = True
        options["task_id"] = str(uuid.uuid4())
    else:
        headers[HEADER_TICK] = to_ms(tick.nominal)
        headers[HEADER_INTERVAL] = tick.interval
        headers[HEADER_MISSED] = tick.missed
        options["task_id"] = tick.task_id
        options["expires"] = tick.expires
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
