"""Cron expressions (5, 6 and 7 fields, seconds first) compiled to :class:`Fields`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.fields import DayRule, Fields

__all__ = ["MACROS", "compile_cron"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_HASH = re.compile(r"H(?:\((\d+)-(\d+)\))?(?:/(\d+))?")
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0
    hash_low: int | None = None
    hash_high: int | None = None

    @property
    def allowed(self) -> str:
        text = f"{self.low}-{self.high}"
        if self.names:
            text += f" or {self.names[0]}-{self.names[-1]}"
        return text


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31, hash_low=1, hash_high=28)
_MONTH = _Field("month", 1, 12, tuple(_MONTHS), name_base=1)
_DOW = _Field("day-of-week", 0, 7, tuple(_WEEKDAYS), hash_low=0, hash_high=6)
_YEAR = _Field("year", 1970, 2099)

_LAYOUTS = {
    5: (None, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, None),
    6: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, None),
    7: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, _YEAR),
}


class _Parser:
    """Parses one expression; holds the spec and key so errors can name them."""

    def __init__(self, spec: str, key: str | None) -> None:
        self.spec = spec
        self.key = key

    def error(self, where: _Field, problem: str, allowed: str | None = None) -> ScheduleError:
        allowed = allowed or where.allowed
        return ScheduleError(
            f"cron {shown(self.spec)}: {where.name} field: {problem} (allowed: {allowed})"
        )

    def number(self, token: str, where: _Field) -> int:
        upper = token.upper()
        if where.names and upper in where.names:
            return where.names.index(upper) + where.name_base
        if not _NUMBER.fullmatch(token):
            return self._not_a_value(token, where)
        value = int(token)
        if not where.low <= value <= where.high:
            raise self.error(where, f"{value} is out of range")
        return value

    def _not_a_value(self, token: str, where: _Field) -> int:
        raise self.error(where, f"{shown(token)} is not a value")

    def step(self, token: str, where: _Field) -> int:
        span = where.high - where.low + 1
        if not _NUMBER.fullmatch(token) or not 1 <= int(token) <= span:
            raise self.error(where, f"step {shown(token)} is not a whole number from 1 to {span}")
        return int(token)

    def hashed(self, match: re.Match[str], where: _Field) -> list[int]:
        if self.key is None:
            raise self.error(where, "H needs a key to hash", "H with key=, usually the entry name")
        low = where.hash_low if where.hash_low is not None else where.low
        high = where.hash_high if where.hash_high is not None else where.high
        if match.group(1) is not None:
            low, high = self.number(match.group(1), where), self.number(match.group(2), where)
            if low > high:
                raise self.error(where, f"range H({low}-{high}) runs backwards")
        digest = hashlib.sha256(f"{self.key}\x00{where.name}".encode()).digest()
        value = int.from_bytes(digest[:8], "big")
        if match.group(3) is None:
            return [low + value % (high - low + 1)]
        step = self.step(match.group(3), where)
        return list(range(low + value % step, high + 1, step))

    def values(self, item: str, where: _Field) -> list[int]:
        if hashed := _HASH.fullmatch(item):
            return self.hashed(hashed, where)
        base, slash, step_text = item.partition("/")
        step = self.step(step_text, where) if slash else 1
        if base == "*":
            low, high = where.low, where.high
        elif "-" in base:
            start, _, end = base.partition("-")
            low, high = self.number(start, where), self.number(end, where)
            if where is _DOW and high == 0:
                high = 7  # FRI-SUN
            if low > high:
                raise self.error(where, f"range {shown(base)} runs backwards")
        else:
            low = self.number(base, where)
            high = where.high if slash else low
        if where is _DOW and base == "*":
            high = 6
        return list(range(low, high + 1, step))

    def field(self, text: str, where: _Field) -> tuple[int, ...]:
        values: set[int] = set()
        for item in text.split(","):
            if not item:
                raise self.error(where, f"empty item in {shown(text)}")
            values.update(self.values(item, where))
        return tuple(sorted(values))

    def days(self, dom: str, dow: str) -> DayRule:
        days: set[int] = set()
        from_end: set[int] = set()
        nearest: set[int] = set()
        last_weekday = False
        weekdays: set[int] = set()
        nth: set[tuple[int, int]] = set()
        last_weekdays: set[int] = set()
        for item in dom.split(",") if dom != "?" else ["*"]:
            upper = item.upper()
            if upper == "L":
                from_end.add(0)
            elif upper == "LW":
                last_weekday = True
            elif upper.startswith("L-"):
                back = upper[2:]
                if not _NUMBER.fullmatch(back) or int(back) > 30:
                    raise self.error(
                        _DOM,
                        f"{shown(item)} is not L-n with n from 0 to 30",
                        "1-31, L, L-n, LW, nW",
                    )
                from_end.add(int(back))
            elif upper.endswith("W") and _NUMBER.fullmatch(upper[:-1]):
                nearest.add(self.number(upper[:-1], _DOM))
            elif not item:
                raise self.error(_DOM, f"empty item in {shown(dom)}")
            else:
                days.update(self.values(item, _DOM))
        for item in dow.split(",") if dow != "?" else ["*"]:
            if "#" in item:
                weekday_text, _, nth_text = item.partition("#")
                if not nth_text.isdigit() or not 1 <= int(nth_text) <= 5:
                    raise self.error(_DOW, f"{shown(item)}: the week number after # must be 1-5")
                nth.add((self.number(weekday_text, _DOW) % 7, int(nth_text)))
            elif len(item) > 1 and item.upper().endswith("L"):
                last_weekdays.add(self.number(item[:-1], _DOW) % 7)
            elif not item:
                raise self.error(_DOW, f"empty item in {shown(dow)}")
            else:
                weekdays.update(value % 7 for value in self.values(item, _DOW))
        return DayRule(
            days=frozenset(days),
            from_end=frozenset(from_end),
            nearest_weekday=frozenset(nearest),
            last_weekday=last_weekday,
            weekdays=frozenset(weekdays),
            nth_weekdays=frozenset(nth),
            last_weekdays=frozenset(last_weekdays),
            dom_restricted=dom not in ("*", "?"),
            dow_restricted=dow not in ("*", "?"),
            # crontab(5): either day field may match only when both are restricted, that
            # is, neither starts with "*" (nor "?"); "*/2" with a weekday means both.
            either=not (dom.startswith(("*", "?")) or dow.startswith(("*", "?"))),
        )


def compile_cron(spec: str, key: str | None = None) -> Fields:
    """Compile a cron expression or macro.

    Args:
        spec: 5 fields (minute first), 6 (seconds first) or 7 (seconds first,
            year last), or one of :data:`MACROS`.
        key: what ``H`` hashes, usually the entry name.

    Raises:
        ScheduleError: naming the field, the value and what is allowed.
    """
    text = MACROS.get(spec.strip().lower(), spec)
    parts = text.split()
    layout = _LAYOUTS.get(len(parts))
    if layout is None:
        raise ScheduleError(
            f"cron {shown(spec)}: has {len(parts)} fields (allowed: 5 fields 'minute hour "
            "day-of-month month day-of-week', 6 with seconds first, 7 with a year last)"
        )
    parser = _Parser(spec, key)
    fields: dict[str, str] = {}
    for where, part in zip(layout, [None, *parts] if len(parts) == 5 else parts, strict=False):
        if where is not None and part is not None:
            fields[where.name] = part
    for name, part in fields.items():
        if "?" in part and name not in ("day-of-month", "day-of-week"):
            raise ScheduleError(
                f"cron {shown(spec)}: {name} field: '?' is only allowed in day-of-month and "
                "day-of-week"
            )
        if part == "?" and name in ("day-of-month", "day-of-week"):
            continue
        if "?" in part:
            raise ScheduleError(f"cron {shown(spec)}: {name} field: '?' must stand alone")
    compiled = Fields(
        seconds=parser.field(fields["second"], _SECOND) if "second" in fields else (0,),
        minutes=parser.field(fields["minute"], _MINUTE),
        hours=parser.field(fields["hour"], _HOUR),
        months=parser.field(fields["month"], _MONTH),
        years=_years(parser, fields.get("year")),
        days=parser.days(fields["day-of-month"], fields["day-of-week"]),
    )
    if not compiled.can_fire():
        raise ScheduleError(
            f"cron {shown(spec)}: can never fire: no date matches day-of-month "
            f"{shown(fields['day-of-month'])} with day-of-week {shown(fields['day-of-week'])} in "
            "month "
            f"{shown(fields['month'])}"
            + (f" of year {shown(fields['year'])}" if "year" in fields else "")
        )
    return compiled


def _years(parser: _Parser, text: str | None) -> tuple[int, ...] | None:
    if text is None or text == "*":
        return None
    if "H" in text.upper():
        raise parser.error(_YEAR, "H cannot be used for the year")
    return parser.field(text, _YEAR)
