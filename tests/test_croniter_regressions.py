"""Cases croniter 7 gets wrong, kept as named tests of our layer.

croniter proposes candidates and our exact fields check every one; DST is
ours entirely. Each test names what croniter does and asserts what we do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from celery_periodiq import parse_schedule


def fires(spec: str, start: datetime, n: int, tz: str = "UTC") -> list[str]:
    return [fire.isoformat() for fire in parse_schedule(spec, tz=tz).upcoming(start, n)]


def test_fixed_time_fires_once_on_berlin_fall_back() -> None:
    """croniter with an aware start fires 02:30+02:00 and again 02:30+01:00 on 2026-10-25."""
    start = datetime(2026, 10, 24, 12, tzinfo=ZoneInfo("Europe/Berlin"))
    assert fires("30 2 * * *", start, 2, "Europe/Berlin") == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_fixed_time_fires_once_on_new_york_fall_back() -> None:
    """croniter fires 01:30-04:00 and 01:30-05:00 on 2026-11-01, also in seconds-first form."""
    start = datetime(2026, 10, 31, 12, tzinfo=ZoneInfo("America/New_York"))
    expected = ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
    assert fires("30 1 * * *", start, 2, "America/New_York") == expected
    assert fires("0 30 1 * * *", start, 2, "America/New_York") == expected


def test_fixed_time_fires_once_in_lord_howe_half_hour_fold() -> None:
    """croniter fires 01:45+11:00 and 01:45+10:30 on 2026-04-05."""
    start = datetime(2026, 4, 4, 12, tzinfo=ZoneInfo("Australia/Lord_Howe"))
    assert fires("45 1 * * *", start, 2, "Australia/Lord_Howe") == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-06T01:45:00+10:30",
    ]


def test_leap_day_with_a_year_field() -> None:
    """croniter raises CroniterBadDateError ('failed to find next date') for 29 Feb 2028."""
    assert fires("0 0 0 29 2 ? 2028", datetime(2026, 1, 1, tzinfo=UTC), 2) == [
        "2028-02-29T00:00:00+00:00"
    ]


def test_last_friday_written_quartz_style() -> None:
    """croniter rejects '5L' ('is not acceptable'); it only knows 'L5'."""
    assert fires("0 0 * * 5L", datetime(2026, 1, 1, tzinfo=UTC), 2) == [
        "2026-01-30T00:00:00+00:00",
        "2026-02-27T00:00:00+00:00",
    ]


def test_last_weekday_of_the_month() -> None:
    """croniter rejects 'LW'. 2026-01-31 is a Saturday, so January's is Friday the 30th."""
    assert fires("0 0 LW * *", datetime(2026, 1, 1, tzinfo=UTC), 3) == [
        "2026-01-30T00:00:00+00:00",
        "2026-02-27T00:00:00+00:00",
        "2026-03-31T00:00:00+00:00",
    ]


def test_nearest_weekday_to_a_day_february_lacks() -> None:
    """croniter fires '31W' on 2026-02-27; we, like plain '31', skip months without a 31st."""
    assert fires("0 0 31W * *", datetime(2026, 2, 1, tzinfo=UTC), 2) == [
        "2026-03-31T00:00:00+00:00",
        "2026-05-29T00:00:00+00:00",  # 31 May 2026 is a Sunday: Friday the 29th
    ]


def test_last_day_or_last_friday_keeps_the_leap_day() -> None:
    """croniter's own form '30 2 L * L5' (both day fields count) skips 2020-02-29, a Saturday."""
    assert fires("30 2 L * 5L", datetime(2020, 1, 1, tzinfo=UTC), 4) == [
        "2020-01-31T02:30:00+00:00",
        "2020-02-28T02:30:00+00:00",
        "2020-02-29T02:30:00+00:00",
        "2020-03-27T02:30:00+00:00",
    ]


def test_first_of_month_or_last_friday_fires_at_all() -> None:
    """croniter finds no date at all for '0 30 2 1 * 5L' (seconds first) from 2020."""
    assert fires("0 30 2 1 * 5L", datetime(2020, 1, 1, tzinfo=UTC), 3) == [
        "2020-01-01T02:30:00+00:00",
        "2020-01-31T02:30:00+00:00",
        "2020-02-01T02:30:00+00:00",
    ]
