"""@solar EVENT LAT LON fires where Celery's solar does; beat_schedule solar entries convert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from celery.schedules import solar

from celery_periodiq import ScheduleError, parse_schedule
from celery_periodiq.config import Settings
from celery_periodiq.declare.registry import from_beat_schedule


def celery_next(event: str, lat: float, lon: float, after: datetime) -> datetime:
    app = Celery("solar-reference", set_as_current=False)
    reference = solar(event, lat, lon, app=app, nowfun=lambda: after)
    return after + reference.remaining_estimate(after)


@pytest.mark.parametrize(
    ("event", "lat", "lon", "start"),
    [
        ("sunrise", 52.52, 13.40, datetime(2026, 6, 1, tzinfo=UTC)),
        ("sunset", -33.87, 151.21, datetime(2026, 12, 21, 12, tzinfo=UTC)),
        ("solar_noon", 0.0, 0.0, datetime(2026, 3, 20, tzinfo=UTC)),
        ("dawn_civil", 40.71, -74.0, datetime(2026, 11, 1, 5, tzinfo=UTC)),
        ("dusk_astronomical", 59.33, 18.07, datetime(2026, 2, 1, tzinfo=UTC)),
        # Longyearbyen: no sunrise in the polar night, the first is in mid-February
        ("sunrise", 78.22, 15.65, datetime(2026, 12, 1, tzinfo=UTC)),
    ],
)
def test_solar_fires_where_celerys_solar_does(
    event: str, lat: float, lon: float, start: datetime
) -> None:
    schedule = parse_schedule(f"@solar {event} {lat} {lon}")
    current = start
    for _ in range(3):
        ours = schedule.next_after(current)
        theirs = celery_next(event, lat, lon, current)
        assert ours is not None
        assert abs(ours - theirs) < timedelta(seconds=1), (ours, theirs)
        assert ours > current
        current = ours + timedelta(seconds=1)  # past the event, for both


def test_polar_night_has_no_sunrise_until_february() -> None:
    fire = parse_schedule("@solar sunrise 78.22 15.65").next_after(
        datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert fire is not None
    assert fire.astimezone(UTC).month == 2


def test_solar_describes_itself_and_reads_in_its_zone() -> None:
    schedule = parse_schedule("@solar sunset 52.52 13.40", tz="Europe/Berlin")
    assert schedule.describe() == "at sunset seen from 52.52, 13.4"
    fire = schedule.next_after(datetime(2026, 6, 21, tzinfo=UTC))
    assert fire is not None
    assert str(fire.tzinfo) == "Europe/Berlin"
    assert 21 <= fire.hour <= 22  # Berlin's midsummer sunset, CEST


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("@solar", ["not '@solar EVENT LAT LON'"]),
        ("@solar moonrise 52 13", ["'moonrise' is unknown", "sunrise"]),
        ("@solar sunrise 91 13", ["latitude 91", "-90 to 90"]),
        ("@solar sunrise 52 181", ["longitude 181", "-180 to 180"]),
        ("@solar sunrise north east", ["must be numbers"]),
    ],
)
def test_bad_solar_specs_are_refused(spec: str, words: list[str]) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(spec)
    for word in words:
        assert word in str(caught.value)


def test_a_solar_entry_in_beat_schedule_is_converted() -> None:
    app = Celery("solar-config", broker="memory://", set_as_current=False)
    app.conf.beat_schedule = {
        "lights-on": {"task": "house.lights", "schedule": solar("sunset", 52.52, 13.40, app=app)}
    }
    (entry,) = from_beat_schedule(app, Settings.from_app(app))
    assert (entry.name, entry.schedule, entry.source) == (
        "lights-on",
        "@solar sunset 52.52 13.4",
        "config",
    )
    assert entry.parsed_schedule().describe() == "at sunset seen from 52.52, 13.4"
