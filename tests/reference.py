"""Independent brute-force reference for docs/schedule-semantics.md.

Standard library only: it must not share code (croniter, celery, celery_periodiq) with the
production engine it is compared against.

Method: walk calendar days (naive local dates) in the schedule's zone, decide whether a date
matches by evaluating the day rules on that very date, and for matching dates look at the
matching wall times of day in increasing order.  Wall times are mapped to real instants per the
DST rules of the contract.  To stay fast for every-second schedules the wall clock of a day is cut
into stretches of constant UTC offset (found by scanning ``utcoffset`` and bisecting); inside one
stretch the wall -> instant map is a plain shift, so the first matching wall time after a bound is
found with a bisection in the sorted hour/minute/second lists instead of a second-by-second walk.
The final answer is re-checked with fold-aware ``zoneinfo`` conversions.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "EPOCH",
    "ClockSchedule",
    "EventSchedule",
    "IntervalSchedule",
    "jenkins_hash",
    "parse_reference",
    "reference_next_after",
    "zone_transitions",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SEC = timedelta(seconds=1)
_ONE_DAY = timedelta(days=1)
_ONE_US = timedelta(microseconds=1)
# Instants reading the wall times of one local date lie within this margin of that date (UTC).
_MARGIN = timedelta(hours=30)

# --------------------------------------------------------------------------------------------
# Parsed forms
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClockSchedule:
    """A cron or calendar schedule: a day predicate plus sorted times of day."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    years: frozenset[int] | None
    day_ok: Callable[[date], bool]
    zone: str | None = None  # calendar trailing zone (replaces the tz argument)

    @property
    def realtime(self) -> bool:
        return self.hours == tuple(range(24))


@dataclass(frozen=True)
class IntervalSchedule:
    period: timedelta


@dataclass(frozen=True)
class EventSchedule:
    name: str


Parsed = ClockSchedule | IntervalSchedule | EventSchedule

# --------------------------------------------------------------------------------------------
# Cron
# --------------------------------------------------------------------------------------------

