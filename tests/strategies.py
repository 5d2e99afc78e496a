"""Hypothesis strategies for schedule specs, zones and instants near DST transitions.

Every clock spec produced here fires regularly: checked with the reference, from each of
2019-12-31, 2024, 2028, 2032 and 2036 there is a fire within 8 years (so from any instant
2020-2035 there is one within the reference's default 12-year horizon).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from functools import cache, lru_cache
from zoneinfo import ZoneInfo

import hypothesis.strategies as st
from hypothesis import assume

try:  # works both with and without a tests/__init__.py
    from tests.reference import reference_next_after, zone_transitions
except ImportError:  # pragma: no cover - depends on how pytest put tests/ on sys.path
    from reference import (  # type: ignore[no-redef, import-not-found, unused-ignore]
        reference_next_after,
        zone_transitions,
    )

__all__ = [
    "ZONES",
    "calendar_specs",
    "cron5_specs",
    "cron6_specs",
    "cron7_specs",
    "cron_specs",
    "fires_regularly",
    "hashed_specs",
    "instants",
    "interval_specs",
    "keys",
    "macro_specs",
    "transitions_of",
    "zones",
]

ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute DST shift
    "America/Sao_Paulo",  # no DST since 2019
    "Asia/Kolkata",  # +05:30, no DST
    "Pacific/Chatham",  # +12:45 / +13:45, transitions at 02:45 / 03:45
    "Europe/London",
    "America/Santiago",  # transitions at local midnight (date changes in the gap / fold)
    "America/Havana",  # spring forward at 00:00
    "Africa/Cairo",  # DST again since 2023, fall back at 24:00 (fold crosses midnight)
    "Antarctica/Troll",  # two-hour DST shift
    "America/St_Johns",  # -03:30 / -02:30
    "Pacific/Auckland",
)

_CHECKPOINTS = tuple(
    datetime(y, m, d, tzinfo=UTC)
    for y, m, d in ((2019, 12, 31), (2024, 1, 1), (2028, 1, 1), (2032, 1, 1), (2036, 1, 1))
)


@lru_cache(maxsize=65536)
def fires_regularly(spec: str, key: str | None = None) -> bool:
    """True when the spec fires within 8 years after each checkpoint 2019-12-31 .. 2036."""
    try:
        return all(
            reference_next_after(spec, point, key=key, horizon_days=366 * 8) is not None
            for point in _CHECKPOINTS
        )
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@st.composite
def _mixed_case(draw: st.DrawFn, word: str) -> str:
    style = draw(st.sampled_from(["upper", "lower", "title", "random"]))
    if style == "upper":
        return word.upper()
    if style == "lower":
        return word.lower()
    if style == "title":
        return word.title()
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in word)


def keys() -> st.SearchStrategy[str]:
    """Keys for H hashing (task names and arbitrary non-empty text)."""
    return st.one_of(
        st.sampled_from(
            ["tasks.cleanup", "app.tasks.send_report", "billing.invoice", "x", "nightly-backup"]
        ),
        st.from_regex(r"[a-z][a-z0-9_]{0,12}(\.[a-z][a-z0-9_]{0,12}){0,3}", fullmatch=True),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20),
    )


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DOWS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

# field name -> (lo, hi) for plain values
_RANGE = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
    "year": (1970, 2099),
}
_H_DEFAULT = {**_RANGE, "day-of-month": (1, 28), "day-of-week": (0, 6)}


def _words(text: str) -> list[str]:
    return text.split()


# hand-picked whole fields, biased to what is interesting around DST transitions
_FAVOURITES = {
    "second": _words("0 0 * */15 0,30 30 59 */10 0-10 */20 15-45/15"),
    "minute": _words("30 */15 0,30 45 0 0 * 15 59 */5 0-59/30 */45"),
    "hour": _words("2 1-3 * */2 0 1 3 23 0-23 */1 22-23 0,12 2,3 1/2 2-3 0-2 23,0 4"),
    "day-of-month": _words(
        "* * ? 1 15 28 29 30 31 L L-1 L-3 LW 1W 15W 31W 1-7 */2 10-20/5 L,15 25-31 2W 30W"
    ),
    "month": _words("* * 3 10 MAR oct Mar-Oct */3 2 FEB 4,10 11 9-11 JAN-DEC/2 3,4,9,10 apr"),
    "day-of-week": _words(
        "* * ? 0 7 MON-FRI FRI-SUN 5L 1#2 5#5 SUN sat,sun 1-5/2 0#1 6L 0L 7#1 SUN#5 fri#1"
    ),
}


def _render(value: int, field: str, draw: st.DrawFn) -> str:
    """A value as a number, or as a (mixed-case) name where one exists."""
    if field == "month" and draw(st.integers(0, 2)) == 0:
        return draw(_mixed_case(_MONTHS[value - 1]))
    if field == "day-of-week" and value <= 6 and draw(st.integers(0, 2)) == 0:
        return draw(_mixed_case(_DOWS[value]))
    return str(value)


@st.composite
def _plain_item(draw: st.DrawFn, field: str) -> str:
    lo, hi = _RANGE[field]
    if field == "year":
        lo, hi = 2015, 2060
    kind = draw(st.sampled_from(["num", "num", "range", "star_step", "n_step", "range_step"]))
    if kind == "num":
        return _render(draw(st.integers(lo, hi)), field, draw)
    if kind == "star_step":
        return f"*/{draw(st.integers(1, hi - lo + 1))}"
    a = draw(st.integers(lo, hi))
    if kind == "n_step":
        return f"{_render(a, field, draw)}/{draw(st.integers(1, hi - lo + 1))}"
    # avoid SUN-SUN: 0-0 reads as 0-7
    b = draw(st.integers(1, 6)) if field == "day-of-week" and a == 0 else draw(st.integers(a, hi))
    end = _render(b, field, draw)
    if field == "day-of-week" and b == 7 and a > 0 and draw(st.booleans()):
        end = draw(_mixed_case("SUN"))  # an end of SUN means 7
    text = f"{_render(a, field, draw)}-{end}"
    if kind == "range_step":
        text += f"/{draw(st.integers(1, b - a + 1))}"
    return text


@st.composite
def _hash_item(draw: st.DrawFn, field: str) -> str:
    lo, hi = _H_DEFAULT[field]
    kind = draw(st.sampled_from(["H", "H/S", "H(a-b)", "H(a-b)/S"]))
    if kind == "H":
        return "H"
    if kind == "H/S":
        return f"H/{draw(st.integers(1, hi - lo + 1))}"
    a = draw(st.integers(lo, hi))
    b = draw(st.integers(a, hi))
    text = f"H({a}-{b})"
    if kind == "H(a-b)/S":
        text += f"/{draw(st.integers(1, b - a + 1))}"
    return text


@st.composite
def _special_item(draw: st.DrawFn, field: str) -> str:
    if field == "day-of-month":
        kind = draw(st.sampled_from(["L", "L-n", "LW", "nW"]))
        if kind == "L-n":
            return f"L-{draw(st.integers(0, 30))}"
        if kind == "nW":
            return f"{draw(st.integers(1, 31))}W"
        return kind
    d = draw(st.integers(0, 7))
    name = _render(d, field, draw)
    if draw(st.booleans()):
        return f"{name}L"
    return f"{name}#{draw(st.integers(1, 5))}"


@st.composite
def _field(draw: st.DrawFn, field: str, with_hash: bool) -> tuple[str, bool]:
    """A whole field; returns (text, uses H)."""
    if field == "year":
        return draw(_year_field()), False
    choice = draw(st.integers(0, 9))
    if choice < 4:
        return draw(st.sampled_from(_FAVOURITES[field])), False
    if choice < 6 and with_hash:
        return draw(_hash_item(field)), True
    items = []
    uses_hash = False
    for _ in range(draw(st.integers(1, 3))):
        sub = draw(st.integers(0, 5))
        if sub == 0 and field in ("day-of-month", "day-of-week"):
            items.append(draw(_special_item(field)))
        elif sub == 1 and with_hash:
            items.append(draw(_hash_item(field)))
            uses_hash = True
        else:
            items.append(draw(_plain_item(field)))
    return ",".join(items), uses_hash


@st.composite
def _year_field(draw: st.DrawFn) -> str:
    """Year sets with gaps of at most a few years, reaching past 2036."""
    kind = draw(st.sampled_from(["*", "range", "range_step", "n_step", "list"]))
    if kind == "*":
        return "*"
    a = draw(st.integers(2015, 2024))
    b = draw(st.integers(2036, 2099))
    if kind == "range":
        return f"{a}-{b}"
    if kind == "range_step":
        return f"{a}-{b}/{draw(st.integers(1, 4))}"
    if kind == "n_step":
        return f"{a}/{draw(st.integers(1, 4))}"
    years = sorted(draw(st.sets(st.integers(2019, 2048), min_size=2, max_size=6)))
    return ",".join([f"{a}-{b}", *map(str, years)])


_CRON_LAYOUTS = {
    5: ("minute", "hour", "day-of-month", "month", "day-of-week"),
    6: ("second", "minute", "hour", "day-of-month", "month", "day-of-week"),
    7: ("second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"),
}


@st.composite
def _cron(draw: st.DrawFn, nfields: int, hashed: bool | None) -> tuple[str, str | None]:
    layout = _CRON_LAYOUTS[nfields]
    with_hash = hashed if hashed is not None else draw(st.integers(0, 5)) == 0
    texts: list[str] = []
    uses_hash = False
    for field in layout:
        text, used = draw(_field(field, with_hash))
        texts.append(text)
        uses_hash = uses_hash or used
    if hashed and not uses_hash:
        hashable = [i for i, f in enumerate(layout) if f != "year"]
        i = draw(st.sampled_from(hashable))
        texts[i] = draw(_hash_item(layout[i]))
        uses_hash = True
    sep = draw(st.sampled_from([" "] * 8 + ["  ", "\t"]))
    spec = sep.join(texts)
    key = draw(keys()) if uses_hash else draw(st.none() | keys())
    assume(fires_regularly(spec, key))
    return spec, key


def cron5_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    """5-field cron (minute first), occasionally with H; (spec, key)."""
    return _cron(5, None)


def cron6_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    """6-field cron (seconds first), occasionally with H; (spec, key)."""
    return _cron(6, None)


def cron7_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    """7-field cron (seconds first, year last), occasionally with H; (spec, key)."""
    return _cron(7, None)


def hashed_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    """5/6/7-field cron using at least one H form; key is always a string."""
    return st.sampled_from([5, 6, 7]).flatmap(lambda n: _cron(n, True))


def macro_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    return st.tuples(
        st.sampled_from(
            ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
        ),
        st.none() | keys(),
    )


def cron_specs() -> st.SearchStrategy[tuple[str, str | None]]:
    """Any cron form: 5/6/7 fields, hashed, macros; (spec, key)."""
    return st.one_of(cron5_specs(), cron6_specs(), cron7_specs(), hashed_specs(), macro_specs())


# --------------------------------------------------------------------------------------------
# systemd calendar
# --------------------------------------------------------------------------------------------

_CAL_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CAL_FULL = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@st.composite
def _cal_weekday_name(draw: st.DrawFn, i: int) -> str:
    names = _CAL_FULL if draw(st.integers(0, 4)) == 0 else _CAL_DAYS
    return draw(_mixed_case(names[i]))


@st.composite
def _cal_weekdays(draw: st.DrawFn) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(0, 6))
        if draw(st.booleans()):
            items.append(draw(_cal_weekday_name(a)))
        else:
            b = draw(st.integers(a, 6))
            sep = draw(st.sampled_from(["..", "-"]))
            items.append(f"{draw(_cal_weekday_name(a))}{sep}{draw(_cal_weekday_name(b))}")
    return ",".join(items)


@st.composite
def _cal_component(draw: st.DrawFn, lo: int, hi: int, favourites: list[str]) -> str:
    if draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(favourites))
    items = []
    width = draw(st.sampled_from([1, 2]))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["num", "num", "range", "rep"]))
        a = draw(st.integers(lo, hi))
        if kind == "num":
            items.append(f"{a:0{width}d}")
        elif kind == "range":
            items.append(f"{a:0{width}d}..{draw(st.integers(a, hi)):0{width}d}")
        else:
            items.append(f"{a:0{width}d}/{draw(st.integers(1, hi - lo + 1))}")
    return ",".join(items)


@st.composite
def _cal_date(draw: st.DrawFn) -> str:
    month = draw(_cal_component(1, 12, ["*", "*", "03", "10", "02", "01,04,07,10", "03..10"]))
    kind = draw(st.sampled_from(["day", "day", "day", "from_end"]))
    if kind == "day":
        day = draw(_cal_component(1, 31, ["*", "*", "01", "15", "28", "29", "31", "1/7"]))
        sep = "-"
    else:
        n = draw(st.integers(1, 7))
        day = f"{n:02d}" if draw(st.booleans()) else f"{n:02d}/{draw(st.integers(1, 3))}"
        sep = "~"
    year_kind = draw(st.sampled_from(["none", "star", "star", "range", "rep"]))
    if year_kind == "none":
        return f"{month}{sep}{day}"
    if year_kind == "star":
        year = "*"
    elif year_kind == "range":
        year = f"{draw(st.integers(2015, 2024))}..{draw(st.integers(2036, 2099))}"
    else:
        year = f"{draw(st.integers(2015, 2024))}/{draw(st.integers(1, 2))}"
    return f"{year}-{month}{sep}{day}"


@st.composite
def _cal_time(draw: st.DrawFn) -> str:
    hour = draw(_cal_component(0, 23, ["02", "2", "*", "01..03", "0/2", "00", "23", "1,2,3"]))
    minute = draw(_cal_component(0, 59, ["00", "30", "0/15", "*", "45", "15,45", "00"]))
    if draw(st.booleans()):
        return f"{hour}:{minute}"
    second = draw(_cal_component(0, 59, ["00", "00", "*", "0/30", "30", "59"]))
    return f"{hour}:{minute}:{second}"


@st.composite
def _calendar(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 6)) == 0:
        spec = draw(
            st.sampled_from(
                _words(
                    "minutely hourly daily weekly monthly yearly annually quarterly semiannually"
                )
            )
        )
    else:
        parts = []
        has_wd = draw(st.integers(0, 2)) == 0
        has_date = draw(st.booleans())
        has_time = draw(st.integers(0, 4)) > 0 or not (has_wd or has_date)
        if has_wd:
            parts.append(draw(_cal_weekdays()))
        if has_date:
            parts.append(draw(_cal_date()))
        if has_time:
            parts.append(draw(_cal_time()))
        if draw(st.integers(0, 9)) == 0:
            parts.append(draw(st.sampled_from(ZONES)))
        spec = " ".join(parts)
    assume(fires_regularly(spec))
    return spec


def calendar_specs() -> st.SearchStrategy[str]:
    """systemd OnCalendar expressions (weekdays, dates incl. `~`, times, shorthands, zones)."""
    return _calendar()


# --------------------------------------------------------------------------------------------
# intervals
# --------------------------------------------------------------------------------------------


@st.composite
def _interval(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 3)) == 0:
        return draw(
            st.sampled_from(
                [
                    f"@every {d}"
                    for d in _words("30s 1h30m 2d 1s 7s 90m 86400s 1d1s 23h59m59s 1d12h")
                ]
            )
        )
    units = [
        (u, draw(st.integers(1, hi)))
        for u, hi in (("d", 3), ("h", 48), ("m", 120), ("s", 3600))
        if draw(st.booleans())
    ]
    if not units:
        units = [("s", draw(st.integers(1, 100_000)))]
    return "@every " + "".join(f"{n}{u}" for u, n in units)


def interval_specs() -> st.SearchStrategy[str]:
    """`@every` strings with d/h/m/s parts (always a positive period)."""
    return _interval()


# --------------------------------------------------------------------------------------------
# zones and instants
# --------------------------------------------------------------------------------------------


def zones() -> st.SearchStrategy[str]:
    return st.sampled_from(ZONES)


@cache
def transitions_of(zone: str) -> tuple[datetime, ...]:
    """UTC instants of the zone's offset changes between 2020 and 2035 (inclusive)."""
    return tuple(
        at
        for at, _before, _after in zone_transitions(
            zone, datetime(2020, 1, 1, tzinfo=UTC), datetime(2036, 1, 1, tzinfo=UTC)
        )
    )


