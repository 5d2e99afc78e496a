"""Fixed intervals (``@every 1h30m``, ``every=30``) anchored so restarts never drift."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.base import Schedule
from celery_periodiq.schedules.describe import describe_duration

__all__ = ["EPOCH", "IntervalSchedule", "every_spec", "micros", "parse_duration"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_UNITS = {"d": 86400_000_000, "h": 3600_000_000, "m": 60_000_000, "s": 1_000_000, "ms": 1000}
_PART = re.compile(r"(\d+)(ms|d|h|m|s)")
_ALLOWED = "a duration such as 30s, 1h30m, 2d or 500ms (units d, h, m, s, ms)"


def micros(instant: datetime) -> int:
    """Whole microseconds since the epoch (an aware datetime's instant, exactly)."""
    return (instant - EPOCH) // _MICROSECOND


def parse_duration(text: str, spec: str) -> timedelta:
    """Parse ``1h30m`` style durations.

    Raises:
        ScheduleError: malformed, or not longer than zero.
    """
    compact = text.replace(" ", "").lower()
    position = 0
    micros = 0
    seen: set[str] = set()
    while position < len(compact):
        match = _PART.match(compact, position)
        if match is None:
            raise ScheduleError(
                f"interval {shown(spec)}: {shown(text.strip())} is not a duration (allowed: "
                f"{_ALLOWED})"
            )
        unit = match.group(2)
        if unit in seen:
            raise ScheduleError(
                f"interval {shown(spec)}: unit {shown(unit)} appears twice (allowed: {_ALLOWED})"
            )
        seen.add(unit)
        micros += int(match.group(1)) * _UNITS[unit]
        position = match.end()
    if not compact:
        raise ScheduleError(f"interval {shown(spec)}: no duration given (allowed: {_ALLOWED})")
    if micros <= 0:
        raise ScheduleError(f"interval {shown(spec)}: the interval must be longer than zero")
    return timedelta(microseconds=micros)


def every_spec(every: float | timedelta) -> str:
    """The ``@every`` spec for an ``every=`` value given as seconds or a timedelta.

    Raises:
        ScheduleError: not a positive number of seconds or timedelta.
    """
    if isinstance(every, timedelta):
        micros = every // timedelta(microseconds=1)
    elif isinstance(every, int | float) and not isinstance(every, bool) and math.isfinite(every):
        micros = round(every * 1_000_000)
    else:
        raise ScheduleError(f"every={shown(every)}: not a number of seconds or a timedelta")
    if micros <= 0:
        raise ScheduleError(f"every={shown(every)}: the interval must be longer than zero")
    if micros % 1000:
        raise ScheduleError(f"every={shown(every)}: the smallest unit is a millisecond")
    parts = []
    for unit in ("d", "h", "m", "s", "ms"):
        count, micros = divmod(micros, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "@every " + "".join(parts)


class IntervalSchedule(Schedule):
    """Fires at ``anchor + k * period``; the anchor is ``start_at`` or the Unix epoch.

    Anchoring to a fixed instant, not to the last run, means every beat and
    every restart computes the same instants: nothing drifts.
    """

    kind: ClassVar[str] = "interval"

    def __init__(
        self,
        spec: str,
        period: timedelta,
        *,
        timezone: str = "UTC",
        key: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> None:
        super().__init__(spec, timezone=timezone, key=key, start_at=start_at, end_at=end_at)
        self.period = period
        self._period_us = period // timedelta(microseconds=1)

    def _bound(self, start_at: datetime | None, end_at: datetime | None) -> None:
        super()._bound(start_at, end_at)
        self.anchor = self.start_at or EPOCH
        self._anchor_us = micros(self.anchor)
        self._start_us = None if self.start_at is None else self._anchor_us
        self._end_us = None if self.end_at is None else micros(self.end_at)

    def next_micros(self, after: int) -> int | None:
        """:meth:`next_after` in whole microseconds since the epoch: the first fire
        strictly after ``after``, or None past ``end_at`` (what the beat plans a tick
        with, without a datetime; the same instant to the microsecond)."""
        if self._start_us is not None and after < self._start_us:
            after = self._start_us - 1
        fire = (
            self._anchor_us + ((after - self._anchor_us) // self._period_us + 1) * self._period_us
        )
        if self._end_us is not None and fire > self._end_us:
            return None
        return fire

    def _next(self, dt: datetime) -> datetime | None:
        elapsed = (dt - self.anchor) // _MICROSECOND
        steps = elapsed // self._period_us + 1
        fire = self.anchor + timedelta(microseconds=steps * self._period_us)
        return fire.astimezone(self.zone)

    def describe(self) -> str:
        """E.g. ``"every 1 hour 30 minutes"``."""
        text = f"every {describe_duration(self.period.total_seconds())}"
        if self.start_at is not None:
            text += f" from {self.start_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        return text