_CRON_RANGES: dict[str, tuple[int, int]] = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
    "year": (1970, 2099),
}
_H_RANGES: dict[str, tuple[int, int]] = {
    **_CRON_RANGES,
    "day-of-month": (1, 28),
    "day-of-week": (0, 6),
}
_MONTH_NAMES = {
    name: i + 1
    for i, name in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_DOW_NAMES = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def jenkins_hash(key: str, field: str) -> int:
    """The contract's H hash: first 8 bytes of sha256(f"{key}\\x00{field}"), big endian."""
    return int.from_bytes(hashlib.sha256(f"{key}\x00{field}".encode()).digest()[:8], "big")


def _cron_number(text: str, field: str) -> int:
    if text.isdigit():
        value = int(text)
    elif field == "month" and text in _MONTH_NAMES:
        value = _MONTH_NAMES[text]
    elif field == "day-of-week" and text in _DOW_NAMES:
        value = _DOW_NAMES[text]
    else:
        raise ValueError(f"bad {field} value {text!r}")
    lo, hi = _CRON_RANGES[field]
    if not lo <= value <= hi:
        raise ValueError(f"{field} value {value} out of range {lo}-{hi}")
    return value


def _cron_step(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"bad step {text!r}")
    return int(text)


def _cron_values(item: str, field: str, key: str | None) -> set[int]:
    """Expand one plain (non-special) list item into its values."""
    lo, hi = _CRON_RANGES[field]
    base, slash, step_text = item.partition("/")
    step = _cron_step(step_text) if slash else None
    if base.startswith("H"):
        if field == "year":
            raise ValueError("H is not allowed in the year field")
        if key is None:
            raise ValueError("H requires a key")
        h = jenkins_hash(key, field)
        if base == "H":
            a, b = _H_RANGES[field]
        else:
            m = re.fullmatch(r"H\(([0-9A-Z]+)-([0-9A-Z]+)\)", base)
            if m is None:
                raise ValueError(f"bad H item {item!r}")
            a, b = _cron_number(m.group(1), field), _cron_number(m.group(2), field)
            if a > b:
                raise ValueError(f"bad H range {item!r}")
        if step is None:
            return {a + h % (b - a + 1)}
        return set(range(a + h % step, b + 1, step))
    if base in ("*", "?"):
        if base == "?" and (field not in ("day-of-month", "day-of-week") or slash):
            raise ValueError(f"'?' not allowed here: {item!r}")
        a, b = lo, hi
    elif "-" in base:
        a_text, _, b_text = base.partition("-")
        a, b = _cron_number(a_text, field), _cron_number(b_text, field)
        if field == "day-of-week" and b == 0:
            b = 7
        if a > b:
            raise ValueError(f"descending range {item!r}")
    else:
        a = _cron_number(base, field)
        b = hi if step is not None else a
    return set(range(a, b + 1, step or 1))


def _last_day(y: int, m: int) -> int:
    return calendar.monthrange(y, m)[1]


def _cron_dow(d: date) -> int:
    """0=Sunday .. 6=Saturday."""
    return (d.weekday() + 1) % 7


def _is_last_weekday_of_month(d: date) -> bool:
    """LW: d is Mon-Fri and every later day of its month is a Saturday or Sunday."""
    if d.weekday() >= 5:
        return False
    nxt = d + _ONE_DAY
    while nxt.month == d.month:
        if nxt.weekday() < 5:
            return False
        nxt += _ONE_DAY
    return True


def _nearest_weekday_day(y: int, m: int, n: int) -> int | None:
    """nW: the day of month that fires in (y, m), or None."""
    last = _last_day(y, m)
    if n > last:
        return None
    wd = date(y, m, n).weekday()
    if wd == 5:  # Saturday
        return n - 1 if n - 1 >= 1 else n + 2
    if wd == 6:  # Sunday
        return n + 1 if n + 1 <= last else n - 2
    return n


def _parse_dom(text: str, key: str | None) -> tuple[bool, Callable[[date], bool]]:
    nums: set[int] = set()
    from_end: set[int] = set()  # L-n -> n (L -> 0)
    nearest: set[int] = set()  # nW -> n
    last_weekday = False
    for item in text.split(","):
        if item == "L":
            from_end.add(0)
        elif m := re.fullmatch(r"L-(\d+)", item):
            n = int(m.group(1))
            if n > 30:
                raise ValueError(f"bad {item!r}")
            from_end.add(n)
        elif item == "LW":
            last_weekday = True
        elif m := re.fullmatch(r"(\d+)W", item):
            n = int(m.group(1))
            if not 1 <= n <= 31:
                raise ValueError(f"bad {item!r}")
            nearest.add(n)
        else:
            nums |= _cron_values(item, "day-of-month", key)

    def ok(d: date) -> bool:
        if d.day in nums:
            return True
        if from_end and (_last_day(d.year, d.month) - d.day) in from_end:
            return True
        if last_weekday and _is_last_weekday_of_month(d):
            return True
        return any(_nearest_weekday_day(d.year, d.month, n) == d.day for n in nearest)

    return text not in ("*", "?"), ok


def _parse_dow(text: str, key: str | None) -> tuple[bool, Callable[[date], bool]]:
    nums: set[int] = set()
    last_of: set[int] = set()  # dL
    nth: set[tuple[int, int]] = set()  # d#k
    for item in text.split(","):
        if m := re.fullmatch(r"([0-7]|[A-Z]{3})L", item):
            last_of.add(_cron_number(m.group(1), "day-of-week") % 7)
        elif m := re.fullmatch(r"([0-7]|[A-Z]{3})#(\d+)", item):
            k = int(m.group(2))
            if not 1 <= k <= 5:
                raise ValueError(f"bad {item!r}")
            nth.add((_cron_number(m.group(1), "day-of-week") % 7, k))
        else:
            nums |= {v % 7 for v in _cron_values(item, "day-of-week", key)}

    def ok(d: date) -> bool:
        wd = _cron_dow(d)
        if wd in nums:
            return True
        # last weekday d of the month: a week later is already the next month
        if wd in last_of and (d + timedelta(days=7)).month != d.month:
            return True
        return (wd, (d.day - 1) // 7 + 1) in nth

    return text not in ("*", "?"), ok


def _parse_cron(fields: list[str], key: str | None) -> ClockSchedule:
    fields = [f.upper() for f in fields]
    if len(fields) == 5:
        fields = ["0", *fields]
    year_text = fields[6] if len(fields) == 7 else None
    sec_t, min_t, hour_t, dom_t, mon_t, dow_t = fields[:6]

    def plain(text: str, field: str) -> tuple[int, ...]:
        values: set[int] = set()
        for item in text.split(","):
            values |= _cron_values(item, field, key)
        return tuple(sorted(values))

    seconds = plain(sec_t, "second")
    minutes = plain(min_t, "minute")
    hours = plain(hour_t, "hour")
    months = frozenset(plain(mon_t, "month"))
    years = frozenset(plain(year_text, "year")) if year_text is not None else None
    dom_restricted, dom_ok = _parse_dom(dom_t, key)
    dow_restricted, dow_ok = _parse_dow(dow_t, key)

    # Vixie cron (crontab(5)): a day field whose first character is "*" (our "?" too)
    # makes the day match both fields; only two restricted fields match either way.
    starred = dom_t.startswith(("*", "?")) or dow_t.startswith(("*", "?"))

    def day_ok(d: date) -> bool:
        if d.month not in months or (years is not None and d.year not in years):
            return False
        if dom_restricted and dow_restricted:
            return (dom_ok(d) and dow_ok(d)) if starred else (dom_ok(d) or dow_ok(d))
        if dom_restricted:
            return dom_ok(d)
        if dow_restricted:
            return dow_ok(d)
        return True

    return ClockSchedule(seconds, minutes, hours, months, years, day_ok)


# --------------------------------------------------------------------------------------------
# systemd calendar events
# --------------------------------------------------------------------------------------------

_CAL_WEEKDAYS = {
    "mon": 0,
    "monday": 0,
    "tue": 1,
    "tuesday": 1,
    "wed": 2,
    "wednesday": 2,
    "thu": 3,
    "thursday": 3,
    "fri": 4,
    "friday": 4,
    "sat": 5,
    "saturday": 5,
    "sun": 6,
    "sunday": 6,
}
_CAL_SHORTHANDS = {
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
_WEEKDAY_TOKEN = re.compile(r"[A-Za-z]+((\.\.|-)[A-Za-z]+)?(,[A-Za-z]+((\.\.|-)[A-Za-z]+)?)*")


def _cal_weekdays(token: str) -> frozenset[int]:
    out: set[int] = set()
    for item in token.split(","):
        parts = item.split("..") if ".." in item else item.split("-")
        names = [p.lower() for p in parts]
        if len(names) not in (1, 2) or any(n not in _CAL_WEEKDAYS for n in names):
            raise ValueError(f"bad weekday {item!r}")
        a, b = _CAL_WEEKDAYS[names[0]], _CAL_WEEKDAYS[names[-1]]
        if a > b:
            raise ValueError(f"descending weekday range {item!r}")
        out |= set(range(a, b + 1))
    return frozenset(out)


def _is_weekdays(token: str) -> bool:
    try:
        _cal_weekdays(token)
    except ValueError:
        return False
    return True


def _cal_component(text: str, lo: int, hi: int) -> set[int]:
    """`*`, N, lists, A..B, A/S (also lenient `*/S`, `A..B/S`); values within [lo, hi]."""
    out: set[int] = set()
    for item in text.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:\.\.(\d+))?(?:/(\d+))?", item)
        if m is None:
            raise ValueError(f"bad calendar component {item!r}")
        a_t, b_t, s_t = m.groups()
        if a_t == "*":
            if b_t is not None:
                raise ValueError(f"bad calendar component {item!r}")
            a, b = lo, hi
        else:
            a = int(a_t)
            b = int(b_t) if b_t is not None else (hi if s_t is not None else a)
        step = int(s_t) if s_t is not None else 1
        if step < 1 or not lo <= a <= b <= hi:
            raise ValueError(f"bad calendar component {item!r}")
        out |= set(range(a, b + 1, step))
    return out


def _cal_from_end(text: str) -> set[int]:
    """Day after `~`: 1 = last day.  A/S walks towards the month end (A, A-S, ... >= 1)."""
    out: set[int] = set()
    for item in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\.\.(\d+))?(?:/(\d+))?", item)
        if m is None:
            raise ValueError(f"bad calendar day {item!r}")
        a_t, b_t, s_t = m.groups()
        a = int(a_t)
        if b_t is not None:
            b = int(b_t)
            if not 1 <= a <= b <= 31 or s_t is not None:
                raise ValueError(f"bad calendar day {item!r}")
            out |= set(range(a, b + 1))
        elif s_t is not None:
            step = int(s_t)
            if step < 1 or not 1 <= a <= 31:
                raise ValueError(f"bad calendar day {item!r}")
            out |= set(range(a, 0, -step))
        else:
            if not 1 <= a <= 31:
                raise ValueError(f"bad calendar day {item!r}")
            out.add(a)
    return out


def _parse_calendar(spec: str) -> ClockSchedule:
    tokens = spec.split()
    if not tokens:
        raise ValueError("empty spec")
    zone: str | None = None
    if len(tokens) in (1, 2) and tokens[0].lower() in _CAL_SHORTHANDS:
        if len(tokens) == 2:
            zone = tokens[1]
        tokens = _CAL_SHORTHANDS[tokens[0].lower()].split()
    elif len(tokens) >= 2 and re.search(r"[A-Za-z]", tokens[-1]) and not _is_weekdays(tokens[-1]):
        zone = tokens.pop()
    if zone is not None:
        _zone(zone)  # validate
    weekdays: frozenset[int] | None = None
    date_token: str | None = None
    time_token: str | None = None
    stage = 0
    for tok in tokens:
        if stage == 0 and _WEEKDAY_TOKEN.fullmatch(tok):
            weekdays = _cal_weekdays(tok)
            stage = 1
        elif stage <= 1 and ":" not in tok and ("-" in tok or "~" in tok):
            date_token = tok
            stage = 2
        elif stage <= 2 and ":" in tok:
            time_token = tok
            stage = 3
        else:
            raise ValueError(f"bad calendar token {tok!r}")

    # DATE
    years: set[int] | None = None
    months: set[int] = set(range(1, 13))
    days: set[int] | None = None
    days_from_end: set[int] | None = None
    if date_token is not None:
        if "~" in date_token:
            left, _, day_t = date_token.rpartition("~")
            parts = [*left.split("-"), day_t]
        else:
            parts = date_token.split("-")
        if len(parts) == 3:
            years = _cal_component(parts[0], 1970, 2099)
            parts = parts[1:]
        if len(parts) != 2:
            raise ValueError(f"bad calendar date {date_token!r}")
        months = _cal_component(parts[0], 1, 12)
        if "~" in date_token:
            days_from_end = _cal_from_end(parts[1])
        else:
            days = _cal_component(parts[1], 1, 31)
    # TIME
    hours, minutes, seconds = {0}, {0}, {0}
    if time_token is not None:
        tparts = time_token.split(":")
        if len(tparts) not in (2, 3):
            raise ValueError(f"bad calendar time {time_token!r}")
        hours = _cal_component(tparts[0], 0, 23)
        minutes = _cal_component(tparts[1], 0, 59)
        if len(tparts) == 3:
            seconds = _cal_component(tparts[2], 0, 59)

    frozen_years = frozenset(years) if years is not None else None
    frozen_months = frozenset(months)

    def day_ok(d: date) -> bool:
        if d.month not in frozen_months:
            return False
        if frozen_years is not None and d.year not in frozen_years:
            return False
        if weekdays is not None and d.weekday() not in weekdays:
            return False
        if days is not None and d.day not in days:
            return False
        if days_from_end is not None:
            return _last_day(d.year, d.month) - d.day + 1 in days_from_end
        return True

    return ClockSchedule(
        tuple(sorted(seconds)),
        tuple(sorted(minutes)),
        tuple(sorted(hours)),
        frozen_months,
        frozen_years,
        day_ok,
        zone,
    )


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

_INTERVAL_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


@lru_cache(maxsize=4096)
def parse_reference(spec: str, key: str | None = None) -> Parsed:
    """Parse any schedule string of the contract; ValueError when it is not one."""
    text = spec.strip()
    if not text:
        raise ValueError("empty spec")
    lowered = text.lower()
    if lowered in ("@reboot", "@shutdown"):
        return EventSchedule(lowered)
    if lowered in _MACROS:
        return _parse_cron(_MACROS[lowered].split(), key)
    if lowered.startswith("@every"):
        m = re.fullmatch(r"@every\s+((?:\d+[dhms])+)", text)
        if m is None:
            raise ValueError(f"bad interval {spec!r}")
        total = sum(
            int(n) * _INTERVAL_UNITS[u] for n, u in re.findall(r"(\d+)([dhms])", m.group(1))
        )
        if total <= 0:
            raise ValueError("interval must be positive")
        return IntervalSchedule(timedelta(seconds=total))
    if text.startswith("@"):
        raise ValueError(f"unknown macro {spec!r}")
    fields = text.split()
    if len(fields) in (5, 6, 7):
        return _parse_cron(fields, key)
    if len(fields) <= 4:
        return _parse_calendar(text)
    raise ValueError(f"cannot parse {spec!r}")


# --------------------------------------------------------------------------------------------
# Zones: offsets and transitions (found by scanning utcoffset)
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def _offset(zone: ZoneInfo, u: datetime) -> timedelta:
    """UTC offset of `zone` at naive-UTC instant `u`."""
    off = u.replace(tzinfo=UTC).astimezone(zone).utcoffset()
    assert off is not None
    return off


@lru_cache(maxsize=8192)
def _year_transitions(name: str, year: int) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """(naive UTC instant, offset before, offset after) for changes in [year-01-01, +1y] UTC."""
    zone = _zone(name)
    step = timedelta(hours=3)
    t = datetime(year, 1, 1)
    end = datetime(year + 1, 1, 1)
    off = _offset(zone, t)
    out: list[tuple[datetime, timedelta, timedelta]] = []
    while t < end:
        t2 = t + step
        off2 = _offset(zone, t2)
        if off2 != off:
            lo, hi = 0, int(step.total_seconds())  # offset at t+lo == off, at t+hi != off
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(zone, t + timedelta(seconds=mid)) == off:
                    lo = mid
                else:
                    hi = mid
            at = t + timedelta(seconds=hi)
            out.append((at, off, _offset(zone, at)))
        t, off = t2, off2
    return tuple(out)


def zone_transitions(
    name: str, start: datetime, end: datetime
) -> list[tuple[datetime, timedelta, timedelta]]:
    """Offset changes of zone `name` at UTC instants in (start, end).

    Returns (aware UTC instant, offset before, offset after), sorted.
    """
    s = start.astimezone(UTC).replace(tzinfo=None)
    e = end.astimezone(UTC).replace(tzinfo=None)
    out = []
    for year in range(s.year - 1, e.year + 1):
        for at, before, after in _year_transitions(name, year):
            if s < at < e:
                out.append((at.replace(tzinfo=UTC), before, after))
    return sorted(set(out))


def _segments(
    name: str, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, timedelta]]:
    """Cover naive-UTC [start, end) with (a, b, offset) stretches of constant offset."""
    zone = _zone(name)
    cuts = [
        (at, after)
        for year in range(start.year - 1, end.year + 1)
        for at, _before, after in _year_transitions(name, year)
        if start < at < end
    ]
    cuts.sort()
    segs = []
    a, off = start, _offset(zone, start)
    for at, after in cuts:
        if at > a:
            segs.append((a, at, off))
        a, off = at, after
    segs.append((a, end, off))
    return segs


