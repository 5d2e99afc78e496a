"""Runs never bunch: under catch-up "last" and "skip", no two runs of an entry start
less than half an interval apart, whatever made a tick late.

Seed 000's task A (every minute at :30, tolerance 6 s) on the injected clock of
tests/test_seed_timelines.py: the real beat's claim, plan and publish, and the real
guard's begin.lua. The beat folds a tick it would send within half an interval of
the next one into that next run; the worker drops a run that would start within
half an interval of the last one, whatever kind either is (a catch-up run delayed in
a queue, an on-time one behind it). Only ``catchup="all"`` runs back to back.
"""

from __future__ import annotations

import redis

from tests.test_seed_timelines import World


def headers(world: World, message: int) -> dict[str, object]:
    return dict(world.queue[message].headers)


def test_a_tick_the_beat_would_send_within_half_an_interval_of_the_next_is_folded_into_it(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url)

    assert world.cron("01:01") == 0  # 00:30 claimed 31 s late: the next tick is 29 s away
    assert world.cron("01:30") == 1
    assert headers(world, 0)["periodiq_missed"] == 2  # it stands for 00:30 too
    assert world.begin("01:30", 0, ends=("01:40", "ok")) == "ran"
    events = world.api.history("A", limit=10)
    missed = [event for event in events if event.kind == "missed"]
    assert missed
    assert "the next run stands for it" in missed[0].fields.get("note", "")


def test_a_tick_late_by_less_than_half_an_interval_runs_at_once_as_a_catch_up_run(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url)

    assert world.cron("00:50") == 1  # 20 s late: 40 s before the next tick
    assert headers(world, 0).get("periodiq_catchup") is True
    assert world.begin("00:50", 0, ends=("00:55", "ok")) == "ran"
    assert world.cron("01:30") == 1
    # 40 s after the catch-up run: more than half an interval, and the catch-up run is
    # not what the too-soon rule counts from
    assert world.begin("01:30", 1, ends=("01:40", "ok")) == "ran"


def test_a_catch_up_run_held_in_a_queue_until_after_the_next_run_began_is_dropped(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url)

    assert world.cron("00:50") == 1  # a catch-up run of 00:30 ...
    assert world.cron("01:30") == 1
    assert world.begin("01:30", 1, ends=("01:40", "ok")) == "ran"  # ... overtaken in a queue
    assert world.begin("01:31", 0, ends=("01:41", "ok")) == "dropped_too_soon"


def test_an_on_time_run_within_half_an_interval_of_a_late_catch_up_run_is_dropped(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url)

    assert world.cron("00:50") == 1
    assert world.begin("01:20", 0, ends=("01:25", "ok")) == "ran"  # held 30 s in a queue
    assert world.cron("01:30") == 1
    assert world.begin("01:30", 1, ends=("01:40", "ok")) == "dropped_too_soon"


def test_under_catchup_all_missed_ticks_run_back_to_back(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url, catchup="all")

    assert world.cron("02:31") == 3  # 00:30, 01:30 and 02:30
    assert "periodiq_floor" not in headers(world, 0)
    verdicts = [world.begin(f"02:3{2 + n}", n, ends=(f"02:3{2 + n}", "ok")) for n in range(3)]
    assert verdicts == ["ran", "ran", "ran"]


def test_a_tolerance_over_half_the_interval_is_the_floor_it_asks_for(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url, tolerance=50)  # the user allows runs 10 s apart

    assert world.cron("00:50") == 1
    assert headers(world, 0)["periodiq_floor"] == 10_000
    assert world.begin("01:18", 0, ends=("01:19", "ok")) == "ran"  # held 28 s in a queue
    assert world.cron("01:30") == 1
    assert world.begin("01:30", 1, ends=("01:40", "ok")) == "ran"  # 12 s later: allowed
