"""Several active beats over one Redis: each tick published once, none lost, even when beats die.

Real ``celery beat`` and ``celery worker`` processes against private Redis servers.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Cluster, api_for, cluster, wait_for

pytestmark = pytest.mark.slow

SECONDS = 30


def ticks_of(running: Cluster, entry: str) -> list[int]:
    return sorted(run["tick"] for run in running.runs() if run["entry"] == entry)


def run_for(running: Cluster, entry: str, seconds: int, during: Any = None) -> list[int]:
    """Wait until ``seconds`` consecutive ticks of ``entry`` ran; call ``during()`` meanwhile."""

    def enough() -> bool:
        if during is not None:
            during()
        ticks = ticks_of(running, entry)
        return bool(ticks) and ticks[-1] - ticks[0] >= seconds * 1000

    wait_for(enough, seconds + 30, f"{seconds} s of ticks of {entry}", interval=0.2)
    return ticks_of(running, entry)


def assert_each_tick_ran_once(ticks: list[int], running: Cluster) -> None:
    duplicates = sorted({tick for tick in ticks if ticks.count(tick) > 1})
    assert not duplicates, f"ticks ran twice: {duplicates}\n{running.logs()}"
    expected = list(range(ticks[0], ticks[-1] + 1, 1000))
    missing = sorted(set(expected) - set(ticks))
    assert not missing, f"ticks never ran: {missing}\n{running.logs()}"


def test_three_beats_publish_every_tick_exactly_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    # Two `celery beat` processes and one beat embedded in a worker (`celery worker -B`);
    # the entry runs from before the two join, so the ring moves twice while it runs (a
    # beat leaving a partition stops claiming it: its next tick must not wait a lease).
    with cluster(tmp_path, redis_url, broker_url) as running:
        worker = running.worker("worker", "-B", "-s", str(tmp_path / "embedded-schedule"))
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        api = api_for(redis_url, broker_url)
        api.add("each-second", "record", every=1)
        wait_for(lambda: ticks_of(running, "each-second"), 30, "the entry's first run")
        for index in range(2):
            running.beat(f"beat{index}")
        wait_for(lambda: len(api.beats()) == 3, 30, "three live beats")
        ticks = run_for(running, "each-second", SECONDS)
        claimed = {beat.id: beat.ticks_claimed for beat in api.beats()}
    assert_each_tick_ran_once(ticks, running)
    assert len(ticks) > SECONDS
    assert sum(claimed.values()) >= SECONDS
    print(f"ticks claimed per beat: {claimed}")


def test_beats_killed_and_restarted_lose_and_double_no_tick(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, lease=1) as running:
        worker = running.worker()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        beats = [running.beat(f"beat{index}") for index in range(3)]
        api = api_for(redis_url, broker_url)
        wait_for(lambda: len(api.beats()) == 3, 30, "three live beats")
        api.add("each-second", "record", every=1, catchup="all")
        kills = []
        next_kill = [time.monotonic() + 3]
        generation = [0]

        def chaos() -> None:
            if time.monotonic() < next_kill[0]:
                return
            index = random.randrange(len(beats))
            beats[index].kill()
            kills.append(index)
            generation[0] += 1
            beats[index] = running.beat(f"beat{index}-{generation[0]}")
            next_kill[0] = time.monotonic() + random.uniform(2, 4)

        ticks = run_for(running, "each-second", SECONDS, during=chaos)
    assert len(kills) >= 6
    assert_each_tick_ran_once(ticks, running)


def test_beats_divide_the_partitions_and_take_over_a_dead_beats_share(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    names = [f"tenant-{n}" for n in range(24)]
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        for name in names:
            api.add(name, "record", every=1)
        worker = running.worker()
        beats = [running.beat(f"beat{index}") for index in range(3)]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")

        def shares() -> list[int]:
            return sorted(beat.partitions for beat in api.beats())

        # three beats: each partition watched by two of them, none by all
        wait_for(lambda: len(shares()) == 3 and sum(shares()) == 2 * 16, 30, "the ring")
        assert max(shares()) < 16
        wait_for(lambda: all(api.get(n).counters.get("enqueued", 0) >= 3 for n in names),
                 30, "three runs of every entry")  # fmt: skip

        beats[0].kill()
        killed_at = time.time()
        # its heartbeat runs out after the lease (2 s): the two left watch everything
        wait_for(lambda: shares() == [16, 16], 30, "the two survivors to take over")
        taken_over = time.time() - killed_at
        wait_for(
            lambda: all(any(run["at"] > killed_at + 4 for run in running.runs_of(name))
                        for name in names), 30, "every entry to fire after the takeover",
        )  # fmt: skip

    ticks = [(run["entry"], run["tick"]) for run in running.runs()]
    assert len(ticks) == len(set(ticks)), "a tick ran twice"
    assert taken_over < 2 + 2 + 1  # lease + one heartbeat period, with some slack