# --------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------


def _next_time_of_day(sched: ClockSchedule, h: int, m: int, s: int) -> tuple[int, int, int] | None:
    """First matching (hour, minute, second) >= (h, m, s) on a day, or None."""
    hours, minutes, seconds = sched.hours, sched.minutes, sched.seconds
    i = bisect_left(hours, h)
    if i == len(hours):
        return None
    if hours[i] > h:
        return hours[i], minutes[0], seconds[0]
    j = bisect_left(minutes, m)
    if j < len(minutes):
        if minutes[j] > m:
            return h, minutes[j], seconds[0]
        k = bisect_left(seconds, s)
        if k < len(seconds):
            return h, m, seconds[k]
        if j + 1 < len(minutes):
            return h, minutes[j + 1], seconds[0]
    if i + 1 < len(hours):
        return hours[i + 1], minutes[0], seconds[0]
    return None


def _next_wall(sched: ClockSchedule, day: date, lo: datetime) -> datetime | None:
    """First matching naive wall time on `day` that is >= `lo` (lo is on `day`)."""
    if lo.microsecond:
        lo = lo.replace(microsecond=0) + _ONE_SEC
        if lo.date() != day:
            return None
    tod = _next_time_of_day(sched, lo.hour, lo.minute, lo.second)
    if tod is None:
        return None
    return datetime.combine(day, time(*tod))


