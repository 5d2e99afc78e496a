"""DST rules, by example.

- Fall-back: a wall time fires once, at its first occurrence.
- Spring-forward: a skipped wall time fires once, at the first instant after the gap.
- Hour field matching every hour: fires follow real time through both transitions.

Transitions used (2026): Europe/Berlin 03-29 02:00 CET -> 03:00 CEST and
10-25 03:00 CEST -> 02:00 CET; America/New_York 03-08 02:00 EST -> 03:00 EDT and
11-01 02:00 EDT -> 01:00 EST; Australia/Lord_Howe 10-04 02:00 -> 02:30 (+10:30 to +11)
and 04-05 02:00 -> 01:30 (+11 to +10:30).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from celery_periodiq import parse_schedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def fires(spec: str, start: datetime, n: int) -> list[str]:
    zone = str(start.tzinfo)
    return [fire.isoformat() for fire in parse_schedule(spec, tz=zone).upcoming(start, n)]


@pytest.mark.parametrize(
    ("spec", "start", "expected"),
    [
        pytest.param(
            "30 2 * * *",
            datetime(2026, 3, 28, 12, tzinfo=BERLIN),
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
            id="berlin-skipped-time-fires-at-gap-end",
        ),
        pytest.param(
            "*/30 2 * * *",
            datetime(2026, 3, 28, 12, tzinfo=BERLIN),
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"],
            id="berlin-several-skipped-times-fire-once",
        ),
        pytest.param(
            "30 30 2 * * *",
            datetime(2026, 3, 28, 12, tzinfo=BERLIN),
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:30+02:00"],
            id="berlin-seconds-first-skipped-time",
        ),
        pytest.param(
            "30 2 * * *",
            datetime(2026, 3, 7, 12, tzinfo=NEW_YORK),
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
            id="new-york-skipped-time-fires-at-gap-end",
        ),
        pytest.param(
            "15 2 * * *",
            datetime(2026, 10, 3, 12, tzinfo=LORD_HOWE),
            ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"],
            id="lord-howe-half-hour-gap",
        ),
    ],
)
def test_spring_forward_fires_a_skipped_time_once_after_the_gap(
    spec: str, start: datetime, expected: list[str]
) -> None:
    assert fires(spec, start, 2) == expected


@pytest.mark.parametrize(
    ("spec", "start", "expected"),
    [
        pytest.param(
            "30 2 * * *",
            datetime(2026, 10, 24, 12, tzinfo=BERLIN),
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
            id="berlin",
        ),
        pytest.param(
            "*/20 2 * * *",
            datetime(2026, 10, 24, 12, tzinfo=BERLIN),
            [
                "2026-10-25T02:00:00+02:00",
                "2026-10-25T02:20:00+02:00",
                "2026-10-25T02:40:00+02:00",
                "2026-10-26T02:00:00+01:00",
            ],
            id="berlin-several-times-in-the-repeated-hour",
        ),
        pytest.param(
            "30 1 * * *",
            datetime(2026, 10, 31, 12, tzinfo=NEW_YORK),
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
            id="new-york",
        ),
        pytest.param(
            "45 1 * * *",
            datetime(2026, 4, 4, 12, tzinfo=LORD_HOWE),
            ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
            id="lord-howe-half-hour-fold",
        ),
    ],
)
def test_fall_back_fires_a_repeated_time_once(
    spec: str, start: datetime, expected: list[str]
) -> None:
    assert fires(spec, start, len(expected)) == expected


def test_asking_from_inside_the_second_occurrence_does_not_fire_again() -> None:
    second_reading = datetime(2026, 10, 25, 2, 10, tzinfo=BERLIN, fold=1)
    assert second_reading.utcoffset() == ZoneInfo("Etc/GMT-1").utcoffset(None)
    assert fires("30 2 * * *", second_reading, 1) == ["2026-10-26T02:30:00+01:00"]


@pytest.mark.parametrize(
    ("spec", "start", "expected"),
    [
        pytest.param(
            "*/15 * * * *",
            datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN),
            ["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"],
            id="berlin-spring-every-15-minutes",
        ),
        pytest.param(
            "30 * * * *",
            datetime(2026, 3, 29, 1, 0, tzinfo=BERLIN),
            ["2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00"],
            id="berlin-spring-hourly-keeps-one-real-hour",
        ),
        pytest.param(
            "*/30 * * * *",
            datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN),
            [
                "2026-10-25T02:00:00+02:00",
                "2026-10-25T02:30:00+02:00",
                "2026-10-25T02:00:00+01:00",
                "2026-10-25T02:30:00+01:00",
                "2026-10-25T03:00:00+01:00",
            ],
            id="berlin-fall-every-30-minutes",
        ),
        pytest.param(
            "0 * * * *",
            datetime(2026, 11, 1, 0, 30, tzinfo=NEW_YORK),
            ["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"],
            id="new-york-fall-hourly",
        ),
        pytest.param(
            "*/15 * * * *",
            datetime(2026, 4, 5, 1, 15, tzinfo=LORD_HOWE),
            [
                "2026-04-05T01:30:00+11:00",
                "2026-04-05T01:45:00+11:00",
                "2026-04-05T01:30:00+10:30",
                "2026-04-05T01:45:00+10:30",
                "2026-04-05T02:00:00+10:30",
            ],
            id="lord-howe-fall-every-15-minutes",
        ),
        pytest.param(
            "*/15 * * * *",
            datetime(2026, 10, 4, 1, 30, tzinfo=LORD_HOWE),
            ["2026-10-04T01:45:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"],
            id="lord-howe-spring-every-15-minutes",
        ),
        pytest.param(
            "*:0/30",
            datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN),
            ["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00"],
            id="berlin-fall-calendar-every-30-minutes",
        ),
    ],
)
def test_every_hour_schedules_follow_real_time(
    spec: str, start: datetime, expected: list[str]
) -> None:
    assert fires(spec, start, len(expected)) == expected


def test_calendar_events_follow_the_same_rules_as_cron() -> None:
    spring = datetime(2026, 3, 28, 12, tzinfo=BERLIN)
    fall = datetime(2026, 10, 24, 12, tzinfo=BERLIN)
    assert fires("*-*-* 02:30", spring, 1) == fires("30 2 * * *", spring, 1)
    assert fires("*-*-* 02:30", fall, 2) == fires("30 2 * * *", fall, 2)


def test_fires_of_an_every_hour_schedule_are_exactly_one_real_hour_apart_through_fall_back() -> (
    None
):
    start = datetime(2026, 10, 24, 20, tzinfo=BERLIN)
    instants = parse_schedule("0 * * * *", tz="Europe/Berlin").upcoming(start, 12)
    utc = [instant.astimezone(UTC) for instant in instants]
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(utc)}
    assert gaps == {3600.0}
