"""``Periodiq.simulate`` and ``celery periodiq simulate``: what the beats would publish.

The strongest check drives the real beat (its Dispatcher: claim.lua, plan_tick,
publish, ack.lua) on an injected clock through the same span and down window
that is simulated, and compares every message it publishes (entry, tick, task
id, how many ticks it stands for, when) and every tick it records as missed.
The others compare with the schedules' own ``next_after``/``upcoming`` and with
``plan_tick`` called directly.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from celery import Celery

from celery_periodiq import (
    EntryError,
    EntryNotFoundError,
    Periodiq,
    SimulationError,
)
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import plan_tick, to_ms
from celery_periodiq.model.simulation import EntrySimulation, Simulation
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_MISSED, HEADER_TICK
from tests.test_cli import cli, snapshot

BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2026, 10, 24, 23, 0, tzinfo=UTC)  # Berlin falls back at 01:00 UTC next day


def put(api: Periodiq, name: str, at: datetime, **options: Any) -> Entry:
    """Store an entry as if created at ``at`` (its first tick computed from then)."""
    entry = build_entry(name, "proj.t", **options)
    api.store.put("add", [entry], now_ms=to_ms(at))
    return entry


def only(simulation: Simulation, name: str) -> EntrySimulation:
    (item,) = [item for item in simulation.entries if item.name == name]
    return item


def ticks(item: EntrySimulation) -> list[datetime]:
    return [fire.tick for fire in item.fires]


# fires: the schedule's own instants


@pytest.mark.parametrize(
    "options",
    [
        {"cron": "*/7 9-17 * * 1-5", "tz": "America/New_York"},
        {"calendar": "Mon..Fri *-*-* 09:00", "tz": "Asia/Tokyo"},
        {"every": 5400, "start_at": datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC)},
        {"cron": "0 0 L * *", "tz": "Australia/Sydney"},
    ],
    ids=["cron", "calendar", "every", "last-day"],
)
def test_fires_are_the_schedules_upcoming_instants(api: Periodiq, options: dict[str, Any]) -> None:
    entry = put(api, "e", T0, **options)
    start, end = datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 4, 15, tzinfo=UTC)

    item = only(api.simulate(start=start, end=end, limit=5000), "e")

    schedule = entry.parsed_schedule()
    expected = [fire for fire in schedule.upcoming(start - timedelta(microseconds=1), 5000)
                if fire < end]  # fmt: skip
    assert ticks(item) == expected
    assert all(fire.kind == "on_time" and fire.sent == fire.tick for fire in item.fires)
    assert (item.fire_count, item.more, item.missed_count, item.origin) == (
        len(expected), 0, 0, "definition",
    )  # fmt: skip


def test_a_tick_due_exactly_at_the_start_is_in_the_span_and_one_at_the_end_is_not(
    api: Periodiq,
) -> None:
    put(api, "hourly", T0, cron="0 * * * *")

    item = only(api.simulate(start=T0, end=T0 + timedelta(hours=3)), "hourly")

    assert ticks(item) == [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]


def test_jittered_fires_are_sent_at_the_due_instant_the_beat_computes(api: Periodiq) -> None:
    put(api, "j", T0, every=60, jitter=20)

    item = only(api.simulate(start=T0, end=T0 + timedelta(minutes=30)), "j")

    assert len(item.fires) == 30
    for fire in item.fires:
        assert fire.sent == fire.due
        assert timedelta(0) <= fire.due - fire.tick < timedelta(seconds=20)
    assert len({fire.due - fire.tick for fire in item.fires}) > 1


# daylight saving


def test_a_time_skipped_by_spring_forward_fires_once_at_the_first_valid_instant(
    api: Periodiq,
) -> None:
    entry = put(api, "nightly", T0, cron="30 2 * * *", tz="Europe/Berlin")
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)

    item = only(api.simulate(start=start, end=start + timedelta(days=2)), "nightly")

    local = [fire.tick.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for fire in item.fires]
    assert local == ["03-29 03:00 CEST", "03-30 02:30 CEST"]
    assert ticks(item)[0] == entry.parsed_schedule().next_after(start)


def test_a_time_repeated_by_fall_back_fires_once(api: Periodiq) -> None:
    entry = put(api, "nightly", T0, cron="30 2 * * *", tz="Europe/Berlin")
    start = datetime(2026, 10, 24, 12, tzinfo=UTC)

    item = only(api.simulate(start=start, end=start + timedelta(days=2)), "nightly")

    local = [fire.tick.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for fire in item.fires]
    assert local == ["10-25 02:30 CEST", "10-26 02:30 CET"]
    # in UTC: Python never finds an instant inside a fold equal to one of another zone
    expected = [fire.astimezone(UTC) for fire in entry.parsed_schedule().upcoming(start, 2)]
    assert ticks(item) == expected


def test_an_hourly_entry_fires_25_times_on_the_fall_back_day(api: Periodiq) -> None:
    put(api, "hourly", T0, cron="0 * * * *", tz="Europe/Berlin")
    start = datetime(2026, 10, 25, tzinfo=BERLIN)
    end = datetime(2026, 10, 26, tzinfo=BERLIN)

    item = only(api.simulate(start=start, end=end), "hourly")

    local = [fire.tick.astimezone(BERLIN).strftime("%H %Z") for fire in item.fires]
    assert len(local) == 25
    assert local[:5] == ["00 CEST", "01 CEST", "02 CEST", "02 CET", "03 CET"]


# a down window: what plan_tick decides, and what a real beat publishes


def plan_at_return(api: Periodiq, entry: Entry, first: datetime, back: datetime) -> Any:
    return plan_tick(
        entry, first, back, running=False, queued=False, prefix=api.settings.key_prefix,
        catchup_cap=100, default_grace=10.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    "policy",
    [
        {"catchup": "last"},
        {"catchup": "skip"},
        {"catchup": "all"},
        {"catchup": "all", "catchup_window": 1800},
        {"catchup": "last", "catchup_window": 600},
    ],
    ids=["last", "skip", "all", "all-window", "last-window"],
)
def test_the_catch_up_when_the_beats_come_back_is_what_plan_tick_decides(
    api: Periodiq, policy: dict[str, Any]
) -> None:
    entry = put(api, "e", T0, every=300, **policy)
    gone, back = T0 + timedelta(minutes=12), T0 + timedelta(hours=1, minutes=3)

    item = only(api.simulate(start=T0, end=T0 + timedelta(hours=2), down=(gone, back)), "e")

    plan = plan_at_return(api, entry, T0 + timedelta(minutes=15), back)
    caught_up = [fire for fire in item.fires if fire.kind == "caught_up"]
    assert [(f.tick, f.stands_for, f.task_id) for f in caught_up] == [
        (t.nominal, t.missed, t.task_id) for t in plan.publish
    ]
    assert all(fire.sent == back for fire in caught_up)
    assert item.missed_count == plan.missed_count
    before = [fire.tick for fire in item.fires if fire.sent < gone]
    after = [fire.tick for fire in item.fires if fire.sent > back]
    assert before == [T0 + timedelta(minutes=m) for m in (0, 5, 10)]
    assert after == [T0 + timedelta(minutes=m) for m in range(65, 120, 5)]


def test_a_tick_the_beats_come_back_too_late_for_is_folded_into_the_next_fire(
    api: Periodiq,
) -> None:
    put(api, "e", T0, every=60)
    gone, back = T0 + timedelta(seconds=30), T0 + timedelta(minutes=1, seconds=40)

    item = only(api.simulate(start=T0, end=T0 + timedelta(minutes=3), down=(gone, back)), "e")

    # 1:00 would run 20 s before 2:00: folded into it, as a beat folds it
    assert [(fire.kind, fire.tick, fire.stands_for) for fire in item.fires] == [
        ("on_time", T0, 1),
        ("on_time", T0 + timedelta(minutes=2), 2),
    ]
    assert [(drop.at, drop.count) for drop in item.dropped] == [(back, 1)]


def test_the_catch_up_cap_is_the_apps_setting(app: Celery, api: Periodiq) -> None:
    app.conf.periodiq_catchup_cap = 3
    api = Periodiq(app)
    put(api, "e", T0, every=60, catchup="all")
    gone, back = T0 + timedelta(minutes=1), T0 + timedelta(minutes=30)

    item = only(api.simulate(start=T0, end=back, down=(gone, back)), "e")

    caught_up = [fire.tick for fire in item.fires if fire.kind == "caught_up"]
    assert caught_up == [back - timedelta(minutes=2), back - timedelta(minutes=1), back]
    assert item.missed_count == 30 - 3  # 23:01 to 23:30, the three newest caught up
    assert item.dropped[0].first == gone
    api.store.client.close()


def drain(app: Celery) -> list[Any]:
    with app.connection_for_read() as connection:
        simple = connection.SimpleQueue("celery")
        messages = []
        while simple.qsize():
            messages.append(simple.get(timeout=1))
        simple.close()
    return messages


def next_due(api: Periodiq) -> int | None:
    client = api.store.client
    dues = [
        int(found[0][1])
        for part in api.store.keys.all()
        if (found := client.zrange(part.due, 0, 0, withscores=True))
    ]
    return min(dues, default=None)


def run_beat(
    app: Celery, api: Periodiq, start: datetime, end: datetime, down: tuple[datetime, datetime]
) -> list[tuple[str, int, int, str, int]]:
    """A real beat on an injected clock: a pass at each due instant while it is up, one
    when it comes back; every message it publishes as (entry, tick, stands for, task id,
    sent at)."""
    dispatcher = Dispatcher(app, api.store, "simulate-beat")
    gone, back, stop = to_ms(down[0]), to_ms(down[1]), to_ms(end)
    clock, published = to_ms(start), []
    for _ in range(5000):
        due = next_due(api)
        if due is None:
            break
        clock = max(clock, due)
        if gone <= clock < back:
            clock = back
        if clock >= stop and clock != back:
            break
        dispatcher.dispatch(now_ms=clock)
        for message in drain(app):
            headers = message.headers
            published.append((headers[HEADER_ENTRY], headers[HEADER_TICK],
                              headers[HEADER_MISSED], headers["id"], clock))  # fmt: skip
    return sorted(published)


def test_a_down_window_is_simulated_as_a_real_beat_publishes_it(app: Celery, api: Periodiq) -> None:
    app.conf.periodiq_catchup_cap = 5
    api = Periodiq(app)
    drain(app)
    first = T0 + timedelta(seconds=1)  # no tick at the start itself: created then
    policies: dict[str, dict[str, Any]] = {
        "minutely-last": {"every": 60},
        "five-all": {"cron": "*/5 * * * *", "catchup": "all"},
        "two-skip": {"every": 120, "catchup": "skip"},
        "jitter-window": {"every": 60, "jitter": 20, "catchup": "all", "catchup_window": 600},
        "berlin-hourly": {"cron": "0 * * * *", "tz": "Europe/Berlin", "catchup": "all",
                          "catchup_window": 3600},
        "half-minute-capped": {"every": 30, "catchup": "all"},
        "ends-while-down": {"every": 60, "end_at": T0 + timedelta(hours=1, minutes=35)},
        "daily": {"cron": "15 1 * * *", "catchup": "last"},
    }  # fmt: skip
    for name, options in policies.items():
        put(api, name, T0, start_at=first, **options)
    gone, back = T0 + timedelta(hours=1, minutes=20, seconds=30), T0 + timedelta(hours=3, seconds=7)
    end = T0 + timedelta(hours=4)

    simulation = api.simulate(start=T0, end=end, down=(gone, back))
    published = run_beat(app, api, T0, end, (gone, back))

    simulated = sorted(
        (item.name, to_ms(fire.tick), fire.stands_for, fire.task_id, to_ms(fire.sent))
        for item in simulation.entries for fire in item.fires
    )  # fmt: skip
    assert simulated == published
    assert {item.name: item.missed_count for item in simulation.entries} == {
        name: api.get(name).counters.get("missed", 0) for name in policies
    }
    caught_up = {item.name: item.caught_up_count for item in simulation.entries}
    assert caught_up["half-minute-capped"] == 5
    assert caught_up["two-skip"] == 0
    assert caught_up["daily"] == 1
    api.store.client.close()


# from now: the stored next tick


def test_from_now_the_first_tick_is_the_stored_next_tick(api: Periodiq) -> None:
    now = api.now()
    put(api, "e", now - timedelta(seconds=90), every=3600)
    stored = api.get("e").next_run

    item = only(api.simulate(), "e")

    assert item.origin == "stored"
    assert stored is not None
    assert item.fires[0].tick == stored


def test_from_now_an_overdue_entry_is_caught_up_at_once_as_a_beat_would(api: Periodiq) -> None:
    now = api.now()
    entry = put(
        api,
        "e",
        now - timedelta(minutes=10, seconds=15),
        every=60,
        start_at=now - timedelta(minutes=10, seconds=15),
    )
    stored = api.get("e").next_run
    assert stored is not None

    simulation = api.simulate()

    first = only(simulation, "e").fires[0]
    plan = plan_tick(
        entry, stored, simulation.start, running=False, queued=False,
        prefix=api.settings.key_prefix, catchup_cap=100, default_grace=10.0,
    )  # fmt: skip
    (published,) = plan.publish
    assert (first.kind, first.sent) == ("caught_up", simulation.start)
    assert (first.tick, first.task_id) == (published.nominal, published.task_id)
    assert first.stands_for == published.missed >= 10


def test_from_now_a_down_window_that_began_earlier_counts_from_now(api: Periodiq) -> None:
    now = api.now()
    put(
        api,
        "e",
        now - timedelta(minutes=10, seconds=15),
        every=60,
        start_at=now - timedelta(minutes=10, seconds=15),
    )
    stored = api.get("e").next_run
    assert stored is not None

    simulation = api.simulate(down=(now - timedelta(hours=1), now + timedelta(minutes=30)))

    assert simulation.down is not None
    assert simulation.down[0] == simulation.start
    first = only(simulation, "e").fires[0]
    back = simulation.down[1]
    assert (first.kind, first.sent) == ("caught_up", back)
    assert first.stands_for == (back - stored) // timedelta(minutes=1) + 1


def test_an_explicit_start_uses_the_definition_not_the_stored_state(api: Periodiq) -> None:
    now = api.now()
    put(api, "e", now - timedelta(minutes=10, seconds=30), every=60)

    item = only(api.simulate(start=now), "e")

    assert item.origin == "definition"
    assert item.fires[0].kind == "on_time"
    assert item.fires[0].tick >= now


# entries that fire nothing, and events


def test_paused_disabled_quarantined_and_ended_entries_say_why_nothing_fires(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    now = api.now()
    api.add("paused", "proj.t", every=60)
    api.pause("paused", note="migration")
    api.add("disabled", "proj.t", every=60, enabled=False)
    api.add("ended", "proj.t", every=60, start_at=now - timedelta(hours=2),
            end_at=now - timedelta(hours=1))  # fmt: skip
    api.add("later", "proj.t", every=60, start_at=now + timedelta(days=3))
    broken = api.store.keys.of("broken").entries
    redis_client.hset(broken, "broken", '{"name": "broken", "task": "t", "schedule": "0 61 * * *"}')

    simulation = api.simulate()

    reasons = {item.name: (item.state, item.reason) for item in simulation.entries}
    assert reasons["paused"] == ("paused", "paused until resumed (note: migration)")
    assert reasons["disabled"] == ("disabled", "disabled: it never fires")
    assert reasons["ended"] == ("ended", "ended: it has no next tick")
    state, reason = reasons["broken"]
    assert state == "quarantined"
    assert reason is not None
    assert "hour field" in reason
    state, reason = reasons["later"]
    assert state == "active"
    assert reason is not None
    assert reason.startswith("starts later")
    assert simulation.fire_count == 0


def test_an_ended_entry_still_fires_in_a_span_before_its_end(api: Periodiq) -> None:
    now = api.now()
    start = now - timedelta(hours=2)
    api.add("ended", "proj.t", every=600, start_at=start, end_at=start + timedelta(minutes=30))

    item = only(api.simulate(start=start - timedelta(minutes=1), end=now), "ended")

    assert ticks(item) == [start + timedelta(minutes=m) for m in (0, 10, 20, 30)]


def test_reboot_entries_fire_when_the_beats_come_back(api: Periodiq) -> None:
    api.add("warm", "proj.t", cron="@reboot")
    api.add("bye", "proj.t", cron="@shutdown")
    gone, back = T0 + timedelta(hours=1), T0 + timedelta(hours=2)

    without = api.simulate(start=T0)
    with_window = api.simulate(start=T0, down=(gone, back))

    assert only(without, "warm").fires == ()
    assert "no start or stop in the span" in (only(without, "warm").reason or "")
    warm, bye = only(with_window, "warm").fires, only(with_window, "bye").fires
    assert [(f.kind, f.sent) for f in warm] == [("reboot", back)]
    assert [(f.kind, f.sent) for f in bye] == [("shutdown", gone)]


# bounds


def test_an_every_second_entry_over_a_month_is_listed_up_to_the_limit_and_counted(
    api: Periodiq,
) -> None:
    put(api, "second", T0, every=1)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    began = time.monotonic()

    item = only(api.simulate(start=start, end=start + timedelta(days=30)), "second")

    assert time.monotonic() - began < 5
    assert (len(item.fires), item.more, item.more_exact) == (1000, 30 * 86400 - 1000, True)


def test_past_the_counting_bound_the_count_is_a_floor(api: Periodiq) -> None:
    put(api, "cron-second", T0, cron="* * * * * *")  # seconds first: every second
    start = datetime(2026, 1, 1, tzinfo=UTC)

    simulation = api.simulate(start=start, end=start + timedelta(days=30), limit=10)

    item = only(simulation, "cron-second")
    assert (len(item.fires), item.more_exact, simulation.exact) == (10, False, False)
    assert 50_000 <= item.more < 30 * 86400


# writes nothing


def test_simulating_writes_nothing(api: Periodiq, redis_url: str) -> None:
    now = api.now()
    put(api, "overdue", now - timedelta(minutes=30), every=60)
    api.add("nightly", "proj.t", cron="30 2 * * *", tz="Europe/Berlin", catchup="all")
    api.add("warm", "proj.t", cron="@reboot")
    api.add("paused", "proj.t", every=60)
    api.pause("paused")
    before = snapshot(redis_url)

    api.simulate(down=(now, now + timedelta(hours=3)))
    api.simulate(start=now - timedelta(days=3), end=now, names=["nightly", "overdue"])
    result = cli(api.app, "simulate", "--down", "+1h..+2h", "--json")

    assert result.exit_code == 0, result.output
    assert snapshot(redis_url) == before


# bad input


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"start": datetime(2026, 1, 1)}, SimulationError, "start=datetime.datetime(2026, 1, 1"),
        ({"start": T0, "end": T0}, SimulationError, "is not after start"),
        ({"start": T0, "end": T0 + timedelta(days=400)}, SimulationError, "longer than 366 days"),
        (
            {"start": T0, "down": (T0 + timedelta(hours=2), T0 + timedelta(hours=1))},
            SimulationError,
            "ends before it starts",
        ),
        (
            {"start": T0, "down": (T0 - timedelta(hours=1), T0 + timedelta(hours=1))},
            SimulationError,
            "is not inside the simulated span",
        ),
        (
            {"start": T0, "down": (T0, T0 + timedelta(days=2))},
            SimulationError,
            "is not inside the simulated span",
        ),
        ({"start": T0, "down": (T0,)}, SimulationError, "a pair (from, to)"),
        ({"limit": -1}, SimulationError, "limit=-1 is invalid"),
        ({"names": ["nope", "e"]}, EntryNotFoundError, "no entry named 'nope'"),
        ({"names": []}, EntryError, "names=[] is invalid"),
        ({"owner": ""}, EntryError, "owner='' is invalid"),
    ],
    ids=[
        "naive",
        "empty",
        "too-long",
        "reversed",
        "down-before",
        "down-after",
        "down-shape",
        "limit",
        "unknown-name",
        "no-names",
        "owner",
    ],
)
def test_bad_input_is_one_clear_error_and_changes_nothing(
    api: Periodiq, redis_url: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    put(api, "e", T0, every=60)
    before = snapshot(redis_url)

    with pytest.raises(error) as raised:
        api.simulate(**options)

    assert message in str(raised.value)
    assert snapshot(redis_url) == before


# command line


def test_the_command_prints_a_table_per_entry_on_its_zone_and_the_totals(api: Periodiq) -> None:
    put(api, "nightly", T0, cron="30 2 * * *", tz="Europe/Berlin")
    put(api, "quarter", T0, every=900, catchup="skip")

    result = cli(api.app, "simulate", "--from", "2026-03-28T23:00", "--to", "+4h",
                 "--down", "2026-03-29T00:20..+3h")  # fmt: skip

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "from  2026-03-28 23:00:00 UTC  (each entry from its definition)" in out
    assert "2026-03-29 03:00:00 CEST  2026-03-29 01:00:00  caught up 02:00:00 UTC" in out
    assert "2026-03-29 00:30:00  missed" in out
    assert "  9 fires, 7 missed" in out  # catchup=skip: 00:30 to 02:00 do not run
    assert "2 entries: 10 fires (1 caught up), 7 missed" in out
    assert "Assumes no run is unfinished" in out


def test_the_json_has_the_documented_shape(api: Periodiq) -> None:
    put(api, "nightly", T0, cron="30 2 * * *", tz="Europe/Berlin")

    result = cli(api.app, "simulate", "--from", "2026-03-28T12:00:00+00:00", "--to", "+1d",
                 "--json")  # fmt: skip

    data = json.loads(result.stdout)
    assert list(data) == ["from", "to", "down", "origin", "limit", "assumes", "entries",
                          "totals"]  # fmt: skip
    (entry,) = data["entries"]
    assert list(entry) == ["name", "state", "tz", "schedule", "origin", "reason", "fires",
                           "more_fires", "more_exact", "dropped", "totals"]  # fmt: skip
    (fire,) = entry["fires"]
    assert fire["tick"] == "2026-03-29T01:00:00+00:00"
    assert fire["tick_local"] == "2026-03-29T03:00:00+02:00"
    assert list(fire) == ["kind", "tick", "tick_local", "due", "due_local", "sent",
                          "stands_for", "task_id"]  # fmt: skip
    assert data["totals"] == {"entries": 1, "fires": 1, "caught_up": 0, "missed": 0,
                              "exact": True}  # fmt: skip


def test_relative_instants_count_from_the_start_and_naive_ones_are_utc(api: Periodiq) -> None:
    result = cli(api.app, "simulate", "--from", "2026-03-28T12:00", "--to", "+36h",
                 "--down", "+1h..+90m", "--json")  # fmt: skip

    data = json.loads(result.stdout)
    assert (data["from"], data["to"]) == ("2026-03-28T12:00:00+00:00", "2026-03-30T00:00:00+00:00")
    assert data["down"] == {"from": "2026-03-28T13:00:00+00:00", "to": "2026-03-28T13:30:00+00:00"}


def test_a_limited_entry_fires_only_the_runs_it_has_left(api: Periodiq, redis_client: Any) -> None:
    put(api, "three-times", T0, every=60, max_runs=3)
    put(api, "unlimited", T0, every=60)
    part = api.store.keys.of("three-times")
    state = json.loads(redis_client.hget(part.state, "three-times"))
    spent = {**state, "runs": 2}  # the beats already sent two of its three runs

    fresh = api.simulate(start=T0, end=T0 + timedelta(hours=1), names=["three-times"])
    redis_client.hset(part.state, "three-times", json.dumps(spent))
    later = api.simulate(start=T0, end=T0 + timedelta(hours=1), names=["three-times"])
    unlimited = api.simulate(start=T0, end=T0 + timedelta(hours=1), names=["unlimited"])

    assert ticks(only(fresh, "three-times")) == [T0 + timedelta(minutes=k) for k in range(3)]
    assert ticks(only(later, "three-times")) == [T0]
    assert only(unlimited, "unlimited").fire_count == 60
