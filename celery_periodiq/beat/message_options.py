"""A run's ``send_task`` options: the task id, the time limits, the broker's expiration
and the ``periodiq_*`` headers the worker's guard reads back (task.py).

The task id is derived from the tick, so a tick published twice is the same run.
"""

from __future__ import annotations

from typing import Any

from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import Tick, to_ms
from celery_periodiq.model.policy import Limits
from celery_periodiq.protocol.headers import (
    HEADER_CATCHUP,
    HEADER_EXPIRES,
    HEADER_FLOOR,
    HEADER_INTERVAL,
    HEADER_MANUAL,
    HEADER_MIN_GAP,
    HEADER_MISSED,
    HEADER_TICK,
    HEADER_TTL,
    entry_headers,
    task_id_for,
)

__all__ = ["message_options"]

# A broker that drops messages (RabbitMQ's per-message TTL) keeps a run this long past its
# expiry (or an interval, if longer): the worker's guard refuses it, recorded as expired.
_BROKER_MARGIN = 60.0


def message_options(
    entry: Entry, tick: Tick | None, manual: Limits | None = None, sent_at_ms: int | None = None
) -> dict[str, Any]:
    """``send_task`` keyword arguments for one run of ``entry``.

    ``tick`` None is a manual run, with the limits ``manual`` (see
    :func:`celery_periodiq.model.policy.now_limits`). ``sent_at_ms``: the Redis clock
    when the message is sent (default: the tick's instant).

    No host's clock judges a run's expiry: the worker's guard does, on the Redis clock
    (the ``periodiq_expires`` header). Celery gets no ``expires`` (it would judge it on
    the worker's clock), and the broker a duration measured on the Redis clock
    (``expiration``: RabbitMQ's per-message TTL; kombu's Redis transport has none).
    """
    options: dict[str, Any] = dict(entry.options)
    headers = entry_headers(entry.name, entry.overlap, entry.group or entry.owner)
    if tick is None:
        limits = manual or Limits(None, None, None, None)
        headers[HEADER_MANUAL] = True
        headers[HEADER_TTL] = int(limits.marker_ttl * 1000)
        options["task_id"] = task_id_for("", entry.name, None)  # no tick: a random id
        if limits.timebox is not None and limits.time_limit is not None:
            options["soft_time_limit"], options["time_limit"] = limits.timebox, limits.time_limit
    else:
        headers[HEADER_TTL] = int(policy.marker_ttl(tick.time_limit, tick.interval) * 1000)
        headers[HEADER_TICK] = to_ms(tick.nominal)
        headers[HEADER_INTERVAL] = tick.interval
        headers[HEADER_MISSED] = tick.missed
        headers[HEADER_MIN_GAP] = policy.min_gap_ms(entry, tick.gap_before)
        floor = policy.floor_ms(entry, entry.catchup, tick.interval, tick.gap_before)
        if floor:
            headers[HEADER_FLOOR] = floor
        if tick.catchup:
            headers[HEADER_CATCHUP] = True
        options["task_id"] = tick.task_id
        if tick.expires is not None:
            expires_ms = headers[HEADER_EXPIRES] = to_ms(tick.expires)
            sent_ms = to_ms(tick.nominal) if sent_at_ms is None else sent_at_ms
            waits = max(expires_ms - sent_ms, 0) / 1000
            options["expiration"] = waits + max(_BROKER_MARGIN, tick.interval)
        if tick.soft_time_limit is not None:
            options["soft_time_limit"] = tick.soft_time_limit
        if tick.time_limit is not None:
            options["time_limit"] = tick.time_limit
    options["headers"] = headers
    return options
