"""Tests of the brute-force reference itself (tests/reference.py).

Expectations are worked out by hand from the calendar and the zones' published DST rules and
written literally.  Results are compared as ISO strings: they carry the UTC offset, so the two
readings of a repeated wall time are told apart (plain == ignores `fold` within one zone).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

try:  # works both with and without a tests/__init__.py
    from tests import strategies as strats
    from tests.reference import (
        ClockSchedule,
        jenkins_hash,
        parse_reference,
        reference_next_after,
        zone_transitions,
    )
except ImportError:  # pragma: no cover - depends on how pytest put tests/ on sys.path
    import strategies as strats  # type: ignore[no-redef, import-not-found, unused-ignore]
    from reference import (  # type: ignore[no-redef, import-not-found, unused-ignore]
        ClockSchedule,
        jenkins_hash,
        parse_reference,
        reference_next_after,
        zone_transitions,
    )

BERLIN = "Europe/Berlin"
LORD_HOWE = "Australia/Lord_Howe"
NEW_YORK = "America/New_York"


def at(text: str) -> datetime:
    """An aware datetime from an ISO string with offset."""
    value = datetime.fromisoformat(text)
    assert value.tzinfo is not None
    return value


def chain(spec: str, start: str, count: int, **kwargs: object) -> list[str | None]:
    """`count` successive fires after `start`, as ISO strings (stops after a None)."""
    out: list[str | None] = []
    dt: datetime | None = at(start)
    for _ in range(count):
        assert dt is not None
        dt = reference_next_after(spec, dt, **kwargs)  # type: ignore[arg-type]
        out.append(None if dt is None else dt.isoformat())
        if dt is None:
            break
    return out


# --------------------------------------------------------------------------------------------
# DST: Europe/Berlin 2026 (spring 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z,
#                          fall 2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z)
# --------------------------------------------------------------------------------------------


def test_berlin_spring_wall_clock_time_in_gap_fires_at_transition() -> None:
    assert chain("30 2 * * *", "2026-03-29T00:00:00+01:00", 2, tz=BERLIN) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_berlin_spring_several_skipped_times_collapse_into_one_fire() -> None:
    assert chain("*/15 2 * * *", "2026-03-29T01:00:00+01:00", 2, tz=BERLIN) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
    ]


def test_berlin_spring_real_time_skips_missing_readings() -> None:
    assert chain("*/15 * * * *", "2026-03-29T01:40:00+01:00", 3, tz=BERLIN) == [
        "2026-03-29T01:45:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:15:00+02:00",
    ]


def test_berlin_fall_wall_clock_fires_first_occurrence_only() -> None:
    assert chain("30 2 * * *", "2026-10-25T00:00:00+02:00", 2, tz=BERLIN) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_berlin_fall_real_time_fires_both_readings() -> None:
    assert chain("*/30 * * * *", "2026-10-25T01:45:00+02:00", 5, tz=BERLIN) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_berlin_fall_hour_range_is_wall_clock_mode() -> None:
    # hours 0-5 do not cover all 24 hours: each wall time fires once
    assert chain("*/30 0-5 * * *", "2026-10-25T01:45:00+02:00", 3, tz=BERLIN) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_berlin_fall_every_second_crosses_the_fold() -> None:
    assert chain("* * * * * *", "2026-10-25T02:59:59.500000+02:00", 2, tz=BERLIN) == [
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:00:01+01:00",
    ]


def test_first_fire_inside_fold_second_pass_is_not_repeated() -> None:
    # dt in the second pass of 02:xx; the wall-clock 02:30 already fired in the first pass
    assert chain("30 2 * * *", "2026-10-25T02:10:00+01:00", 1, tz=BERLIN) == [
        "2026-10-26T02:30:00+01:00"
    ]


def test_new_york_spring_and_fall() -> None:
    # 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
    assert chain("30 2 * * *", "2026-03-08T00:00:00-05:00", 1, tz=NEW_YORK) == [
        "2026-03-08T03:00:00-04:00"
    ]
    assert chain("30 1 * * *", "2026-11-01T00:00:00-04:00", 2, tz=NEW_YORK) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]


# --------------------------------------------------------------------------------------------
# DST: Australia/Lord_Howe (+10:30 / +11:00, a 30-minute shift)
# spring 2026-10-04 02:00 -> 02:30 (at 15:30Z on 10-03); fall 2026-04-05 02:00 -> 01:30 (15:00Z)
# --------------------------------------------------------------------------------------------


def test_lord_howe_spring_gap_is_thirty_minutes() -> None:
    assert chain("15 2 * * *", "2026-10-04T00:00:00+10:30", 2, tz=LORD_HOWE) == [
        "2026-10-04T02:30:00+11:00",
        "2026-10-05T02:15:00+11:00",
    ]
    # 01:45 is before the gap and exists normally
    assert chain("45 1 * * *", "2026-10-04T00:00:00+10:30", 1, tz=LORD_HOWE) == [
        "2026-10-04T01:45:00+10:30"
    ]


def test_lord_howe_fall_fold_is_thirty_minutes() -> None:
    assert chain("45 1 * * *", "2026-04-05T00:00:00+11:00", 2, tz=LORD_HOWE) == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-06T01:45:00+10:30",
    ]
    assert chain("15 2 * * *", "2026-04-05T00:00:00+11:00", 1, tz=LORD_HOWE) == [
        "2026-04-05T02:15:00+10:30"
    ]
    # real time: 01:45 is read twice, 02:15 only after the fold
    assert chain("15,45 * * * *", "2026-04-05T01:40:00+11:00", 3, tz=LORD_HOWE) == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-05T01:45:00+10:30",
        "2026-04-05T02:15:00+10:30",
    ]


# --------------------------------------------------------------------------------------------
# Cron day rules (UTC)
# --------------------------------------------------------------------------------------------

DAY_CASES = [
    # leap day: next after 2026 is 2028-02-29, then 2032-02-29
    ("0 0 29 2 *", "2026-01-01T00:00:00+00:00", ["2028-02-29", "2032-02-29"]),
    ("0 0 0 29 2 ? 2028", "2026-01-01T00:00:00+00:00", ["2028-02-29", None]),
    # L / L-n in February
    ("0 0 L 2 *", "2026-01-01T00:00:00+00:00", ["2026-02-28", "2027-02-28", "2028-02-29"]),
    ("0 0 L-1 2 *", "2026-01-01T00:00:00+00:00", ["2026-02-27"]),
    # LW: Jan 2026 ends Sat 31 -> Fri 30; May 2026 ends Sun 31 -> Fri 29
    ("0 0 LW * *", "2026-01-01T00:00:00+00:00", ["2026-01-30", "2026-02-27", "2026-03-31"]),
    ("0 0 LW 5 *", "2026-01-01T00:00:00+00:00", ["2026-05-29"]),
    # 15W: Mar 15 2026 is a Sunday -> Mon 16; Aug 15 2026 a Saturday -> Fri 14
    ("0 0 15W 3 *", "2026-01-01T00:00:00+00:00", ["2026-03-16"]),
    ("0 0 15W 8 *", "2026-01-01T00:00:00+00:00", ["2026-08-14"]),
    ("0 0 15W * *", "2026-04-01T00:00:00+00:00", ["2026-04-15", "2026-05-15", "2026-06-15"]),
    # 1W: Aug 2026 starts on a Saturday -> Monday Aug 3 (not Fri Jul 31)
    ("0 0 1W * *", "2026-07-15T00:00:00+00:00", ["2026-08-03", "2026-09-01"]),
    # 1W: Nov 2026 starts on a Sunday -> Monday Nov 2
    ("0 0 1W 11 *", "2026-01-01T00:00:00+00:00", ["2026-11-02"]),
    # 31W: May 31 2026 is a Sunday -> Fri 29; June has no 31st; Jul 31 2026 is a Friday
    ("0 0 31W * *", "2026-05-01T00:00:00+00:00", ["2026-05-29", "2026-07-31"]),
    # 5L: last Friday; Oct 2026 Fridays 2, 9, 16, 23, 30
    ("0 0 * * 5L", "2026-10-01T00:00:00+00:00", ["2026-10-30", "2026-11-27"]),
    # 1#2: second Monday; Oct 2026 Mondays 5, 12
    ("0 0 * * 1#2", "2026-10-01T00:00:00+00:00", ["2026-10-12", "2026-11-09"]),
    # 5#5: fifth Friday; none in Nov/Dec 2026; Jan 2027 Fridays 1, 8, 15, 22, 29
    ("0 0 * * 5#5", "2026-10-01T00:00:00+00:00", ["2026-10-30", "2027-01-29"]),
    ("0 0 * * FRI#5", "2026-10-01T00:00:00+00:00", ["2026-10-30", "2027-01-29"]),
    # Vixie OR: Jan 13 2026 is a Tuesday, Jan 16 a Friday
    ("0 0 13 * 5", "2026-01-10T00:00:00+00:00", ["2026-01-13", "2026-01-16", "2026-01-23"]),
    # only one restricted field counts
    ("0 0 13 * ?", "2026-01-10T00:00:00+00:00", ["2026-01-13", "2026-02-13"]),
    ("0 0 ? * 5", "2026-01-10T00:00:00+00:00", ["2026-01-16", "2026-01-23"]),
    # crontab(5): a field starting with "*" makes the day match both, even when it is
    # restricted; "*/1" matches every day, so only Fridays are left
    ("0 0 */1 * 5", "2026-01-10T00:00:00+00:00", ["2026-01-16", "2026-01-23"]),
    ("0 0 1-31 * 5", "2026-01-10T00:00:00+00:00", ["2026-01-11", "2026-01-12"]),
    # FRI-SUN = 5-7 (an end of SUN/0 means 7); Jan 10 2026 is a Saturday
    ("0 0 * * FRI-SUN", "2026-01-10T00:00:00+00:00", ["2026-01-11", "2026-01-16"]),
    ("0 0 * * 7", "2026-01-10T00:00:00+00:00", ["2026-01-11", "2026-01-18"]),
    # names are case-insensitive
    ("0 0 1 feb,Aug *", "2026-01-10T00:00:00+00:00", ["2026-02-01", "2026-08-01"]),
]


@pytest.mark.parametrize(("spec", "start", "expected_days"), DAY_CASES)
def test_cron_day_rules(spec: str, start: str, expected_days: list[str | None]) -> None:
    expected = [None if d is None else f"{d}T00:00:00+00:00" for d in expected_days]
    assert chain(spec, start, len(expected)) == expected


def test_six_and_seven_fields_put_seconds_first() -> None:
    assert chain("15 30 2 * * *", "2026-01-01T00:00:00+00:00", 2) == [
        "2026-01-01T02:30:15+00:00",
        "2026-01-02T02:30:15+00:00",
    ]
    assert chain("*/20 0 0 1 1 ? 2027-2028", "2026-06-01T00:00:00+00:00", 4) == [
        "2027-01-01T00:00:00+00:00",
        "2027-01-01T00:00:20+00:00",
        "2027-01-01T00:00:40+00:00",
        "2028-01-01T00:00:00+00:00",
    ]


def test_macros() -> None:
    start = "2026-03-01T12:00:00+00:00"
    assert chain("@yearly", start, 1) == ["2027-01-01T00:00:00+00:00"]
    assert chain("@annually", start, 1) == ["2027-01-01T00:00:00+00:00"]
    assert chain("@monthly", start, 1) == ["2026-04-01T00:00:00+00:00"]
    # 2026-03-01 is a Sunday
    assert chain("@weekly", start, 1) == ["2026-03-08T00:00:00+00:00"]
    assert chain("@daily", start, 1) == ["2026-03-02T00:00:00+00:00"]
    assert chain("@midnight", start, 1) == ["2026-03-02T00:00:00+00:00"]
    assert chain("@hourly", start, 1) == ["2026-03-01T13:00:00+00:00"]


# --------------------------------------------------------------------------------------------
# Jenkins H
# --------------------------------------------------------------------------------------------


def test_hash_formula_values() -> None:
    # sha256("my.task\x00minute")[:8] big endian
    assert jenkins_hash("my.task", "minute") == 8017070412830137235
    assert jenkins_hash("my.task", "hour") == 4257447719694636338
    assert jenkins_hash("my.task", "day-of-month") == 9282597803392213585


def test_hash_step_minutes() -> None:
    # 8017070412830137235 % 15 == 5 -> minutes 5, 20, 35, 50
    assert chain("H/15 * * * *", "2026-01-01T00:00:00+00:00", 5, key="my.task") == [
        "2026-01-01T00:05:00+00:00",
        "2026-01-01T00:20:00+00:00",
        "2026-01-01T00:35:00+00:00",
        "2026-01-01T00:50:00+00:00",
        "2026-01-01T01:05:00+00:00",
    ]


def test_hash_plain_and_ranges() -> None:
    # minute h % 60 == 35; hour h % 24 == 2
    assert chain("H H * * *", "2026-01-01T00:00:00+00:00", 1, key="my.task") == [
        "2026-01-01T02:35:00+00:00"
    ]
    # H(10-19): 10 + h % 10 == 15
    assert chain("H(10-19) 0 * * *", "2026-01-01T00:00:00+00:00", 1, key="my.task") == [
        "2026-01-01T00:15:00+00:00"
    ]
    # day-of-month default range 1-28: 1 + h % 28 == 6
    assert chain("0 0 H * *", "2026-01-01T00:00:00+00:00", 1, key="my.task") == [
        "2026-01-06T00:00:00+00:00"
    ]
    # H(0-29)/20: 0 + h % 20 == 15 -> minutes 15 only (35 > 29)
    assert chain("H(0-29)/20 0 * * *", "2026-01-01T00:00:00+00:00", 2, key="my.task") == [
        "2026-01-01T00:15:00+00:00",
        "2026-01-02T00:15:00+00:00",
    ]


def test_hash_requires_key() -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        reference_next_after("H * * * *", at("2026-01-01T00:00:00+00:00"))


# --------------------------------------------------------------------------------------------
# systemd calendar events
# --------------------------------------------------------------------------------------------

# 2026-01-02 is a Friday
CALENDAR_CASES = [
    (
        "Mon..Fri *-*-* 09:00:00",
        "2026-01-02T12:00:00+00:00",
        ["2026-01-05T09:00:00+00:00", "2026-01-06T09:00:00+00:00"],
    ),
    (
        "Mon-Fri 09:00",
        "2026-01-02T08:00:00+00:00",
        ["2026-01-02T09:00:00+00:00", "2026-01-05T09:00:00+00:00"],
    ),
    (
        "*-*-01 00:00:00",
        "2026-01-15T00:00:00+00:00",
        ["2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00"],
    ),
    (
        "Sat,Sun 10:00",
        "2026-01-02T12:00:00+00:00",
        ["2026-01-03T10:00:00+00:00", "2026-01-04T10:00:00+00:00", "2026-01-10T10:00:00+00:00"],
    ),
    (
        "*:0/15",
        "2026-01-02T12:07:30+00:00",
        ["2026-01-02T12:15:00+00:00", "2026-01-02T12:30:00+00:00"],
    ),
    ("daily", "2026-01-02T12:00:00+00:00", ["2026-01-03T00:00:00+00:00"]),
    ("weekly", "2026-01-02T12:00:00+00:00", ["2026-01-05T00:00:00+00:00"]),
    ("monthly", "2026-01-02T12:00:00+00:00", ["2026-02-01T00:00:00+00:00"]),
    ("yearly", "2026-01-02T12:00:00+00:00", ["2027-01-01T00:00:00+00:00"]),
    ("quarterly", "2026-01-02T12:00:00+00:00", ["2026-04-01T00:00:00+00:00"]),
    ("semiannually", "2026-01-02T12:00:00+00:00", ["2026-07-01T00:00:00+00:00"]),
    ("minutely", "2026-01-02T12:00:00+00:00", ["2026-01-02T12:01:00+00:00"]),
    ("hourly", "2026-01-02T12:00:00+00:00", ["2026-01-02T13:00:00+00:00"]),
    # last day of February
    (
        "*-02~01",
        "2026-01-02T12:00:00+00:00",
        ["2026-02-28T00:00:00+00:00", "2027-02-28T00:00:00+00:00", "2028-02-29T00:00:00+00:00"],
    ),
    # last Monday of May: May 25 2026, May 31 2027
    (
        "Mon *-05~07/1",
        "2026-01-02T12:00:00+00:00",
        ["2026-05-25T00:00:00+00:00", "2027-05-31T00:00:00+00:00"],
    ),
    # third-last day of the month
    ("*-*~03 12:00", "2026-01-02T12:00:00+00:00", ["2026-01-29T12:00:00+00:00"]),
    (
        "2026-03-01..02 06:30:15",
        "2026-01-02T12:00:00+00:00",
        ["2026-03-01T06:30:15+00:00", "2026-03-02T06:30:15+00:00", None],
    ),
    (
        "*-*-* 10,11:00,30",
        "2026-01-02T10:15:00+00:00",
        ["2026-01-02T10:30:00+00:00", "2026-01-02T11:00:00+00:00"],
    ),
]


@pytest.mark.parametrize(("spec", "start", "expected"), CALENDAR_CASES)
def test_calendar(spec: str, start: str, expected: list[str | None]) -> None:
    assert chain(spec, start, len(expected)) == expected


def test_calendar_dst_and_trailing_zone() -> None:
    assert chain("*-*-* 02:30:00", "2026-03-29T00:00:00+01:00", 1, tz=BERLIN) == [
        "2026-03-29T03:00:00+02:00"
    ]
    # the trailing zone replaces tz; the result is in that zone
    assert chain("*-*-* 02:30 Europe/Berlin", "2026-03-29T00:00:00+01:00", 1, tz="UTC") == [
        "2026-03-29T03:00:00+02:00"
    ]
    assert chain("daily UTC", "2026-03-29T00:00:00+01:00", 1, tz=BERLIN) == [
        "2026-03-29T00:00:00+00:00"
    ]


# --------------------------------------------------------------------------------------------
# Intervals, events, bounds
# --------------------------------------------------------------------------------------------


def test_every_anchored_at_epoch() -> None:
    # 2026-01-01T00:00Z is 1767225600 s = 327264 * 5400 s after the epoch
    assert chain("@every 1h30m", "2026-01-01T00:00:00+00:00", 2) == [
        "2026-01-01T01:30:00+00:00",
        "2026-01-01T03:00:00+00:00",
    ]
    assert chain("@every 1h30m", "2026-01-01T00:10:00+00:00", 1) == ["2026-01-01T01:30:00+00:00"]
    assert chain("@every 30s", "2026-01-01T00:00:10+00:00", 1) == ["2026-01-01T00:00:30+00:00"]
    # zone and DST do not matter; the result is expressed in tz
    # 01:30Z is after the 01:00Z switch to CEST
    assert chain("@every 1h30m", "2026-03-29T00:50:00+00:00", 1, tz=BERLIN) == [
        "2026-03-29T03:30:00+02:00"
    ]


def test_every_anchored_at_start_at() -> None:
    start_at = at("2026-01-01T00:10:00+00:00")
    assert chain("@every 1h30m", "2026-01-01T00:00:00+00:00", 3, start_at=start_at) == [
        "2026-01-01T00:10:00+00:00",
        "2026-01-01T01:40:00+00:00",
        "2026-01-01T03:10:00+00:00",
    ]
    # far before start_at: the first fire is start_at itself
    assert chain("@every 2d", "2025-01-01T00:00:00+00:00", 1, start_at=start_at) == [
        "2026-01-01T00:10:00+00:00"
    ]


def test_bounds() -> None:
    start_at = at("2026-01-01T05:00:00+00:00")
    end_at = at("2026-01-01T06:00:00+00:00")
    kw = {"start_at": start_at, "end_at": end_at}
    assert chain("0 * * * *", "2026-01-01T00:30:00+00:00", 3, **kw) == [
        "2026-01-01T05:00:00+00:00",
        "2026-01-01T06:00:00+00:00",
        None,
    ]
    assert chain("0 * * * *", "2026-01-01T04:59:59.999999+00:00", 1, **kw) == [
        "2026-01-01T05:00:00+00:00"
    ]
    assert chain("0 * * * *", "2026-01-01T07:00:00+00:00", 1, **kw) == [None]
    # 06:00 is 4 * 1h30m after midnight: end_at is inclusive
    assert chain("@every 1h30m", "2026-01-01T04:00:00+00:00", 3, end_at=end_at) == [
        "2026-01-01T04:30:00+00:00",
        "2026-01-01T06:00:00+00:00",
        None,
    ]


def test_events_never_fire() -> None:
    dt = at("2026-01-01T00:00:00+00:00")
    assert reference_next_after("@reboot", dt) is None
    assert reference_next_after("@shutdown", dt) is None


def test_horizon() -> None:
    dt = at("2026-01-01T00:00:00+00:00")
    assert reference_next_after("0 0 31 2 *", dt) is None
    assert reference_next_after("0 0 29 2 *", dt, horizon_days=365) is None


@pytest.mark.parametrize(
    "spec",
    [
        "61 * * * *",
        "* * * *",
        "* * * * * * * *",
        "5-1 * * * *",
        "*/0 * * * *",
        "0 0 L-31 * *",
        "0 0 32W * *",
        "0 0 * * 1#6",
        "0 0 * * 8",
        "? * * * *",
        "0 0 * 13 *",
        "0 0 0 * * * 1969",
        "0 0 0 * * * H",
        "@fortnightly",
        "@every 0s",
        "@every 5",
        "@every 1.5h",
        "Mon..Fri 25:00",
        "*-*-* 00:00:00.5",
        "Funday 10:00",
        "*-13-01",
        "10:00 Not/AZone",
        "",
    ],
)
def test_invalid_specs(spec: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        reference_next_after(spec, at("2026-01-01T00:00:00+00:00"), key="k")


def test_naive_datetime_rejected() -> None:
    with pytest.raises(ValueError, match="aware"):
        reference_next_after("* * * * *", datetime(2026, 1, 1))


# --------------------------------------------------------------------------------------------
# Cross-check against a second-by-second walk in UTC (a different, slower method)
# --------------------------------------------------------------------------------------------

_SEC = timedelta(seconds=1)


def _walk(spec: str, key: str | None, tz: str, dt: datetime, window: timedelta) -> datetime | None:
    """First fire in (dt, dt + window] by stepping real seconds and reading the wall clock."""
    parsed = parse_reference(spec, key)
    assert isinstance(parsed, ClockSchedule)
    zone = ZoneInfo(parsed.zone or tz)

    def matches(w: datetime) -> bool:
        return (
            w.hour in parsed.hours
            and w.minute in parsed.minutes
            and w.second in parsed.seconds
            and parsed.day_ok(w.date())
        )

    u = dt.astimezone(UTC).replace(microsecond=0) + _SEC
    prev = (u - _SEC).astimezone(zone).replace(tzinfo=None)
    while u <= dt + window:
        w = u.astimezone(zone).replace(tzinfo=None)
        if parsed.realtime:
            if matches(w):
                return u
        else:
            first_reading = w.replace(tzinfo=zone, fold=0).astimezone(UTC) == u
            if matches(w) and first_reading:
                return u
            gap = prev + _SEC
            while gap < w:  # wall times skipped between the previous second and this one
                if matches(gap):
                    return u
                gap += _SEC
        prev = w
        u += _SEC
    return None


_DST_SPECS = [
    "0 30 2 * * *",
    "0 */15 * * * *",
    "0 0 0 * * *",
    "0 30 23 * * *",
    "0 0,30 0-3 * * *",
    "30 * * * * *",
    "0 15,45 1-3 * * *",
    "*/20 * 2 * * *",
    "*-*-* 02:30",
    "*:0/30",
]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Australia/Lord_Howe", "Africa/Cairo"])
def test_matches_second_walk_around_transitions(zone: str) -> None:
    window = timedelta(hours=6)
    transitions = zone_transitions(
        zone, datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
    )
    if zone == "Africa/Cairo" and not transitions:
        pytest.skip("this tzdata predates Egypt's 2023 return to DST")
    assert len(transitions) == 2
    for moment, _before, _after in transitions:
        for spec in _DST_SPECS:
            dt = moment - timedelta(hours=2, microseconds=1)
            for _ in range(4):
                got = reference_next_after(spec, dt, tz=zone)
                want = _walk(spec, None, zone, dt, window)
                if want is None:
                    assert got is None or got > dt + window, (spec, dt)
                    break
                assert got is not None, (spec, dt)
                assert got.astimezone(UTC) == want, (spec, dt)
                dt = got


@settings(max_examples=60)
@given(
    st.one_of(
        strats.cron5_specs(), strats.cron6_specs(), strats.calendar_specs().map(lambda s: (s, None))
    ),
    strats.zones().flatmap(lambda z: st.tuples(st.just(z), strats.instants(z))),
)
def test_matches_second_walk_random(
    spec_key: tuple[str, str | None], zone_dt: tuple[str, datetime]
) -> None:
    spec, key = spec_key
    zone, dt = zone_dt
    window = timedelta(hours=3)
    got = reference_next_after(spec, dt, tz=zone, key=key)
    want = _walk(spec, key, zone, dt, window)
    if want is None:
        assert got is None or got > dt + window
    else:
        assert got is not None
        assert got.astimezone(UTC) == want


@settings(max_examples=50)
@given(strats.cron_specs(), strats.zones().flatmap(strats.instants))
def test_generated_cron_specs_fire(spec_key: tuple[str, str | None], dt: datetime) -> None:
    spec, key = spec_key
    got = reference_next_after(spec, dt, key=key)
    assert got is not None
    assert got > dt


@settings(max_examples=50)
@given(strats.interval_specs(), strats.zones().flatmap(strats.instants))
def test_generated_intervals(spec: str, dt: datetime) -> None:
    got = reference_next_after(spec, dt)
    assert got is not None
    assert timedelta(0) < got - dt
    assert (got - datetime(1970, 1, 1, tzinfo=UTC)) % timedelta(seconds=1) == timedelta(0)
