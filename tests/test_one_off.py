"""One-off entries (``at=``): one tick at one instant, then ended.

The beat is the real Dispatcher running the real Lua against a private Redis, with
"now" injected; its messages go to an in-memory broker. Entries are added through
the API on the Redis clock, so their instants lie a day ahead of it.
"""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodic, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.declare.registry import declared, from_beat_schedule
from celery_periodiq.errors import EntryError
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import from_ms, to_ms
from celery_periodiq.present.shapes import entry_json
from celery_periodiq.present.terminal import Style
from celery_periodiq.present.text import list_text, upcoming_text
from celery_periodiq.protocol.headers import HEADER_MANUAL, HEADER_TICK
from celery_periodiq.schedules import OnceSchedule, parse_form
from tests.test_decorator import clean_registry  # noqa: F401 (autouse: restores the declarations)


def snapshot(client: redis.Redis) -> dict[Any, Any]:
    return {key: (client.type(key), client.dump(key)) for key in client.scan_iter()}


class Beat:
    """A beat's dispatcher on an injected clock, publishing to an in-memory broker."""

    def __init__(self, app: Celery, api: Periodiq, beat_id: str = "beat-1") -> None:
        self.app = app
        self.dispatcher = Dispatcher(app, api.store, beat_id)

    def run(self, now: datetime) -> list[int]:
        """One pass at ``now``; the tick (ms) of each scheduled message it published (the
        queue is drained: manual runs in it are left out)."""
        self.dispatcher.touch()  # look at every partition, whatever changed meanwhile
        self.dispatcher.dispatch(now_ms=to_ms(now))
        ticks = []
        with self.app.connection_for_read() as connection:
            queue = connection.SimpleQueue("celery")
            while queue.qsize():
                headers = queue.get(timeout=1).headers
                if not headers.get(HEADER_MANUAL):
                    ticks.append(int(headers[HEADER_TICK]))
            queue.close()
        return ticks


@pytest.fixture
def soon(api: Periodiq) -> datetime:
    """A day after the Redis clock, in whole seconds."""
    return api.now().replace(microsecond=0) + timedelta(days=1)


# the schedule


def test_a_once_schedule_fires_at_its_instant_and_never_again() -> None:
    instant = datetime(2030, 6, 1, 9, 30, tzinfo=UTC)
    schedule = parse_form("2030-06-01T11:30:00+02:00", "at", tz="Europe/Berlin")

    assert isinstance(schedule, OnceSchedule)
    assert schedule.spec == "2030-06-01T09:30:00+00:00"
    assert schedule.next_after(instant - timedelta(microseconds=1)) == instant
    assert schedule.next_after(instant) is None
    assert schedule.upcoming(instant - timedelta(days=9), 5) == [instant]
    assert schedule.describe() == "once at 2030-06-01 11:30:00 CEST"
    assert schedule.interval_at(instant) is None


def test_an_entrys_one_off_instant_is_stored_as_its_utc_iso_text_with_microseconds() -> None:
    entry = Entry(
        name="n", task="t", form="at", schedule="2030-06-01T11:30:00.250+02:00", tz="Asia/Tokyo"
    )

    assert entry.schedule == "2030-06-01T09:30:00.250000+00:00"
    assert entry == Entry(name="n", task="t", form="at", schedule=entry.schedule, tz="Asia/Tokyo")
    assert json.loads(entry.to_json())["schedule"] == "2030-06-01T09:30:00.250000+00:00"
    assert Entry.from_json(entry.to_json()) == entry


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("2030-06-01T09:30:00", "has no time zone"),
        (datetime(2030, 6, 1, 9, 30), "has no time zone"),
        ("next tuesday", "not ISO 8601"),
        (1_900_000_000, "not an instant"),
    ],
)
def test_a_naive_or_unreadable_instant_is_refused_naming_at(
    api: Periodiq, redis_client: redis.Redis, value: Any, words: str
) -> None:
    before = snapshot(redis_client)

    with pytest.raises(EntryError, match=r"entry 'once': at=") as caught:
        api.add("once", "proj.t", at=value)

    assert words in str(caught.value)
    assert snapshot(redis_client) == before


def test_at_with_another_schedule_option_is_refused(
    api: Periodiq, redis_client: redis.Redis, soon: datetime
) -> None:
    before = snapshot(redis_client)

    with pytest.raises(
        EntryError, match=r"exactly one of cron=, every=, calendar=, at= \(got cron="
    ):
        api.add("once", "proj.t", at=soon, cron="@daily")
    with pytest.raises(EntryError, match="give schedule= or one of"):
        api.add("once", "proj.t", at=soon, schedule=timedelta(seconds=5))

    assert snapshot(redis_client) == before