def _first_second_after(x: datetime) -> datetime:
    """First whole second strictly after x."""
    return x.replace(microsecond=0) + _ONE_SEC


def _wall_exists(zone: ZoneInfo, w: datetime) -> bool:
    return any(
        w.replace(tzinfo=zone, fold=f).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == w
        for f in (0, 1)
    )


# candidate: (instant naive UTC, wall naive, kind) with kind "read" | "first" | "gap"
_Candidate = tuple[datetime, datetime, str]


def _best_on_date(
    sched: ClockSchedule, name: str, day: date, threshold: datetime
) -> _Candidate | None:
    """Smallest fire instant > threshold (naive UTC) produced by wall times of `day`."""
    zone = _zone(name)
    realtime = sched.realtime
    d0 = datetime.combine(day, time())
    d1 = d0 + _ONE_DAY
    best: _Candidate | None = None
    wall_high: datetime | None = None  # highest wall reading seen in earlier stretches
    prev_wall_end: datetime | None = None
    for a, b, off in _segments(name, d0 - _MARGIN, d1 + _MARGIN):
        wa, wb = a + off, b + off
        # Wall-clock mode: matching walls of a spring-forward gap fire at the transition `a`.
        if not realtime and prev_wall_end is not None and prev_wall_end < wa and a > threshold:
            lo, hi = max(prev_wall_end, d0), min(wa, d1)
            w = _next_wall(sched, day, lo) if lo < hi else None
            while w is not None and w < hi:
                if not _wall_exists(zone, w):
                    if best is None or a < best[0]:
                        best = (a, w, "gap")
                    break
                w = _next_wall(sched, day, w + _ONE_SEC) if w + _ONE_SEC < d1 else None
        # Walls read in this stretch; in wall-clock mode only those not read before.
        start = wa if realtime or wall_high is None else max(wa, wall_high)
        lo = max(start, d0, _first_second_after(threshold + off))
        hi = min(wb, d1)
        if lo < hi:
            w = _next_wall(sched, day, lo)
            if w is not None and w < hi:
                inst = w - off
                if best is None or inst < best[0]:
                    best = (inst, w, "read" if realtime else "first")
        wall_high = wb if wall_high is None else max(wall_high, wb)
        prev_wall_end = wb
    return best


