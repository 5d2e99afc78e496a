"""Bad specs fail at parse time with one exception type whose message names the problem."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from celery_periodiq import PeriodiqError, ScheduleError, parse_schedule


@pytest.mark.parametrize(
    ("spec", "options", "words"),
    [
        ("", {}, ["empty"]),
        ("   ", {}, ["empty"]),
        ("* * *", {}, ["3 fields", "5 fields"]),
        ("* * * * * * * *", {}, ["8 fields"]),
        ("61 * * * *", {}, ["minute field", "61", "0-59"]),
        ("* 24 * * *", {}, ["hour field", "24", "0-23"]),
        ("0 0 0 * *", {}, ["day-of-month field", "0", "1-31"]),
        ("0 0 * 13 *", {}, ["month field", "13", "1-12"]),
        ("0 0 * * 8", {}, ["day-of-week field", "8", "0-7"]),
        ("60 * * * * *", {}, ["second field", "60", "0-59"]),
        ("0 0 0 * * ? 1969", {}, ["year field", "1969", "1970-2099"]),
        ("0 0 * FOO *", {}, ["month field", "'FOO'"]),
        ("0 0 * * FUNDAY", {}, ["day-of-week field", "'FUNDAY'"]),
        ("*/0 * * * *", {}, ["minute field", "step", "'0'"]),
        ("*/x * * * *", {}, ["minute field", "step", "'x'"]),
        ("30-10 * * * *", {}, ["minute field", "'30-10'", "backwards"]),
        ("1,,2 * * * *", {}, ["minute field", "empty item"]),
        ("? * * * *", {}, ["minute field", "'?'"]),
        ("0 0 L-31 * *", {}, ["day-of-month field", "L-31"]),
        ("0 0 * * 1#6", {}, ["day-of-week field", "1#6", "1-5"]),
        ("0 0 * * 9L", {}, ["day-of-week field", "9"]),
        ("H * * * *", {}, ["minute field", "H needs a key"]),
        ("0 0 0 * * ? H", {"key": "k"}, ["year field", "H"]),
        ("H(40-20) * * * *", {"key": "k"}, ["minute field", "backwards"]),
        ("0 0 30 2 *", {}, ["never fire", "'30'", "'2'"]),
        ("0 0 31 4,6,9,11 *", {}, ["never fire"]),
        ("0 0 0 29 2 ? 2027", {}, ["never fire", "2027"]),
        ("@every 0s", {}, ["longer than zero"]),
        ("@every", {}, ["no duration"]),
        ("@every 5 parsecs", {}, ["'5 parsecs'", "units"]),
        ("@every 1m1m", {}, ["'m' appears twice"]),
        ("@fortnightly", {}, ["unknown macro", "@fortnightly", "@daily"]),
        ("*/5 * * * *", {"tz": "Mars/Olympus_Mons"}, ["time zone", "Mars/Olympus_Mons"]),
        ("*/5 * * * *", {"tz": ""}, ["time zone"]),
        ("Funday 10:00", {}, ["weekday", "'funday'"]),
        ("Fri..Mon 10:00", {}, ["weekday", "backwards"]),
        ("*-*-* 25:00", {}, ["hour", "25", "0-23"]),
        ("*-*-* 10:61", {}, ["minute", "61"]),
        ("*-*-* 10:00:00.5", {}, ["second", "fraction"]),
        ("*-13-01 10:00", {}, ["month", "13"]),
        ("*-02-30 10:00", {}, ["never fire"]),
        ("*-*-* 10", {}, ["not HH:MM"]),
        ("Mon 10:00 extra words", {}, ["unexpected"]),
        ("*-*-* 09:00 Nowhere/Atlantis", {}, ["Nowhere/Atlantis"]),
    ],
)
def test_bad_spec_raises_schedule_error_naming_the_problem(
    spec: str, options: dict[str, object], words: list[str]
) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(spec, **options)  # type: ignore[arg-type]
    for word in words:
        assert word in str(caught.value)


def test_schedule_error_is_a_periodiq_error_and_a_value_error() -> None:
    with pytest.raises(PeriodiqError):
        parse_schedule("nonsense")
    with pytest.raises(ValueError, match="fields"):
        parse_schedule("nonsense here")


@pytest.mark.parametrize(
    "every", [0, -5, timedelta(0), timedelta(seconds=-1), float("nan"), 0.0001]
)
def test_bad_every_is_rejected(every: object) -> None:
    with pytest.raises(ScheduleError, match="every="):
        parse_schedule(every)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [None, True, ["* * * * *"], b"* * * * *"])
def test_non_string_spec_is_rejected(spec: object) -> None:
    with pytest.raises(ScheduleError, match="not a string"):
        parse_schedule(spec)  # type: ignore[arg-type]


def test_naive_datetimes_are_rejected() -> None:
    schedule = parse_schedule("* * * * *")
    with pytest.raises(ScheduleError, match="no time zone"):
        schedule.next_after(datetime(2026, 1, 1))
    with pytest.raises(ScheduleError, match="start_at"):
        parse_schedule("* * * * *", start_at=datetime(2026, 1, 1))


def test_end_before_start_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="before start_at"):
        parse_schedule(
            "* * * * *",
            start_at=datetime(2026, 2, 1, tzinfo=UTC),
            end_at=datetime(2026, 1, 1, tzinfo=UTC),
        )


def test_negative_count_for_upcoming_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="n=-1"):
        parse_schedule("* * * * *").upcoming(datetime(2026, 1, 1, tzinfo=UTC), -1)


def test_non_string_key_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="key="):
        parse_schedule("H * * * *", key=42)  # type: ignore[arg-type]
