"""Catch-up means it: each tick ``catchup="all"`` sends runs, and a catch-up run makes
no on-time run "too soon".

The in-process tests drive the real beat (Dispatcher) and the real worker guard
(PeriodicTask, begin.lua) on an injected clock, as tests/test_seed_timelines.py does:
task A ticks every minute from 00:30 (tolerance 6 s). The process test runs real
beats and a real worker and compares what ran with what ``simulate`` said.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from celery_periodiq.model.plan import to_ms
from tests.processes import cluster, wait_for
from tests.test_seed_timelines import World


def test_each_tick_catchup_all_sends_after_an_outage_runs_and_so_does_the_next(
    redis_url: str,
) -> None:
    world = World(redis_url, catchup="all", overlap="allow")
    assert world.cron("00:30") == 1
    assert world.begin("00:31", 0, ends=("00:32", "ok")) == "ran"
    # the beats are down from 00:40 to 04:40: ticks 01:30 to 04:30 are sent at once
    assert world.cron("04:40") == 4
    verdicts = [world.begin(f"04:4{n}", n, ends=(f"04:4{n}", "ok")) for n in range(1, 5)]
    assert verdicts == ["ran"] * 4
    assert world.cron("05:30") == 1  # on time: not "too soon" after the catch-up runs
    assert world.begin("05:31", 5, ends=("05:32", "ok")) == "ran"
    stored = world.api.get("A")
    assert (stored.counters.get("started"), stored.counters.get("dropped_too_soon")) == (6, None)


def test_a_catchup_last_run_after_an_outage_leaves_the_next_on_time_run_alone(
    redis_url: str,
) -> None:
    world = World(redis_url)  # catchup "last"
    assert world.cron("00:30") == 1
    assert world.begin("00:31", 0, ends=("00:32", "ok")) == "ran"
    assert world.cron("04:40") == 1  # 04:30 standing for 01:30 to 04:30
    assert world.begin("04:41", 1, ends=("04:42", "ok")) == "ran"
    assert world.cron("05:30") == 1
    # 49 s after the catch-up run, yet it runs: the too-soon rule is for on-time runs
    assert world.begin("05:30", 2, ends=("05:31", "ok")) == "ran"


def test_an_on_time_run_too_soon_after_the_last_on_time_one_is_still_dropped(
    redis_url: str,
) -> None:
    world = World(redis_url, catchup="all", overlap="allow")
    assert world.cron("00:30") == 1
    assert world.cron("01:30") == 1
    assert world.begin("01:20", 0, ends=("01:21", "ok")) == "ran"  # A1 late in the queue
    assert world.begin("01:31", 1, ends=("01:32", "ok")) == "dropped_too_soon"


def test_under_overlap_skip_a_catch_up_run_that_finds_the_last_unfinished_is_skipped(
    redis_url: str,
) -> None:
    world = World(redis_url, catchup="all")  # overlap "skip"
    assert world.cron("00:30") == 1
    assert world.begin("00:31", 0, ends=("00:32", "ok")) == "ran"
    assert world.cron("03:40") == 3  # 01:30, 02:30, 03:30
    # one worker process takes them one after the other: each finds the last finished
    verdicts = [world.begin(f"03:4{n}", n, ends=(f"03:4{n}", "ok")) for n in range(1, 4)]
    assert verdicts == ["ran"] * 3
    assert world.cron("06:40") == 3  # 04:30, 05:30, 06:30
    # a second worker process takes 05:30 while 04:30 runs: it is skipped
    during = [("06:42", lambda: verdicts.append(world.begin("06:42", 5, ends=("06:42", "ok"))))]
    assert world.begin("06:41", 4, ends=("06:43", "ok"), during=during) == "ran"
    assert verdicts[-1] == "skipped_overlap"
    assert world.begin("06:44", 6, ends=("06:45", "ok")) == "ran"


@pytest.mark.slow
def test_catchup_all_runs_every_missed_tick_as_simulate_says(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = running.api()
        api.add("every-2s", "guarded_record", every=2, catchup="all", overlap="allow")
        worker = running.worker()
        beats = [running.beat("beat-1"), running.beat("beat-2")]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: len(running.runs_of("every-2s")) >= 2, 30, "two runs")
        for beat in beats:
            beat.stop()
        stopped = datetime.now(UTC)
        before = max(run["tick"] for run in running.runs_of("every-2s"))
        wait_for(lambda: time.time() > stopped.timestamp() + 11, 12, "eleven seconds down")
        back = datetime.now(UTC)
        beats = [running.beat("beat-3"), running.beat("beat-4")]
        back_ms = back.timestamp() * 1000
        wait_for(lambda: max(run["tick"] for run in running.runs_of("every-2s")) > back_ms,
                 30, "a run after the outage")  # fmt: skip
        enqueued = [e for e in api.history("every-2s", limit=100) if e.kind == "enqueued"]
        sent_back = min(e.at for e in enqueued if e.at >= back)  # when the beats came back
        wait_for(lambda: len(running.runs_of("every-2s")) >= len(enqueued), 30, "every run sent")
        ran = sorted({run["tick"] for run in running.runs_of("every-2s")
                      if before < run["tick"] <= sent_back.timestamp() * 1000})  # fmt: skip
        simulated = api.simulate(
            start=datetime.fromtimestamp(before / 1000 + 0.001, UTC),
            end=sent_back + timedelta(milliseconds=1),
            down=(stopped, sent_back),
            names=["every-2s"],
        )
        dropped = [e for e in api.history("every-2s", limit=100) if e.kind == "dropped_too_soon"]
    fires = [int(fire.tick.timestamp() * 1000) for fire in simulated.entries[0].fires]
    assert len(ran) >= 5  # eleven seconds down, a tick every two: at least five in the outage
    assert ran == list(range(ran[0], ran[-1] + 1, 2000)), running.logs()
    assert fires == ran
    # no run the outage owed is dropped as too soon; an on-time run queued behind the
    # burst on a busy worker may be (guarantee 4's cost), and so may one before the
    # outage, after a run the worker, just started, began late
    owed = [e for e in dropped if e.tick is None or before < to_ms(e.tick) <= to_ms(sent_back)]
    assert owed == [], dropped
