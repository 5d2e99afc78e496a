"""systemd calendar events (``OnCalendar=``) compiled to :class:`Fields`.

``[WEEKDAYS] [DATE] [TIME] [TIMEZONE]``, e.g. ``Mon..Fri *-*-* 09:00:00``,
``*-*-01 00:00:00``, ``Sat,Sun 10:00``, ``*:0/15``, ``*-02~01``, ``daily``.
"""

from __future__ import annotations

import re

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.fields import DayRule, Fields

__all__ = ["SHORTHANDS", "compile_calendar", "looks_like_calendar"]

SHORTHANDS = {
    "minutely": "*-*-* *:*:00",
    "hourly": "*-*-* *:00:00",
    "daily": "*-*-* 00:00:00",
    "weekly": "Mon *-*-* 00:00:00",
    "monthly": "*-*-01 00:00:00",
    "yearly": "*-01-01 00:00:00",
    "annually": "*-01-01 00:00:00",
    "quarterly": "*-01,04,07,10-01 00:00:00",
    "semiannually": "*-01,07-01 00:00:00",
}
_WEEKDAYS = {
    name: number
    for number, names in enumerate(
        [("sun", "sunday"), ("mon", "monday"), ("tue", "tuesday"), ("wed", "wednesday"),
         ("thu", "thursday"), ("fri", "friday"), ("sat", "saturday")]
    )
    for name in names
}  # fmt: skip # table: the seven days, four to a row
_NUMBER = re.compile(r"\d+")
_DATE_TOKEN = re.compile(r"[\d*,/]+(-[\d*,/]+){1,2}")
_ZONE_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_+\-/]*")
_WEEKDAY_TOKEN = re.compile(r"[A-Za-z][A-Za-z.,\-]*")


def looks_like_calendar(spec: str) -> bool:
    """Whether ``spec`` reads as a calendar event rather than a cron expression."""
    tokens = spec.strip().lower().split()
    if not tokens:
        return False
    if tokens[0] in SHORTHANDS or any(mark in spec for mark in (":", "..", "~")):
        return True
    if 5 <= len(tokens) <= 7:  # as many fields as cron has
        return False
    return any(_DATE_TOKEN.fullmatch(token) for token in tokens) or _names_weekdays(tokens[0])


def _names_weekdays(token: str) -> bool:
    words = re.split(r"\.\.|,|-", token.lower())
    return all(word in _WEEKDAYS for word in words)


class _Parser:
    def __init__(self, spec: str) -> None:
        self.spec = spec

    def error(self, part: str, problem: str, allowed: str) -> ScheduleError:
        return ScheduleError(f"calendar {shown(self.spec)}: {part}: {problem} (allowed: {allowed})")

    def component(self, text: str, part: str, low: int, high: int) -> list[int]:
        """``*``, numbers, ``A,B``, ``A..B``, ``A/S``, ``A..B/S``, ``*/S``."""
        allowed = f"{low}-{high}, *, lists A,B, ranges A..B, repetitions A/S"
        values: set[int] = set()
        for item in text.split(","):
            base, slash, step_text = item.partition("/")
            step = 1
            if slash:
                if not _NUMBER.fullmatch(step_text) or int(step_text) < 1:
                    raise self.error(
                        part, f"repetition {shown(item)} needs a step of 1 or more", allowed
                    )
                step = int(step_text)
            if base == "*":
                start, end = low, high
            elif ".." in base:
                start_text, _, end_text = base.partition("..")
                start = self.number(start_text, part, low, high, allowed)
                end = self.number(end_text, part, low, high, allowed)
                if start > end:
                    raise self.error(part, f"range {shown(base)} runs backwards", allowed)
            else:
                start = self.number(base, part, low, high, allowed)
                end = high if slash else start
            values.update(range(start, end + 1, step))
        return sorted(values)

    def number(self, text: str, part: str, low: int, high: int, allowed: str) -> int:
        if not _NUMBER.fullmatch(text):
            if part == "second" and re.fullmatch(r"\d+\.\d+", text):
                raise self.error(part, f"{shown(text)} has a fraction", "whole seconds 0-59")
            raise self.error(part, f"{shown(text)} is not a number", allowed)
        value = int(text)
        if not low <= value <= high:
            raise self.error(part, f"{value} is out of range", allowed)
        return value

    def weekdays(self, text: str) -> set[int]:
        allowed = "Mon..Sun or Monday..Sunday, lists Sat,Sun, ranges Mon..Fri"
        days: set[int] = set()
        for item in text.lower().split(","):
            separator = ".." if ".." in item else "-"
            start_text, found, end_text = item.partition(separator)
            if start_text not in _WEEKDAYS or (found and end_text not in _WEEKDAYS):
                raise self.error("weekday", f"{shown(item)} is not a weekday", allowed)
            start = (_WEEKDAYS[start_text] - 1) % 7  # Monday = 0 for range arithmetic
            end = (_WEEKDAYS[end_text] - 1) % 7 if found else start
            if start > end:
                raise self.error("weekday", f"range {shown(item)} runs backwards", allowed)
            days.update((day + 1) % 7 for day in range(start, end + 1))
        return days

    def date(self, text: str) -> tuple[tuple[int, ...] | None, list[int], DayRule]:
        from_end = "~" in text
        head, _, day_text = text.rpartition("~" if from_end else "-")
        pieces = head.split("-") if head else []
        if len(pieces) not in (1, 2) or not day_text:
            raise self.error(
                "date",
                f"{shown(text)} is not YYYY-MM-DD or MM-DD",
                "e.g. *-*-01, 2027-06-15, *-02~01",
            )
        year_text = pieces[0] if len(pieces) == 2 else "*"
        years = None if year_text == "*" else tuple(self.component(year_text, "year", 1970, 2099))
        months = self.component(pieces[-1], "month", 1, 12)
        if from_end:
            # ~N is the N-th last day; ~N/S walks from there toward the month's end.
            offsets: set[int] = set()
            for item in day_text.split(","):
                base, slash, step_text = item.partition("/")
                if slash:
                    start = self.number(base, "day", 1, 31, "~1-~31, ~N/S")
                    step = self.number(step_text, "day step", 1, 31, "a step of 1-31")
                    offsets.update(range(start - 1, -1, -step))
                else:
                    offsets.update(value - 1 for value in self.component(item, "day", 1, 31))
            rule = DayRule(from_end=frozenset(offsets), dom_restricted=True, either=False)
        elif day_text == "*":
            rule = DayRule(either=False)
        else:
            days = self.component(day_text, "day", 1, 31)
            rule = DayRule(days=frozenset(days), dom_restricted=True, either=False)
        return years, months, rule

    def time(self, text: str) -> tuple[list[int], list[int], list[int]]:
        pieces = text.split(":")
        if len(pieces) not in (2, 3):
            raise self.error(
                "time", f"{shown(text)} is not HH:MM or HH:MM:SS", "e.g. 09:00, *:0/15"
            )
        hours = self.component(pieces[0], "hour", 0, 23)
        minutes = self.component(pieces[1], "minute", 0, 59)
        seconds = self.component(pieces[2], "second", 0, 59) if len(pieces) == 3 else [0]
        return seconds, minutes, hours


