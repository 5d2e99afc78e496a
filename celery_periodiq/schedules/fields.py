"""What a calendar-based schedule matches: sets of seconds, minutes, hours,
months and years, and the exact rule for which days of a month fire.

Cron and systemd calendar expressions both compile to :class:`Fields`; the
engine then needs to know nothing about either syntax.
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["ALL_HOURS", "DayRule", "Fields"]

ALL_HOURS = tuple(range(24))


@dataclass(frozen=True, slots=True)
class DayRule:
    """Which days of a given month match.

    Weekdays use cron numbering: 0 = Sunday ... 6 = Saturday.
    """

    days: frozenset[int] = frozenset()
    """Plain days of the month, 1-31."""
    from_end: frozenset[int] = frozenset()
    """Days counted from the end: 0 is the last day, 1 the day before it."""
    nearest_weekday: frozenset[int] = frozenset()
    """Cron ``nW``: the Monday-Friday day nearest to day n, in the same month."""
    last_weekday: bool = False
    """Cron ``LW``: the last Monday-Friday day of the month."""
    weekdays: frozenset[int] = frozenset()
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()
    """Cron ``d#k``: (weekday, k) for the k-th such weekday of the month."""
    last_weekdays: frozenset[int] = frozenset()
    """Cron ``dL``: the last such weekday of the month."""
    dom_restricted: bool = False
    dow_restricted: bool = False
    either: bool = True
    """True: a day matches if day-of-month OR day-of-week does (cron, when both are
    restricted and neither starts with ``*`` or ``?``). False: both must (cron
    otherwise, as crontab(5) says; systemd calendar always)."""

    def matching_days(self, year: int, month: int) -> frozenset[int]:
        """The days of ``year``-``month`` that match, computed exactly."""
        return _matching_days(self, year, month)


@functools.lru_cache(maxsize=8192)
def _matching_days(rule: DayRule, year: int, month: int) -> frozenset[int]:
    first_weekday, length = calendar.monthrange(year, month)
    first = (first_weekday + 1) % 7  # Python's Monday=0 to cron's Sunday=0

    def weekday(day: int) -> int:
        return (first + day - 1) % 7

    by_date: set[int] = {day for day in rule.days if day <= length}
    by_date.update(length - back for back in rule.from_end if back < length)
    for day in rule.nearest_weekday:
        if day <= length:
            by_date.add(_nearest_weekday(day, weekday(day), length))
    if rule.last_weekday:
        by_date.add(_nearest_weekday(length, weekday(length), length))

    by_weekday: set[int] = {day for day in range(1, length + 1) if weekday(day) in rule.weekdays}
    for wanted, nth in rule.nth_weekdays:
        day = 1 + (wanted - first) % 7 + 7 * (nth - 1)
        if day <= length:
            by_weekday.add(day)
    for wanted in rule.last_weekdays:
        by_weekday.add(length - (weekday(length) - wanted) % 7)

    every_day = frozenset(range(1, length + 1))
    if rule.dom_restricted and rule.dow_restricted:
        return frozenset(by_date | by_weekday if rule.either else by_date & by_weekday)
    if rule.dom_restricted:
        return frozenset(by_date)
    if rule.dow_restricted:
        return frozenset(by_weekday)
    return every_day


def _nearest_weekday(day: int, weekday: int, length: int) -> int:
    if weekday == 6:  # Saturday: Friday before, or Monday after at the month's start
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday: Monday after, or Friday before at the month's end
        return day + 1 if day < length else day - 2
    return day


@dataclass(frozen=True, slots=True)
class Fields:
    """The compiled form of a cron or calendar expression."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...] | None
    """None: every year."""
    days: DayRule
    _second_set: frozenset[int] = field(init=False, repr=False, compare=False)
    _minute_set: frozenset[int] = field(init=False, repr=False, compare=False)
    _hour_set: frozenset[int] = field(init=False, repr=False, compare=False)
    _month_set: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_second_set", frozenset(self.seconds))
        object.__setattr__(self, "_minute_set", frozenset(self.minutes))
        object.__setattr__(self, "_hour_set", frozenset(self.hours))
        object.__setattr__(self, "_month_set", frozenset(self.months))

    @property
    def real_time(self) -> bool:
        """Whether every hour matches: such schedules follow real time through DST."""
        return self.hours == ALL_HOURS

    def matches_date(self, year: int, month: int, day: int) -> bool:
        """Whether the date matches month, year and the day rule."""
        if month not in self._month_set:
            return False
        if self.years is not None and year not in self.years:
            return False
        return day in self.days.matching_days(year, month)

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall time ``wall`` matches every field exactly."""
        return (
            wall.second in self._second_set
            and wall.minute in self._minute_set
            and wall.hour in self._hour_set
            and self.matches_date(wall.year, wall.month, wall.day)
        )

    def can_fire(self) -> bool:
        """Whether some date ever matches (false for e.g. the 30th of February)."""
        # Day rules depend on a month's length and first weekday only; the
        # 28 years from 2001 hold every combination of both for every month.
        years = self.years if self.years is not None else range(2001, 2029)
        return any(self.days.matching_days(year, month) for year in years for month in self.months)
