"""Maintenance windows and exclusion dates: the model's DST maths (pure), and the real
claim/settle Lua with the beat's Dispatcher on an injected clock (the real-beat tests are
in ``test_windows_processes.py``).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import EntryError, EntryNotFoundError, WindowError, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import from_ms, task_id_for, to_ms
from celery_periodiq.model.windows import covering, make_window
from celery_periodiq.protocol.keys import Keys
from tests.monitors import monitor_server
from tests.processes import wait_for

T0 = datetime(2027, 1, 1, 10, 0, tzinfo=UTC)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# The model: when a window is open (pure, no clock)


def test_a_recurring_window_opens_at_its_schedule_for_its_duration() -> None:
    window = make_window("nightly", schedule="0 2 * * *", tz="Europe/Berlin", duration="2h")
    assert window.open_at(utc("2026-01-10T01:59:59+01:00")) is None
    assert window.open_at(utc("2026-01-10T02:00:00+01:00")) == (
        utc("2026-01-10T02:00:00+01:00"),
        utc("2026-01-10T04:00:00+01:00"),
    )
    assert window.open_at(utc("2026-01-10T03:59:59+01:00")) is not None
    assert window.open_at(utc("2026-01-10T04:00:00+01:00")) is None  # the end is outside


def test_on_a_spring_forward_night_a_skipped_start_opens_at_the_first_valid_instant() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET does not exist, the clocks jump to 03:00 CEST
    window = make_window("nightly", schedule="30 2 * * *", tz="Europe/Berlin", duration="1h")
    assert window.open_at(utc("2026-03-29T00:59:00+00:00")) is None
    assert window.open_at(utc("2026-03-29T03:00:00+02:00")) == (
        utc("2026-03-29T03:00:00+02:00"),
        utc("2026-03-29T04:00:00+02:00"),  # one hour of real time
    )


def test_on_a_fall_back_night_a_repeated_start_opens_once_for_real_time() -> None:
    # Europe/Berlin, 2026-10-25: 02:00-02:59 happens twice (CEST, then CET)
    window = make_window("nightly", schedule="30 2 * * *", tz="Europe/Berlin", duration="1h")
    first = utc("2026-10-25T02:30:00+02:00")
    assert window.open_at(first) == (first, utc("2026-10-25T02:30:00+01:00"))
    assert window.open_at(utc("2026-10-25T02:29:00+01:00")) is not None  # the second 02:29
    assert window.open_at(utc("2026-10-25T02:30:00+01:00")) is None  # not again


def test_windows_that_overlap_make_one_stretch_until_the_last_end() -> None:
    window = make_window("busy", schedule="@every 1h", duration="50m")
    after = make_window("late", start="2027-01-01T10:40Z", end="2027-01-01T12:00Z", policy="defer")
    assert window.open_at(T0 + timedelta(minutes=10)) == (T0, T0 + timedelta(minutes=50))
    cover = covering([window, after], T0 + timedelta(minutes=45))
    assert cover is not None
    assert cover.window.id == "busy"
    only = covering([after], T0 + timedelta(minutes=45))
    assert only is not None
    assert only.end == utc("2027-01-01T12:00Z")


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ({"schedule": "0 2 * *", "duration": "1h"}, "fields"),
        ({"schedule": "@daily"}, "needs duration="),
        ({"schedule": "@daily", "duration": "0"}, "duration='0' is invalid"),
        ({"schedule": "@daily", "duration": -5}, "out of range"),
        ({"schedule": "@every 1h", "duration": "2h"}, "never close"),
        ({"schedule": "@reboot", "duration": "1h"}, "no instants"),
        ({"start": "2027-01-02T00:00Z", "end": "2027-01-01T00:00Z"}, "is not after start"),
        ({"start": "2026-01-02T00:00", "end": "2026-01-03T00:00Z"}, "no time zone"),
        ({"start": "2026-01-02T00:00Z"}, "give schedule= and duration="),
        ({"start": "2026-01-02T00:00Z", "end": "2026-01-03T00:00Z", "policy": "later"}, "policy"),
        ({"start": "2026-01-02T00:00Z", "end": "2026-01-03T00:00Z", "scope": "team:x"}, "scope"),
        ({"schedule": "@daily", "duration": "1h", "tz": "Mars/Base"}, "Mars/Base"),
    ],
)
def test_a_malformed_window_gets_one_clear_error(parts: dict[str, Any], says: str) -> None:
    with pytest.raises(WindowError, match=None) as raised:
        make_window("w", **parts)
    assert says in str(raised.value)
    assert str(raised.value).startswith("window 'w': ")


# The beat on an injected clock: real Lua, a memory broker


class World:
    """Entry A every minute at :30, a beat's dispatcher, all on one injected clock."""

    def __init__(
        self, redis_url: str, now: datetime = T0, conf: dict[str, Any] | None = None, **policy: Any
    ) -> None:
        self.app = Celery("windows", broker="memory://", set_as_current=False)
        self.app.conf.periodiq_redis_url = redis_url
        self.app.conf.update(conf or {})
        self.api = periodiq(self.app)
        self.store = self.api.store
        self.now = to_ms(now)
        self.dispatcher = Dispatcher(self.app, self.store, "window-beat")
        if "cron" not in policy:
            policy = {"every": 60, "start_at": T0 + timedelta(seconds=30), **policy}
        entry = build_entry("A", "A", **policy)
        self.store.put("add", [entry], now_ms=self.now)

    def beat(self, hhmmss: str, day: str = "2027-01-01") -> list[dict[str, Any]]:
        """The beat runs at hhmmss UTC on ``day``; returns the headers of what it sent."""
        self.now = to_ms(utc(f"{day}T{hhmmss}Z"))
        self.dispatcher.touch(None)  # as the change listener does when a window changes
        self.dispatcher.dispatch(now_ms=self.now)
        sent = []
        with self.app.connection_for_read() as connection:
            simple = connection.SimpleQueue("celery")
            while simple.qsize():
                sent.append(simple.get(timeout=1).headers)
            simple.close()
        return sent

    def events(self, *kinds: str) -> list[tuple[str, str, str]]:
        """(kind, tick hh:mm:ss, note) of the history, oldest first."""
        found = []
        for event in reversed(self.api.history("A", limit=100)):
            if not kinds or event.kind in kinds:
                tick = "" if event.tick is None else event.tick.strftime("%H:%M:%S")
                found.append((event.kind, tick, event.fields.get("note", "")))
        return found


