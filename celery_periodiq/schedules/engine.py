"""The engine behind cron and calendar schedules.

croniter proposes the next matching wall-clock time; every proposal is
checked against the exact :class:`Fields` before it is accepted, because
croniter gets some edges wrong (see ``tests/test_croniter_regressions.py``).
The DST rules are applied here, on top of naive wall times.
"""

from __future__ import annotations

import bisect
import threading
from datetime import UTC, datetime, timedelta, tzinfo
from typing import ClassVar

from croniter import CroniterBadDateError, croniter

from celery_periodiq.schedules.base import Schedule
from celery_periodiq.schedules.describe import describe_fields
from celery_periodiq.schedules.fields import DayRule, Fields
from celery_periodiq.schedules.zones import first_transition, is_fixed, resolve_wall

__all__ = ["CalendarSchedule", "CronSchedule", "FieldSchedule", "croniter_expression"]

_SECOND = timedelta(seconds=1)
# Proposals croniter may make before we give up; far beyond any real rule.
_MAX_PROPOSALS = 100_000


def _listing(values: tuple[int, ...] | list[int], low: int, high: int) -> str:
    if list(values) == list(range(low, high + 1)):
        return "*"
    return ",".join(str(value) for value in values)


def _dom_superset(rule: DayRule, plain: bool) -> str:
    """croniter's day-of-month field: exact where croniter is right, a superset elsewhere.

    ``plain``: use numbers only; croniter mishandles ``L`` when both day fields count.
    """
    only_last = rule.from_end == {0} and not (
        rule.days or rule.nearest_weekday or rule.last_weekday
    )
    if only_last and not plain:
        return "L"
    days = set(rule.days)
    for back in rule.from_end:  # a month's last day is the 28th to the 31st
        days.update(range(max(1, 28 - back), 32 - back))
    for day in rule.nearest_weekday:
        days.update(range(max(1, day - 2), min(31, day + 2) + 1))
    if rule.last_weekday:
        days.update(range(26, 32))
    return _listing(sorted(days), 1, 31)


def _dow_superset(rule: DayRule, plain: bool) -> str:
    """croniter's day-of-week field; ``plain``: weekday numbers only (no ``#`` or ``L``)."""
    if not plain and not rule.weekdays and not rule.last_weekdays and len(rule.nth_weekdays) == 1:
        weekday, nth = next(iter(rule.nth_weekdays))
        return f"{weekday}#{nth}"
    if not plain and not rule.weekdays and not rule.nth_weekdays and len(rule.last_weekdays) == 1:
        return f"L{next(iter(rule.last_weekdays))}"
    weekdays = set(rule.weekdays) | {weekday for weekday, _ in rule.nth_weekdays}
    weekdays |= rule.last_weekdays
    return _listing(sorted(weekdays), 0, 6)


def croniter_expression(fields: Fields) -> tuple[str, bool]:
    """The seconds-first croniter expression proposing candidates, and its ``day_or``."""
    rule = fields.days
    both = rule.dom_restricted and rule.dow_restricted
    dom = _dom_superset(rule, plain=both) if rule.dom_restricted else "*"
    dow = _dow_superset(rule, plain=both) if rule.dow_restricted else "*"
    if rule.dom_restricted and rule.dow_restricted and rule.either and "*" in (dom, dow):
        dom = dow = "*"  # one side matches every day, so every day matches
    parts = [
        _listing(fields.seconds, 0, 59),
        _listing(fields.minutes, 0, 59),
        _listing(fields.hours, 0, 23),
        dom,
        _listing(fields.months, 1, 12),
        dow,
    ]
    return " ".join(parts), rule.either