def _check(zone: ZoneInfo, cand: _Candidate) -> None:
    """Re-derive the answer with fold-aware zoneinfo conversions (guards the stretch logic)."""
    inst, w, kind = cand
    aware = inst.replace(tzinfo=UTC)
    if kind == "read":
        ok = aware.astimezone(zone).replace(tzinfo=None) == w
    elif kind == "first":
        ok = w.replace(tzinfo=zone, fold=0).astimezone(UTC) == aware and _wall_exists(zone, w)
    else:
        before = (aware - _ONE_SEC).astimezone(zone).replace(tzinfo=None)
        after = aware.astimezone(zone).replace(tzinfo=None)
        ok = not _wall_exists(zone, w) and before < w < after
    if not ok:
        raise AssertionError(f"reference self-check failed for {cand!r} in {zone.key}")


def _search_clock(
    sched: ClockSchedule, name: str, threshold: datetime, horizon_days: int
) -> datetime | None:
    """threshold: aware; returns aware UTC instant or None."""
    zone = _zone(name)
    t_utc = threshold.astimezone(UTC).replace(tzinfo=None)
    wall_t = threshold.astimezone(zone).replace(tzinfo=None)
    day = wall_t.date() - _ONE_DAY
    try:
        last_day = wall_t.date() + timedelta(days=horizon_days)
    except OverflowError:
        last_day = date(9998, 12, 31)
    max_year = max(sched.years) if sched.years is not None else None
    best: _Candidate | None = None
    stop: date | None = None
    while day <= last_day and (stop is None or day <= stop):
        if sched.years is not None and day.year not in sched.years:
            if max_year is not None and day.year > max_year:
                break
            day = date(day.year + 1, 1, 1)
            continue
        if day.month not in sched.months:
            day = date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)
            continue
        if sched.day_ok(day):
            cand = _best_on_date(sched, name, day, t_utc)
            if cand is not None:
                if best is None or cand[0] < best[0]:
                    best = cand
                if stop is None:
                    # a fall-back fold can make the next date's walls come earlier
                    stop = day + _ONE_DAY
        day += _ONE_DAY
    if best is None:
        return None
    _check(zone, best)
    return best[0].replace(tzinfo=UTC)