_UNIFORM_LO = datetime(2020, 1, 1, tzinfo=UTC)
_UNIFORM_SPAN = int((datetime(2036, 1, 1, tzinfo=UTC) - _UNIFORM_LO).total_seconds())


@st.composite
def _instant(draw: st.DrawFn, zone: str) -> datetime:
    near = transitions_of(zone)
    if near and draw(st.integers(0, 3)) > 0:
        base = draw(st.sampled_from(near))
        delta = draw(
            st.one_of(
                st.integers(-3 * 3600, 3 * 3600),
                st.sampled_from([0, -1, 1, -60, -1800, 1800, -3600, 3600, -5400, 5400, 7200]),
            )
        )
        moment = base + timedelta(seconds=delta)
    else:
        moment = _UNIFORM_LO + timedelta(seconds=draw(st.integers(0, _UNIFORM_SPAN - 1)))
    micro = draw(st.one_of(st.just(0), st.integers(0, 999_999)))
    moment += timedelta(microseconds=micro)
    view = draw(st.sampled_from(["zone", "zone", "zone", "utc", "fixed"]))
    if view == "utc":
        return moment
    if view == "fixed":
        return moment.astimezone(timezone(timedelta(minutes=draw(st.integers(-720, 840)))))
    return moment.astimezone(ZoneInfo(zone))


def instants(zone: str) -> st.SearchStrategy[datetime]:
    """Aware datetimes, mostly within 3 hours of the zone's transitions 2020-2035."""
    return _instant(zone)