def compile_calendar(spec: str) -> tuple[Fields, str | None]:
    """Compile a calendar event; returns the fields and the time zone it names, if any.

    Raises:
        ScheduleError: naming the part (weekday, date, time, ...), the value and what is allowed.
    """
    from celery_periodiq.schedules.zones import zone

    parser = _Parser(spec)
    tokens = spec.split()
    timezone = None
    if (
        len(tokens) > 1
        and _ZONE_TOKEN.fullmatch(tokens[-1])
        and ("/" in tokens[-1] or tokens[-1].upper() in ("UTC", "GMT"))
    ):
        timezone = tokens.pop()
        zone(timezone)
    if len(tokens) == 1 and tokens[0].lower() in SHORTHANDS:
        tokens = SHORTHANDS[tokens[0].lower()].split()
    if not tokens:
        raise ScheduleError(
            f"calendar {shown(spec)}: empty (allowed: e.g. 'Mon..Fri 09:00', 'daily')"
        )
    weekdays: set[int] | None = None
    if _WEEKDAY_TOKEN.fullmatch(tokens[0]) and tokens[0].lower() not in SHORTHANDS:
        weekdays = parser.weekdays(tokens.pop(0))
    date_text = tokens.pop(0) if tokens and ":" not in tokens[0] else "*-*-*"
    time_text = tokens.pop(0) if tokens else "00:00:00"
    if tokens:
        raise ScheduleError(
            f"calendar {shown(spec)}: unexpected {shown(' '.join(tokens))} "
            "(allowed: [WEEKDAYS] [DATE] [TIME] [TIMEZONE], e.g. 'Mon..Fri *-*-* 09:00:00')"
        )
    if ":" not in time_text:
        raise parser.error(
            "time", f"{shown(time_text)} is not HH:MM or HH:MM:SS", "e.g. 09:00, *:0/15"
        )
    years, months, rule = parser.date(date_text)
    if weekdays is not None:
        rule = DayRule(
            days=rule.days,
            from_end=rule.from_end,
            weekdays=frozenset(weekdays),
            dom_restricted=rule.dom_restricted,
            dow_restricted=True,
            either=False,
        )
    seconds, minutes, hours = parser.time(time_text)
    fields = Fields(
        seconds=tuple(seconds),
        minutes=tuple(minutes),
        hours=tuple(hours),
        months=tuple(months),
        years=years,
        days=rule,
    )
    if not fields.can_fire():
        raise ScheduleError(
            f"calendar {shown(spec)}: can never fire: no date matches {shown(date_text)}"
        )
    return fields, timezone