def test_an_instant_already_past_on_the_redis_clock_is_refused_and_nothing_written(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    api.add("daily", "proj.t", cron="@daily")
    before = snapshot(redis_client)
    past = api.now() - timedelta(seconds=1)

    with pytest.raises(EntryError, match="is already past") as caught:
        api.add("once", "proj.t", at=past)
    with pytest.raises(EntryError, match=r"#1: entry 'b'.*is already past"):
        api.add_many([
            {"name": "a", "task": "proj.t", "every": 60},
            {"name": "b", "task": "proj.t", "at": past},
        ])  # fmt: skip
    with pytest.raises(EntryError, match="is already past"):
        api.update("daily", at=past)

    assert "allowed: after now" in str(caught.value)
    assert snapshot(redis_client) == before


# the beat


def test_a_one_off_fires_exactly_once_at_its_instant_then_is_ended(
    app: Celery, api: Periodiq, soon: datetime
) -> None:
    api.add("once", "proj.t", at=soon.isoformat())
    beat = Beat(app, api)

    assert api.get("once").next_run == soon
    assert beat.run(soon - timedelta(milliseconds=1)) == []
    assert beat.run(soon) == [to_ms(soon)]
    assert beat.run(soon + timedelta(days=1)) == []

    stored = api.get("once")
    assert stored.status == "ended"
    assert stored.next_run is None
    assert stored.counters["enqueued"] == 1
    assert [(event.kind, event.tick) for event in api.history("once")] == [("enqueued", soon)]


def test_a_one_off_claimed_late_still_runs_once(app: Celery, api: Periodiq, soon: datetime) -> None:
    api.add("once", "proj.t", at=soon, catchup="all")
    beat = Beat(app, api)

    assert beat.run(soon + timedelta(hours=5)) == [to_ms(soon)]
    assert beat.run(soon + timedelta(hours=6)) == []
    assert api.get("once").status == "ended"


def test_two_beats_racing_on_a_one_off_publish_it_once(
    app: Celery, api: Periodiq, soon: datetime
) -> None:
    api.add("once", "proj.t", at=soon)
    first, second = Beat(app, api, "beat-1"), Beat(app, api, "beat-2")

    sent = first.run(soon) + second.run(soon) + second.run(soon + timedelta(seconds=1))

    assert sent == [to_ms(soon)]


def test_updating_an_ended_one_off_to_a_new_instant_runs_it_again(
    app: Celery, api: Periodiq, soon: datetime
) -> None:
    api.add("once", "proj.t", at=soon)
    beat = Beat(app, api)
    beat.run(soon)
    later = soon + timedelta(hours=1)

    api.update("once", at=later)

    assert api.get("once").next_run == later
    assert beat.run(later) == [to_ms(later)]
    assert api.get("once").status == "ended"


def test_a_one_off_in_redis_whose_instant_passed_is_simply_ended(api: Periodiq) -> None:
    past = api.now() - timedelta(days=3)
    entry = Entry(name="old", task="proj.t", form="at", schedule=past.isoformat())

    api.store.put("add", [entry])

    stored = api.get("old")
    assert (stored.status, stored.next_run, stored.invalid) == ("ended", None, None)


# display


def test_list_show_and_json_render_a_one_off(app: Celery, api: Periodiq, soon: datetime) -> None:
    api.add("once", "proj.t", at=soon, tz="Europe/Berlin")
    now = soon - timedelta(hours=2)
    local = soon.astimezone(OnceSchedule(soon.isoformat(), timezone="Europe/Berlin").zone)

    stored = api.get("once")
    text = list_text([stored], now, Style(False), 100)
    shape = entry_json(stored)

    assert f"once at {local:%Y-%m-%d %H:%M:%S %Z}" in text
    assert upcoming_text(stored, now) == f"{local:%Y-%m-%d %H:%M:%S %Z} (in 2h00m)"
    assert (shape["form"], shape["schedule"]) == ("at", soon.isoformat())
    assert shape["next_run"] == soon.isoformat()
    assert api.upcoming("once", 5, after=now) == [local]
    Beat(app, api).run(soon)
    ended = api.get("once")
    assert entry_json(ended)["state"] == "ended"
    assert " ended " in list_text([ended], soon, Style(False), 100)


# the other ways in


def test_export_and_import_keep_a_one_off_exactly(api: Periodiq, soon: datetime) -> None:
    exact = soon + timedelta(microseconds=123_456)
    api.add("once", "proj.t", at=exact.astimezone(timezone(timedelta(hours=-5))), tz="Asia/Tokyo")
    document = api.export()
    definition = api.get("once").entry
    api.delete("once")

    report = api.import_schedule(json.loads(json.dumps(document)))

    assert report.created == ["once"]
    assert api.get("once").entry == definition
    assert definition is not None
    assert definition.schedule == exact.isoformat()
    assert api.get("once").next_run == from_ms(to_ms(exact))


def test_the_decorator_declares_a_one_off_and_warns_when_it_is_past(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Celery("one-off-code", set_as_current=False)
    instant = datetime(2031, 1, 1, 8, tzinfo=UTC)

    @periodic(at="2031-01-01T09:00:00+01:00", app=app, name="launch")
    def launch() -> None: ...

    @periodic(at=datetime(2001, 1, 1, tzinfo=UTC), app=app, name="long-gone")
    def gone() -> None: ...

    entries = {entry.name: entry for entry in declared()}
    assert (entries["launch"].form, entries["launch"].schedule) == ("at", instant.isoformat())
    assert "at=2001-01-01T00:00:00+00:00 is already past; it will not run" in caplog.text
    with pytest.raises(EntryError, match="has no time zone"):
        periodic(at=datetime(2031, 1, 1), app=app, name="naive")(lambda: None)


def test_beat_schedule_takes_an_aware_datetime_as_a_one_off(app: Celery) -> None:
    app.conf.beat_schedule = {
        "launch": {"task": "proj.t", "schedule": datetime(2031, 1, 1, tzinfo=UTC)},
    }

    (entry,) = from_beat_schedule(app, periodiq(app).settings)

    assert (entry.form, entry.schedule, entry.source) == (
        "at",
        "2031-01-01T00:00:00+00:00",
        "config",
    )


def test_a_one_off_schedule_survives_pickling_as_itself() -> None:
    schedule = parse_form("2031-05-04T10:00:00+00:00", "at", tz="Europe/Paris")

    copy = pickle.loads(pickle.dumps(schedule))

    assert isinstance(copy, OnceSchedule)
    assert copy == schedule
    assert copy.next_after(datetime(2031, 1, 1, tzinfo=UTC)) == schedule.next_after(
        datetime(2031, 1, 1, tzinfo=UTC)
    )