class _Proposer:
    """croniter, asked for naive wall times and checked against the exact fields."""

    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        expression, day_or = croniter_expression(fields)
        seconds_first = fields.seconds != (0,)
        if not seconds_first:
            expression = expression.partition(" ")[2]  # plain 5 fields: croniter's fast path
        self._croniter = croniter(
            expression,
            datetime(2000, 1, 1),
            ret_type=datetime,
            day_or=day_or,
            second_at_beginning=seconds_first,
        )
        self._lock = threading.Lock()  # a croniter object is stateful

    def after(self, wall: datetime) -> datetime | None:
        """The first matching naive wall time strictly after ``wall`` (whole seconds)."""
        fields = self.fields
        years = fields.years
        start = wall
        for _ in range(_MAX_PROPOSALS):
            try:
                with self._lock:
                    self._croniter.set_current(start, force=True)
                    proposal: datetime = self._croniter.get_next(datetime)
            except (CroniterBadDateError, OverflowError, ValueError):
                return None
            if years is not None and proposal.year not in years:
                # croniter's own year field misses leap days (2028-02-29): years are ours.
                later = bisect.bisect_right(years, proposal.year)
                if later == len(years) or proposal.year > years[-1]:
                    return None
                start = datetime(years[later], 1, 1) - _SECOND
                continue
            if not fields.matches_date(proposal.year, proposal.month, proposal.day):
                start = proposal.replace(hour=23, minute=59, second=59)
                continue
            if not fields.matches(proposal):
                start = proposal
                continue
            return proposal
        return None


class FieldSchedule(Schedule):
    """A schedule defined by field sets: the shared engine of cron and calendar forms."""

    def __init__(
        self,
        spec: str,
        fields: Fields,
        *,
        timezone: str = "UTC",
        key: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> None:
        super().__init__(spec, timezone=timezone, key=key, start_at=start_at, end_at=end_at)
        self.fields = fields
        self._proposer = _Proposer(fields)
        self._fixed = is_fixed(self.zone)

    def _next(self, dt: datetime) -> datetime | None:
        zone = self.zone
        local = dt.astimezone(zone)
        wall = local.replace(tzinfo=None, microsecond=0, fold=0)
        if self._fixed:
            fire = self._proposer.after(wall)
            return None if fire is None else fire.replace(tzinfo=zone)
        if self.fields.real_time:
            return self._next_real_time(dt, local, zone)
        return self._next_wall_clock(dt, wall, zone)

    def _next_wall_clock(self, dt: datetime, wall: datetime, zone: tzinfo) -> datetime | None:
        # Each matching wall time fires once: at its first reading, or at the end
        # of the gap that swallowed it. Wall times before dt's reading may map to
        # instants not after dt (dt in a repeated hour), so keep walking.
        while True:
            proposal = self._proposer.after(wall)
            if proposal is None:
                return None
            fire = resolve_wall(proposal, zone)
            if fire > dt:
                return fire
            wall = proposal

    def _next_real_time(self, dt: datetime, local: datetime, zone: tzinfo) -> datetime | None:
        # Between two offset changes wall time runs with real time, so the next
        # match in the current offset is right unless an offset change comes
        # first; then start again from the change, reading the new offset.
        segment_start = dt
        wall = local.replace(tzinfo=None, microsecond=0, fold=0)
        offset = local.utcoffset()
        assert offset is not None
        while True:
            proposal = self._proposer.after(wall)
            if proposal is None:
                return None
            fire = (proposal - offset).replace(tzinfo=UTC)
            change = first_transition(segment_start, fire, zone, offset)
            if change is None:
                return fire.astimezone(zone)
            segment_start = change
            reading = change.astimezone(zone)
            offset = reading.utcoffset()
            assert offset is not None
            wall = reading.replace(tzinfo=None, fold=0) - _SECOND

    def describe(self) -> str:
        """A short sentence, e.g. ``"at 02:30 every day, Europe/Berlin"``."""
        return describe_fields(self.fields, self.timezone)


class CronSchedule(FieldSchedule):
    """A cron expression: 5 fields, 6 (seconds first) or 7 (year last), or a macro."""

    kind: ClassVar[str] = "cron"


class CalendarSchedule(FieldSchedule):
    """A systemd ``OnCalendar=`` calendar event."""

    kind: ClassVar[str] = "calendar"
