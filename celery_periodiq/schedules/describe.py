"""Short English sentences for compiled schedules ("at 02:30 every day, Europe/Berlin")."""

from __future__ import annotations

import itertools

from celery_periodiq.schedules.fields import ALL_HOURS, DayRule, Fields

__all__ = ["describe_duration", "describe_fields"]

_WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip # table: two rows of six months
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_ALL_SIXTY = tuple(range(60))
_MAX_LISTED_TIMES = 6


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and runs[-1][1] == value - 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _named(values: list[int], names: list[str], base: int) -> str:
    parts = []
    for low, high in _runs(values):
        if high - low >= 2:
            parts.append(f"{names[low - base]}–{names[high - base]}")
        else:
            parts.extend(names[value - base] for value in range(low, high + 1))
    return _join(parts)


def _step(values: tuple[int, ...], size: int) -> int | None:
    """The step if ``values`` is every n-th value of a cycle of ``size``, else None."""
    if len(values) < 2:
        return None
    step = values[1] - values[0]
    if size % step or len(values) != size // step:
        return None
    if all(b - a == step for a, b in itertools.pairwise(values)):
        return step
    return None


def _unit(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _clock(fields: Fields) -> str:
    seconds, minutes, hours = fields.seconds, fields.minutes, fields.hours
    with_seconds = seconds != (0,)
    every_hour = hours == ALL_HOURS
    if len(seconds) == len(minutes) == len(hours) == 1:
        second = f":{seconds[0]:02}" if with_seconds else ""
        return f"at {hours[0]:02}:{minutes[0]:02}{second}"
    if every_hour and minutes == _ALL_SIXTY and seconds == _ALL_SIXTY:
        return "every second"
    if every_hour and minutes == _ALL_SIXTY and len(seconds) == 1:
        return "every minute" if not with_seconds else f"every minute at second {seconds[0]}"
    if every_hour and minutes == _ALL_SIXTY and (step := _step(seconds, 60)):
        offset = f" from second {seconds[0]}" if seconds[0] else ""
        return f"every {_unit(step, 'second')}{offset}"
    if every_hour and len(seconds) == 1:
        at_second = f":{seconds[0]:02}" if with_seconds else ""
        if len(minutes) == 1:
            return f"every hour at :{minutes[0]:02}{at_second}"
        marks = ", ".join(f":{minute:02}{at_second}" for minute in minutes)
        if step := _step(minutes, 60):
            return f"every {_unit(step, 'minute')} ({marks})"
        return f"every hour at {marks}"
    if len(seconds) * len(minutes) * len(hours) <= _MAX_LISTED_TIMES:
        times = [
            f"{hour:02}:{minute:02}" + (f":{second:02}" if with_seconds else "")
            for hour in hours
            for minute in minutes
            for second in seconds
        ]
        return f"at {_join(times)}"
    parts = []
    if seconds != _ALL_SIXTY:
        parts.append(f"second {_numbers(seconds)}")
    parts.append("every minute" if minutes == _ALL_SIXTY else f"minute {_numbers(minutes)}")
    if not every_hour:
        parts.append(f"of hour {_numbers(hours)}")
    return "at " + " ".join(parts) if minutes != _ALL_SIXTY else " ".join(parts)


def _numbers(values: tuple[int, ...]) -> str:
    return ",".join(
        str(low) if low == high else f"{low}-{high}" for low, high in _runs(list(values))
    )


def _ordinal_day(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _by_date(rule: DayRule) -> list[str]:
    words = []
    if rule.days:
        words.append("day " + _numbers(tuple(sorted(rule.days))) + " of the month")
    last_days = len(rule.from_end)
    if last_days > 1 and rule.from_end == frozenset(range(last_days)):
        words.append(f"the last {last_days} days of the month")
    else:
        words.extend(
            f"the {_ordinal_day(back + 1)}-last day of the month"
            if back
            else "the last day of the month"
            for back in sorted(rule.from_end)
        )
    words.extend(
        f"the weekday nearest the {_ordinal_day(day)}" for day in sorted(rule.nearest_weekday)
    )
    if rule.last_weekday:
        words.append("the last weekday of the month")
    return words


def _by_weekday(rule: DayRule) -> list[str]:
    words = []
    if rule.weekdays:
        weekdays = sorted(rule.weekdays)
        # Sunday last reads better: Monday–Sunday, Saturday and Sunday
        weekdays = [day or 7 for day in weekdays]
        words.append(_named(sorted(weekdays), [*_WEEKDAYS[1:], _WEEKDAYS[0]], 1))
    words.extend(
        f"the {_ORDINALS[nth]} {_WEEKDAYS[weekday]}" for weekday, nth in sorted(rule.nth_weekdays)
    )
    words.extend(f"the last {_WEEKDAYS[weekday]}" for weekday in sorted(rule.last_weekdays))
    return words


def _days(fields: Fields) -> str:
    rule = fields.days
    by_date = _by_date(rule) if rule.dom_restricted else []
    by_weekday = _by_weekday(rule) if rule.dow_restricted else []
    if by_date and by_weekday:
        glue = " or on " if rule.either else ", if it is "
        text = "on " + _join(by_date) + glue + _join(by_weekday)
    elif by_date or by_weekday:
        text = "on " + _join(by_date or by_weekday)
    else:
        text = "every day"
    if fields.months != tuple(range(1, 13)):
        text += " in " + _named(list(fields.months), _MONTHS, 1)
    if fields.years is not None:
        text += " of " + _numbers(fields.years)
    return text


def describe_fields(fields: Fields, timezone: str) -> str:
    """Describe a cron or calendar schedule, ending with its time zone."""
    clock = _clock(fields)
    days = _days(fields)
    if days == "every day" and fields.hours == ALL_HOURS:
        return f"{clock}, {timezone}"
    return f"{clock} {days}, {timezone}"


def describe_duration(seconds: float) -> str:
    """``5400`` -> ``"1 hour 30 minutes"``."""
    whole = int(seconds)
    parts = []
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        count, whole = divmod(whole, size)
        if count:
            parts.append(_unit(count, unit))
    fraction = round(seconds - int(seconds), 6)
    if fraction:
        parts.append(f"{round(fraction * 1000, 3):g} ms")
    return " ".join(parts)
