"""Every schedule form, by example: a spec, a start, and the next fires worked out by hand.

2026-01-01 is a Thursday. Expectations were checked against printed calendars,
not computed with the code under test.
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
from datetime import UTC, datetime, timedelta

import pytest

from celery_periodiq import parse_schedule
from celery_periodiq.schedules import (
    CalendarSchedule,
    CronSchedule,
    EventSchedule,
    IntervalSchedule,
)

NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)


def fires(
    spec: str | float | timedelta, start: datetime = NEW_YEAR, n: int = 3, **options: object
) -> list[str]:
    schedule = parse_schedule(spec, **options)  # type: ignore[arg-type]
    return [fire.isoformat() for fire in schedule.upcoming(start, n)]


def utc(*parts: str) -> list[str]:
    return [f"{part}+00:00" for part in parts]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("*/15 * * * *", utc("2026-01-01T00:15:00", "2026-01-01T00:30:00", "2026-01-01T00:45:00")),
        (
            "0 9 * * MON-FRI",
            utc("2026-01-01T09:00:00", "2026-01-02T09:00:00", "2026-01-05T09:00:00"),
        ),
        (
            "0 8-10/2,20 * * *",
            utc("2026-01-01T08:00:00", "2026-01-01T10:00:00", "2026-01-01T20:00:00"),
        ),
        (
            "0 0 1 JAN,jul *",
            utc("2026-07-01T00:00:00", "2027-01-01T00:00:00", "2027-07-01T00:00:00"),
        ),
        ("0 0 * * 7", utc("2026-01-04T00:00:00", "2026-01-11T00:00:00", "2026-01-18T00:00:00")),
        ("0 0 * * 0", utc("2026-01-04T00:00:00", "2026-01-11T00:00:00", "2026-01-18T00:00:00")),
        (
            "0 0 * * FRI-SUN",
            utc("2026-01-02T00:00:00", "2026-01-03T00:00:00", "2026-01-04T00:00:00"),
        ),
        ("0 0 L * *", utc("2026-01-31T00:00:00", "2026-02-28T00:00:00", "2026-03-31T00:00:00")),
        ("0 0 L-2 * *", utc("2026-01-29T00:00:00", "2026-02-26T00:00:00", "2026-03-29T00:00:00")),
        ("0 0 15W * *", utc("2026-01-15T00:00:00", "2026-02-16T00:00:00", "2026-03-16T00:00:00")),
        ("0 0 1W * *", utc("2026-02-02T00:00:00", "2026-03-02T00:00:00", "2026-04-01T00:00:00")),
        ("0 0 LW * *", utc("2026-01-30T00:00:00", "2026-02-27T00:00:00", "2026-03-31T00:00:00")),
        ("0 0 * * 1#2", utc("2026-01-12T00:00:00", "2026-02-09T00:00:00", "2026-03-09T00:00:00")),
        ("0 0 * * 5#5", utc("2026-01-30T00:00:00", "2026-05-29T00:00:00", "2026-07-31T00:00:00")),
        ("0 0 * * 5L", utc("2026-01-30T00:00:00", "2026-02-27T00:00:00", "2026-03-27T00:00:00")),
        ("0 0 ? * MON", utc("2026-01-05T00:00:00", "2026-01-12T00:00:00", "2026-01-19T00:00:00")),
        ("0 0 13 * ?", utc("2026-01-13T00:00:00", "2026-02-13T00:00:00", "2026-03-13T00:00:00")),
        # crontab(5): both day fields restricted (neither starts with *): either may match.
        ("0 0 13 * 5", utc("2026-01-02T00:00:00", "2026-01-09T00:00:00", "2026-01-13T00:00:00")),
    ],
)
def test_five_field_cron_fires_at_the_listed_instants(spec: str, expected: list[str]) -> None:
    assert fires(spec) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # a day field starting with "*" makes the day match both fields, as Vixie cron does
        # (DOM_STAR): Mondays that are odd days of the month, not every Monday and odd day
        ("0 0 */2 * 1", utc("2026-01-05T00:00:00", "2026-01-19T00:00:00", "2026-02-09T00:00:00")),
        # the same days written without a leading "*": both restricted, either may match
        (
            "0 0 1-31/2 * 1",
            utc("2026-01-03T00:00:00", "2026-01-05T00:00:00", "2026-01-07T00:00:00"),
        ),
        ("0 0 */1 * 5", utc("2026-01-02T00:00:00", "2026-01-09T00:00:00", "2026-01-16T00:00:00")),
        ("0 0 13 * */7", utc("2026-09-13T00:00:00", "2026-12-13T00:00:00", "2027-06-13T00:00:00")),
        ("0 0 1-7 * 1", utc("2026-01-02T00:00:00", "2026-01-03T00:00:00", "2026-01-04T00:00:00")),
        ("0 0 * * 1", utc("2026-01-05T00:00:00", "2026-01-12T00:00:00", "2026-01-19T00:00:00")),
    ],
)
def test_day_fields_follow_crontab5_a_star_field_means_both_must_match(
    spec: str, expected: list[str]
) -> None:
    assert fires(spec) == expected


def test_six_fields_put_seconds_first() -> None:
    assert fires("30 */10 * * * *") == utc(
        "2026-01-01T00:00:30", "2026-01-01T00:10:30", "2026-01-01T00:20:30"
    )


def test_six_field_sensor_read_every_thirty_seconds() -> None:
    assert fires("*/30 * * * * *", NEW_YEAR + timedelta(seconds=5)) == utc(
        "2026-01-01T00:00:30", "2026-01-01T00:01:00", "2026-01-01T00:01:30"
    )


def test_seven_fields_end_with_the_year() -> None:
    assert fires("0 0 12 1 1 ? 2027-2029") == utc(
        "2027-01-01T12:00:00", "2028-01-01T12:00:00", "2029-01-01T12:00:00"
    )


def test_seven_field_schedule_ends_after_its_last_year() -> None:
    schedule = parse_schedule("0 0 12 1 1 ? 2027")
    assert schedule.next_after(datetime(2027, 1, 1, 12, tzinfo=UTC)) is None


def test_first_weekday_of_a_month_starting_on_saturday_stays_in_the_month() -> None:
    # 2026-08-01 is a Saturday: the nearest weekday in August is Monday the 3rd.
    assert fires("0 0 1W 8 *", n=1) == utc("2026-08-03T00:00:00")


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@yearly", utc("2027-01-01T00:00:00", "2028-01-01T00:00:00", "2029-01-01T00:00:00")),
        ("@annually", utc("2027-01-01T00:00:00", "2028-01-01T00:00:00", "2029-01-01T00:00:00")),
        ("@monthly", utc("2026-02-01T00:00:00", "2026-03-01T00:00:00", "2026-04-01T00:00:00")),
        ("@weekly", utc("2026-01-04T00:00:00", "2026-01-11T00:00:00", "2026-01-18T00:00:00")),
        ("@daily", utc("2026-01-02T00:00:00", "2026-01-03T00:00:00", "2026-01-04T00:00:00")),
        ("@midnight", utc("2026-01-02T00:00:00", "2026-01-03T00:00:00", "2026-01-04T00:00:00")),
        ("@hourly", utc("2026-01-01T01:00:00", "2026-01-01T02:00:00", "2026-01-01T03:00:00")),
    ],
)
def test_macros_expand_to_their_cron_meaning(macro: str, expected: list[str]) -> None:
    assert fires(macro) == expected


def jenkins_hash(key: str, field: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{key}\x00{field}".encode()).digest()[:8], "big")


def test_hashed_minute_steps_from_an_offset_derived_from_the_key() -> None:
    offset = jenkins_hash("make-report", "minute") % 15
    schedule = parse_schedule("H/15 * * * *", key="make-report")
    assert [fire.minute for fire in schedule.upcoming(NEW_YEAR, 4)] == [
        offset,
        offset + 15,
        offset + 30,
        offset + 45,
    ]


def test_hashed_range_with_step_stays_in_the_first_half_hour() -> None:
    offset = jenkins_hash("refresh", "minute") % 10
    schedule = parse_schedule("H(0-29)/10 * * * *", key="refresh")
    assert [fire.minute for fire in schedule.upcoming(NEW_YEAR, 3)] == [
        offset,
        offset + 10,
        offset + 20,
    ]


def test_hashed_minute_and_hour_every_two_hours_on_weekdays() -> None:
    minute = jenkins_hash("restart", "minute") % 60
    first_hour = 9 + jenkins_hash("restart", "hour") % 2
    schedule = parse_schedule("H H(9-16)/2 * * 1-5", key="restart")
    fires_ = schedule.upcoming(NEW_YEAR, 4)
    assert [(fire.hour, fire.minute) for fire in fires_] == [
        (hour, minute) for hour in range(first_hour, 17, 2)
    ]


def test_hash_is_stable_per_key_and_differs_between_keys() -> None:
    again = parse_schedule("H * * * *", key="a").next_after(NEW_YEAR)
    assert parse_schedule("H * * * *", key="a").next_after(NEW_YEAR) == again
    minutes = {
        parse_schedule("H * * * *", key=f"entry-{i}").next_after(NEW_YEAR) for i in range(20)
    }
    assert len(minutes) > 5


def test_hashed_day_of_month_never_picks_a_day_missing_from_february() -> None:
    days = {
        parse_schedule("0 0 H * *", key=f"k{i}").next_after(NEW_YEAR).day  # type: ignore[union-attr]
        for i in range(200)
    }
    assert max(days) <= 28


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "Mon..Fri *-*-* 09:00:00",
            utc("2026-01-01T09:00:00", "2026-01-02T09:00:00", "2026-01-05T09:00:00"),
        ),
        (
            "*-*-01 00:00:00",
            utc("2026-02-01T00:00:00", "2026-03-01T00:00:00", "2026-04-01T00:00:00"),
        ),
        ("Sat,Sun 10:00", utc("2026-01-03T10:00:00", "2026-01-04T10:00:00", "2026-01-10T10:00:00")),
        ("*:0/15", utc("2026-01-01T00:15:00", "2026-01-01T00:30:00", "2026-01-01T00:45:00")),
        ("minutely", utc("2026-01-01T00:01:00", "2026-01-01T00:02:00", "2026-01-01T00:03:00")),
        ("hourly", utc("2026-01-01T01:00:00", "2026-01-01T02:00:00", "2026-01-01T03:00:00")),
        ("daily", utc("2026-01-02T00:00:00", "2026-01-03T00:00:00", "2026-01-04T00:00:00")),
        ("weekly", utc("2026-01-05T00:00:00", "2026-01-12T00:00:00", "2026-01-19T00:00:00")),
        ("monthly", utc("2026-02-01T00:00:00", "2026-03-01T00:00:00", "2026-04-01T00:00:00")),
        ("quarterly", utc("2026-04-01T00:00:00", "2026-07-01T00:00:00", "2026-10-01T00:00:00")),
        ("semiannually", utc("2026-07-01T00:00:00", "2027-01-01T00:00:00", "2027-07-01T00:00:00")),
        ("yearly", utc("2027-01-01T00:00:00", "2028-01-01T00:00:00", "2029-01-01T00:00:00")),
        ("*-02~01", utc("2026-02-28T00:00:00", "2027-02-28T00:00:00", "2028-02-29T00:00:00")),
        ("Mon *-05~07/1", utc("2026-05-25T00:00:00", "2027-05-31T00:00:00", "2028-05-29T00:00:00")),
        ("2027-06-15 12:30", utc("2027-06-15T12:30:00")),
        (
            "*-*-1..3 06:00",
            utc("2026-01-01T06:00:00", "2026-01-02T06:00:00", "2026-01-03T06:00:00"),
        ),
        (
            "Tue..Thu 08,20:00",
            utc("2026-01-01T08:00:00", "2026-01-01T20:00:00", "2026-01-06T08:00:00"),
        ),
    ],
)
def test_calendar_events_fire_at_the_listed_instants(spec: str, expected: list[str]) -> None:
    assert fires(spec) == expected


def test_calendar_event_may_name_its_time_zone() -> None:
    schedule = parse_schedule("*-*-* 09:00 Europe/Berlin")
    assert schedule.timezone == "Europe/Berlin"
    assert schedule.next_after(NEW_YEAR) == datetime(2026, 1, 1, 8, tzinfo=UTC)


def test_zone_written_in_a_calendar_event_wins_over_tz() -> None:
    schedule = parse_schedule("*-*-* 09:00 UTC", tz="Europe/Berlin")
    assert schedule.timezone == "UTC"
    assert schedule.next_after(NEW_YEAR) == datetime(2026, 1, 1, 9, tzinfo=UTC)


def test_every_thirty_seconds_from_the_epoch() -> None:
    assert fires("@every 30s", NEW_YEAR + timedelta(seconds=10)) == utc(
        "2026-01-01T00:00:30", "2026-01-01T00:01:00", "2026-01-01T00:01:30"
    )


def test_every_ninety_minutes_is_anchored_to_the_epoch() -> None:
    # 2026-01-01T00:00Z is 327264 periods of 5400 s after the epoch.
    assert fires("@every 1h30m", NEW_YEAR - timedelta(seconds=1)) == utc(
        "2026-01-01T00:00:00", "2026-01-01T01:30:00", "2026-01-01T03:00:00"
    )


def test_every_is_anchored_to_start_at_when_given() -> None:
    start = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert fires("@every 1h30m", start_at=start) == utc(
        "2026-01-01T00:10:00", "2026-01-01T01:40:00", "2026-01-01T03:10:00"
    )


@pytest.mark.parametrize(
    ("every", "spec"),
    [
        (30, "@every 30s"),
        (5400, "@every 1h30m"),
        (timedelta(days=1, minutes=1), "@every 1d1m"),
        (0.5, "@every 500ms"),
    ],
)
def test_every_in_seconds_or_timedelta_is_written_as_an_every_spec(
    every: float | timedelta, spec: str
) -> None:
    schedule = parse_schedule(every)
    assert isinstance(schedule, IntervalSchedule)
    assert schedule.spec == spec
    assert schedule == parse_schedule(spec)


def test_interval_restarts_do_not_drift() -> None:
    # Two beats parsing the same spec at different moments agree on every instant.
    first = parse_schedule("@every 7s").upcoming(datetime(2026, 1, 1, 0, 0, 3, tzinfo=UTC), 100)
    later = parse_schedule("@every 7s").upcoming(first[40] - timedelta(microseconds=1), 60)
    assert later == first[40:]
    assert all(b - a == timedelta(seconds=7) for a, b in itertools.pairwise(first))


@pytest.mark.parametrize("spec", ["@reboot", "@shutdown", "@REBOOT"])
def test_event_schedules_have_no_clock_instants(spec: str) -> None:
    schedule = parse_schedule(spec)
    assert isinstance(schedule, EventSchedule)
    assert schedule.next_after(NEW_YEAR) is None
    assert schedule.upcoming(NEW_YEAR, 3) == []


def test_reboot_and_shutdown_describe_the_cluster_event() -> None:
    assert parse_schedule("@reboot").describe() == "when the beat cluster starts"
    assert parse_schedule("@shutdown").describe() == "when the last beat stops cleanly"


def test_start_at_is_an_inclusive_lower_bound() -> None:
    start = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    assert fires("*/15 * * * *", start_at=start) == utc(
        "2026-01-01T00:30:00", "2026-01-01T00:45:00", "2026-01-01T01:00:00"
    )


def test_end_at_is_an_inclusive_upper_bound() -> None:
    end = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    assert fires("*/15 * * * *", n=5, end_at=end) == utc(
        "2026-01-01T00:15:00", "2026-01-01T00:30:00"
    )


def test_next_after_is_strictly_after() -> None:
    schedule = parse_schedule("0 * * * *")
    assert schedule.next_after(datetime(2026, 1, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 2, tzinfo=UTC
    )
    assert schedule.next_after(datetime(2026, 1, 1, 1, 0, 0, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 2, tzinfo=UTC
    )


def test_fires_are_returned_in_the_schedule_zone() -> None:
    fire = parse_schedule("0 9 * * *", tz="America/New_York").next_after(NEW_YEAR)
    assert fire is not None
    assert str(fire.tzinfo) == "America/New_York"
    assert fire.isoformat() == "2026-01-01T09:00:00-05:00"


@pytest.mark.parametrize(
    ("spec", "options", "kind"),
    [
        ("*/5 * * * *", {}, CronSchedule),
        ("@daily", {}, CronSchedule),
        ("H * * * *", {"key": "k"}, CronSchedule),
        ("daily", {}, CalendarSchedule),
        ("Mon 10:00", {}, CalendarSchedule),
        ("@every 5m", {}, IntervalSchedule),
        ("@reboot", {}, EventSchedule),
        ("0 0 L * *", {"tz": "Europe/Berlin", "start_at": NEW_YEAR}, CronSchedule),
    ],
)
def test_schedules_survive_pickling_and_compare_equal(
    spec: str, options: dict[str, object], kind: type
) -> None:
    schedule = parse_schedule(spec, **options)  # type: ignore[arg-type]
    assert isinstance(schedule, kind)
    copy = pickle.loads(pickle.dumps(schedule))
    assert copy == schedule
    assert hash(copy) == hash(schedule)
    assert copy.upcoming(NEW_YEAR, 3) == schedule.upcoming(NEW_YEAR, 3)


def test_interval_of_a_tick_is_the_time_to_the_next_tick() -> None:
    schedule = parse_schedule("0 9,17 * * *")
    assert schedule.interval_at(datetime(2026, 1, 1, 9, tzinfo=UTC)) == timedelta(hours=8)
    assert schedule.interval_at(datetime(2026, 1, 1, 17, tzinfo=UTC)) == timedelta(hours=16)


@pytest.mark.parametrize(
    ("day_of_month", "day_of_week", "warned"),
    [("1-7", "mon", True), ("*/2", "mon", False), ("*", "mon", False), ("13", "*/7", False)],
)
def test_a_celery_crontab_warns_only_where_its_and_differs_from_crontab5(
    day_of_month: str, day_of_week: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from celery import Celery
    from celery.schedules import crontab

    from celery_periodiq.config import Settings
    from celery_periodiq.declare.registry import from_beat_schedule

    app = Celery("crontabs", broker="redis://127.0.0.1:6390/0", set_as_current=False)
    app.conf.beat_schedule = {
        "weekly": {
            "task": "proj.t",
            "schedule": crontab(
                minute="0", hour="0", day_of_month=day_of_month, day_of_week=day_of_week
            ),
        }
    }

    (entry,) = from_beat_schedule(app, Settings.from_app(app))

    assert entry.schedule == f"0 0 {day_of_month} * {day_of_week}"
    assert ("either one matching is enough" in caplog.text) is warned
