"""Which ticks of a schedule are due: counted, and the newest listed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from celery_periodiq.model.instants import past_ms
from celery_periodiq.schedules import IntervalSchedule, Schedule

__all__ = ["due_ticks"]

# Counting missed ticks one by one stops here; beyond it the count is a floor.
_MAX_COUNTED = 10_000
_LOOKBACK = (
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=366),
    timedelta(days=366 * 10),
)


def due_ticks(
    schedule: Schedule, first: datetime, now: datetime, keep: int
) -> tuple[list[datetime], int]:
    """The newest ``keep`` ticks from ``first`` up to ``now`` (oldest first), and how many in all.

    The count is exact for intervals, and for other schedules up to
    ``_MAX_COUNTED``; beyond that it is a floor of the truth.
    """
    if isinstance(schedule, IntervalSchedule):
        period = schedule.period
        count = (now - first) // period + 1
        return [first + period * k for k in range(max(count - keep, 0), count)], count
    walked = [first, *_fires_between(schedule, first, now, _MAX_COUNTED - 1)]
    if len(walked) < _MAX_COUNTED:
        return walked[-keep:], len(walked)
    # Too many to walk one by one: collect the newest ones from a span just before now.
    current = walked[-1]
    for back in _LOOKBACK:
        start = max(current, now - back)
        recent = _fires_between(schedule, start, now, _MAX_COUNTED)
        if len(recent) >= keep or start == current:
            return [*walked, *recent][-keep:], len(walked) + len(recent)
    return walked[-keep:], len(walked)


def _fires_between(schedule: Schedule, start: datetime, end: datetime, most: int) -> list[datetime]:
    """Up to ``most`` fires after ``start``'s millisecond up to ``end``, in UTC."""
    fires: list[datetime] = []
    current = past_ms(start)
    while len(fires) < most:
        following = schedule.next_after(current)
        if following is None or following > end:
            break
        current = following.astimezone(UTC)
        fires.append(current)
    return fires