def _require_aware(name: str, value: datetime | None) -> None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValueError(f"{name} must be timezone-aware")


def reference_next_after(
    spec: str,
    dt: datetime,
    *,
    tz: str = "UTC",
    key: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    horizon_days: int = 366 * 12,
) -> datetime | None:
    """First fire instant strictly after aware `dt`, in zone `tz` (or the calendar's zone).

    None for @reboot/@shutdown, past `end_at`, or when nothing fires within `horizon_days`
    after max(dt, start_at) (the horizon does not apply to `@every` intervals).
    """
    _require_aware("dt", dt)
    _require_aware("start_at", start_at)
    _require_aware("end_at", end_at)
    parsed = parse_reference(spec, key)
    if isinstance(parsed, EventSchedule):
        return None
    zone_name = parsed.zone if isinstance(parsed, ClockSchedule) and parsed.zone else tz
    zone: tzinfo = _zone(zone_name)
    if isinstance(parsed, IntervalSchedule):
        anchor = start_at if start_at is not None else EPOCH
        k = (dt - anchor) // parsed.period + 1
        if start_at is not None:
            k = max(k, 0)
        result: datetime | None = anchor + k * parsed.period
    else:
        threshold = dt
        if start_at is not None and start_at - _ONE_US > threshold:
            threshold = start_at - _ONE_US
        if end_at is not None and end_at <= threshold:
            return None
        result = _search_clock(parsed, zone_name, threshold, horizon_days)
    if result is None or (end_at is not None and result > end_at):
        return None
    return result.astimezone(zone)