@pytest.fixture
def world(redis_url: str, redis_client: redis.Redis) -> World:
    return World(redis_url)


def tick_of(headers: dict[str, Any]) -> str:
    return from_ms(int(headers["periodiq_tick"])).strftime("%H:%M:%S")


def test_a_skip_window_skips_the_ticks_inside_and_records_each(world: World) -> None:
    world.api.add_window(
        "deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:00Z", note="db migration"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    assert world.beat("10:02:30") == []
    assert world.beat("10:03:30") == []
    assert [tick_of(h) for h in world.beat("10:04:30")] == ["10:04:30"]
    assert world.events("skipped_window") == [
        ("skipped_window", "10:02:30", "in window 'deploy' until 2027-01-01T10:04:00Z"),
        ("skipped_window", "10:03:30", "in window 'deploy' until 2027-01-01T10:04:00Z"),
    ]
    assert world.api.get("A").counters["skipped_window"] == 2


def test_a_defer_window_sends_one_run_at_its_end_standing_for_the_ticks_inside(
    world: World,
) -> None:
    world.api.add_window(
        "deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:45Z", policy="defer"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    assert world.beat("10:02:30") == []
    assert world.api.get("A").due == utc("2027-01-01T10:03:30Z")  # each tick recorded in turn
    assert world.beat("10:03:30") == []
    assert world.beat("10:04:30") == []
    assert world.api.get("A").due == utc("2027-01-01T10:04:45Z")  # the window's end
    (run,) = world.beat("10:04:45")
    assert tick_of(run) == "10:04:30"  # the newest tick it deferred
    assert int(run["periodiq_missed"]) == 3  # it stands for all three
    assert [tick_of(h) for h in world.beat("10:05:30")] == ["10:05:30"]
    assert [e[:2] for e in world.events("deferred")] == [
        ("deferred", "10:02:30"),
        ("deferred", "10:03:30"),
        ("deferred", "10:04:30"),
    ]


def test_a_defer_window_removed_meanwhile_lets_the_entry_catch_up_at_once(world: World) -> None:
    world.api.add_window(
        "deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T11:00:00Z", policy="defer"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    assert world.beat("10:02:30") == []
    world.api.remove_window("deploy")
    (run,) = world.beat("10:03:30")  # catchup="last": one run for both ticks
    assert (tick_of(run), int(run["periodiq_missed"])) == ("10:03:30", 2)


def test_a_window_of_another_owner_or_entry_holds_nothing(world: World) -> None:
    world.api.add_window(
        "other", scope="owner:team-b", start="2027-01-01T10:00:00Z", end="2027-01-01T11:00Z"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]


def test_bad_window_input_changes_nothing(world: World) -> None:
    with pytest.raises(EntryNotFoundError):
        world.api.add_window("x", scope="entry:B", schedule="@daily", duration="1h")
    with pytest.raises(WindowError, match="in the past"):
        world.api.add_window("x", start="2020-01-01T00:00Z", end="2020-01-02T00:00Z")
    world.api.add_window("x", schedule="@daily", duration="1h")
    with pytest.raises(WindowError, match="exists already"):
        world.api.add_window("x", schedule="@hourly", duration="1m")
    with pytest.raises(WindowError, match="no window 'y'"):
        world.api.remove_window("y")
    assert [w.schedule for w in world.api.windows()] == ["@daily"]


def test_an_excluded_date_skips_the_ticks_on_it_in_the_entrys_zone(redis_url: str) -> None:
    world = World(redis_url, tz="Asia/Tokyo", exclude=["2027-01-01"])
    # 10:01:30 UTC is 19:01:30 on 1 January in Tokyo: excluded
    # (10:00:30, before the first beat, is on the excluded date too: excluded, not missed)
    assert world.beat("10:01:30") == []
    assert world.events("excluded") == [
        ("excluded", "10:00:30", "2027-01-01 is excluded"),
        ("excluded", "10:01:30", "2027-01-01 is excluded"),
    ]
    # 15:00 UTC is midnight in Tokyo: 2 January runs
    world.api.update("A", exclude=[date(2027, 1, 1)])
    assert [tick_of(h) for h in world.beat("15:00:30")] == ["15:00:30"]


def test_bad_exclusion_dates_are_refused(world: World) -> None:
    for bad in ("2026-12-25", ["2026-13-01"], [datetime(2026, 1, 1, tzinfo=UTC)], [20261225]):
        with pytest.raises(EntryError, match="exclude="):
            world.api.update("A", exclude=bad)
    assert world.api.get("A").entry.exclude == []  # type: ignore[union-attr]


# Across DST changes, on the injected clock: real claim and settle


@pytest.mark.parametrize(
    ("day", "inside", "after"),
    [
        # spring forward: 02:30 does not exist, the window opens at 03:00 CEST (01:00 UTC)
        ("2027-03-28", ["01:00:00", "01:15:00", "01:30:00", "01:45:00"], "02:00:00"),
        # fall back: 02:30 CEST (00:30 UTC) opens it for an hour; 02:30 CET does not again
        ("2027-10-31", ["00:30:00", "00:45:00", "01:00:00", "01:15:00"], "01:30:00"),
    ],
)
def test_a_window_skips_across_a_dst_change_in_its_zone(
    redis_url: str, redis_client: redis.Redis, day: str, inside: list[str], after: str
) -> None:
    world = World(redis_url, now=utc(f"{day}T00:00:00Z"), cron="*/15 * * * *", tz="Europe/Berlin")
    world.api.add_window("night", schedule="30 2 * * *", tz="Europe/Berlin", duration="1h")
    world.beat("00:15:00", day)
    sent = {}
    for hhmmss in ["00:15:00", "00:30:00", "00:45:00", "01:00:00", "01:15:00", "01:30:00",
                   "01:45:00", "02:00:00", "02:15:00"]:  # fmt: skip
        sent[hhmmss] = [tick_of(h) for h in world.beat(hhmmss, day)]
    ran = [t for ticks in sent.values() for t in ticks]
    assert [t for t in inside if t in ran] == []
    assert after in ran
    skipped = [tick for _, tick, _ in world.events("skipped_window")]
    assert skipped == inside


def test_a_defer_window_across_fall_back_sends_its_catch_up_at_its_real_end(
    redis_url: str, redis_client: redis.Redis
) -> None:
    day = "2027-10-31"
    world = World(redis_url, now=utc(f"{day}T00:00:00Z"), cron="*/15 * * * *", tz="Europe/Berlin")
    world.api.add_window(
        "night", schedule="30 2 * * *", tz="Europe/Berlin", duration="50m", policy="defer"
    )
    world.beat("00:15:00", day)
    for hhmmss in ["00:30:00", "00:45:00", "01:00:00", "01:15:00"]:
        assert world.beat(hhmmss, day) == []
    assert world.api.get("A").due == utc(f"{day}T01:20:00Z")  # 02:30 CEST + 50 min = 02:20 CET
    (run,) = world.beat("01:20:00", day)
    assert (tick_of(run), int(run["periodiq_missed"])) == ("01:15:00", 4)


# next, upcoming and simulate honour windows and excluded dates


def test_upcoming_leaves_out_skipped_ticks_and_puts_a_deferred_run_at_the_end(
    world: World,
) -> None:
    world.api.add_window("skip", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:00Z")
    world.api.add_window(
        "defer", start="2027-01-01T10:05:00Z", end="2027-01-01T10:07:45Z", policy="defer"
    )
    runs = world.api.upcoming("A", 5, after=T0 + timedelta(minutes=1))
    assert [r.astimezone(UTC).strftime("%H:%M:%S") for r in runs] == [
        "10:01:30",
        "10:04:30",
        "10:07:45",  # 10:05:30, 10:06:30 and 10:07:30 deferred to the end
        "10:08:30",
        "10:09:30",
    ]


def test_upcoming_and_simulate_leave_out_excluded_dates(redis_url: str) -> None:
    world = World(redis_url, cron="0 9 * * *", tz="Europe/Berlin", exclude=["2027-01-02"])
    runs = world.api.upcoming("A", 2, after=T0)
    assert [r.date() for r in runs] == [date(2027, 1, 3), date(2027, 1, 4)]
    simulation = world.api.simulate(start=T0, end=T0 + timedelta(days=3))
    (entry,) = simulation.entries
    assert [f.tick.date() for f in entry.fires] == [date(2027, 1, 3), date(2027, 1, 4)]
    assert [(d.reason, d.count) for d in entry.dropped] == [("excluded", 1)]


def test_simulate_decides_windows_as_the_beat_does(world: World) -> None:
    world.api.add_window(
        "defer", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:45Z", policy="defer"
    )
    simulation = world.api.simulate(start=T0, end=T0 + timedelta(minutes=6))
    (entry,) = simulation.entries
    fires = [(f.tick.strftime("%H:%M:%S"), f.sent.strftime("%H:%M:%S"), f.stands_for)
             for f in entry.fires]  # fmt: skip
    assert fires == [
        ("10:00:30", "10:00:30", 1),
        ("10:01:30", "10:01:30", 1),
        ("10:04:30", "10:04:45", 3),
        ("10:05:30", "10:05:30", 1),
    ]
    assert sum(d.count for d in entry.dropped if d.reason == "deferred") == 3


def test_a_tick_skipped_by_a_window_is_checked_in_as_ok_not_missed(redis_url: str) -> None:
    with monitor_server() as (port, received):
        url = f"http://127.0.0.1:{port}/ping/{{entry}}"
        world = World(redis_url, conf={"periodiq_checkin_url": url})
        world.api.add_window("deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T10:03:00Z")
        world.beat("10:01:30")
        assert world.beat("10:02:30") == []
        task_id = task_id_for(
            world.store.settings.key_prefix, "A", to_ms(utc("2027-01-01T10:02:30Z"))
        )
        assert wait_for(lambda: received.pings_of(task_id), 5, "the check-in") == ["/ping/A"]


def test_when_no_beat_ran_through_a_defer_window_the_next_beat_sends_one_run_for_all(
    world: World,
) -> None:
    world.api.add_window(
        "deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:45Z", policy="defer"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    (run,) = world.beat("10:05:45")  # no beat from 10:01:30 to here
    assert (tick_of(run), int(run["periodiq_missed"])) == ("10:05:30", 4)
    assert [e[:2] for e in world.events("deferred")] == [
        ("deferred", "10:02:30"),
        ("deferred", "10:03:30"),
        ("deferred", "10:04:30"),
    ]
    assert world.events("missed") == [("missed", "10:00:30", "")]  # the first beat's, only


def test_when_no_beat_ran_through_a_skip_window_its_ticks_are_skipped_not_missed(
    world: World,
) -> None:
    # the beat is down from 10:01:30 to 10:05:45: the ticks inside the window were held
    # by it (check-ins and counters say skipped), the one after it was missed, and the
    # run that goes stands for itself and that one only (the guard's catch-up count)
    world.api.add_window(
        "deploy", start="2027-01-01T10:02:00Z", end="2027-01-01T10:03:45Z", note="db"
    )
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    (run,) = world.beat("10:05:45")
    assert (tick_of(run), int(run["periodiq_missed"])) == ("10:05:30", 2)
    assert world.events("skipped_window") == [
        ("skipped_window", "10:02:30", "in window 'deploy' until 2027-01-01T10:03:45Z"),
        ("skipped_window", "10:03:30", "in window 'deploy' until 2027-01-01T10:03:45Z"),
    ]
    missed = [e[:2] for e in world.events("missed")]
    assert missed == [("missed", "10:00:30"), ("missed", "10:04:30")]
    counters = world.api.get("A").counters
    assert (counters["skipped_window"], counters["missed"]) == (2, 2)


def test_when_no_beat_ran_for_days_a_nightly_skip_windows_ticks_are_counted_skipped(
    world: World,
) -> None:
    # 02:00-04:00 UTC every night, the beat down from 10:01:30 on the 1st to 10:00:45 on
    # the 4th: 3 nights of 120 ticks held; the other 3,958 ticks since were missed, and
    # the run that goes stands for them and itself
    world.api.add_window("nightly", schedule="0 2 * * *", duration="2h")
    assert [tick_of(h) for h in world.beat("10:01:30")] == ["10:01:30"]
    (run,) = world.beat("10:00:45", day="2027-01-04")
    assert (tick_of(run), int(run["periodiq_missed"])) == ("10:00:30", 3959)
    counters = world.api.get("A").counters
    assert (counters["skipped_window"], counters["missed"]) == (360, 1 + 3958)
    notes = {e[2] for e in world.events("skipped_window")}
    assert "in window 'nightly' until 2027-01-04T04:00:00Z" in notes


def test_when_no_beat_ran_over_an_excluded_date_its_ticks_are_excluded_not_missed(
    redis_url: str,
) -> None:
    world = World(redis_url, every=3600, start_at=T0, exclude=["2027-01-02"])
    assert [tick_of(h) for h in world.beat("23:00:00")] == ["23:00:00"]
    (run,) = world.beat("01:00:00", day="2027-01-03")  # down all of the 2nd
    assert (tick_of(run), int(run["periodiq_missed"])) == ("01:00:00", 2)  # and 00:00 on the 3rd
    assert world.api.get("A").counters["excluded"] == 24
    assert [e[:2] for e in world.events("missed")][-1:] == [("missed", "00:00:00")]


def test_the_windows_key_has_the_schedules_hash_tag_as_its_other_global_keys() -> None:
    keys = Keys("periodiq:app", 16)
    assert keys.windows == "{periodiq:app}:windows"
    assert keys.windows.split(":windows")[0] == keys.beats.split(":beats")[0]


def test_an_export_of_the_whole_schedule_keeps_its_windows_and_an_import_restores_them(
    world: World, redis_url: str
) -> None:
    world.api.add_window("nightly", schedule="0 2 * * *", duration="2h", policy="defer")
    document = world.api.export()
    assert [w["id"] for w in document["windows"]] == ["nightly"]
    assert "windows" not in world.api.export(owner="nobody")
    world.api.remove_window("nightly")

    world.api.import_schedule(document, replace=True)

    assert [(w.id, w.policy, w.schedule) for w in world.api.windows()] == [
        ("nightly", "defer", "0 2 * * *")
    ]
    bad = {**document, "windows": [{"id": "x", "scope": "all", "policy": "later"}]}
    with pytest.raises(EntryError, match=r"window #0: .*policy='later' is unknown"):
        world.api.import_schedule(bad, replace=True)


def test_upcoming_lists_once_a_deferred_run_that_falls_on_a_tick(world: World) -> None:
    world.api.add_window(
        "defer", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:30Z", policy="defer"
    )
    runs = world.api.upcoming("A", 3, after=T0 + timedelta(minutes=2))
    assert [r.astimezone(UTC).strftime("%H:%M:%S") for r in runs] == [
        "10:04:30",  # the window's end is a tick: one run, standing for the two before
        "10:05:30",
        "10:06:30",
    ]


def test_a_defer_window_ending_on_a_tick_sends_that_tick_standing_for_all(world: World) -> None:
    world.api.add_window(
        "defer", start="2027-01-01T10:02:00Z", end="2027-01-01T10:04:30Z", policy="defer"
    )
    world.beat("10:01:30")
    assert world.beat("10:02:30") == []
    assert world.beat("10:03:30") == []
    (run,) = world.beat("10:04:30")
    assert (tick_of(run), int(run["periodiq_missed"])) == ("10:04:30", 3)
