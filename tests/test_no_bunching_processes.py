"""Runs never bunch after a fault, with real beats, a real worker and real failures.

Under catch-up "last" (the default) no two runs of an entry start less than half an
interval apart, whatever fails: beats SIGKILLed one after another (a tick claimed
late by the beat that took the partition over), or the schedule's Redis failing over
under Sentinel. Each run's start is read from the entry's history ("started", on the
Redis clock, as the guard decided it); each due tick must have run, be stood for by a
later run (``periodiq_missed``) or have its drop recorded in its entry's history.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_periodiq import Periodiq
from celery_periodiq.localredis import LocalRedis, LocalSentinel
from tests.processes import cluster, wait_for
from tests.test_faults import by_the_beats, let_pass, silent, tally

pytestmark = pytest.mark.slow

HISTORY = "400"
"""Events kept per entry: every start of the scenario."""


def starts(api: Periodiq, name: str, since_ms: int) -> list[int]:
    """When each run of ``name`` began since ``since_ms`` (ms, Redis clock), in order."""
    events = api.history(name, limit=int(HISTORY))
    return sorted(
        int(event.at.timestamp() * 1000)
        for event in events
        if event.kind == "started" and event.at.timestamp() * 1000 >= since_ms
    )


def closest(api: Periodiq, names: list[str], since_ms: int) -> tuple[int, str]:
    """The smallest gap between two consecutive starts of one entry (ms), and whose."""
    gaps = [
        (later - earlier, name)
        for name in names
        for earlier, later in itertools.pairwise(starts(api, name, since_ms))
    ]
    return min(gaps, default=(1 << 62, ""))


def test_beats_killed_one_after_another_never_bunch_two_runs_of_an_entry(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    chance = random.Random(28)
    names = [f"every-2s-{n}" for n in range(10)]
    with cluster(tmp_path, redis_url, broker_url, TEST_HISTORY_LENGTH=HISTORY) as running:
        api = running.api()
        for name in names:
            api.add(name, "guarded_record", every=2)
        worker = running.worker()
        beats = [running.beat(f"beat{index}") for index in range(3)]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: all(running.runs_of(name) for name in names), 30, "a first run of each")
        start_ms = int(time.time() * 1000)
        for generation in range(6):
            let_pass(4)
            index = chance.randrange(len(beats))
            beats[index].kill()
            beats[index] = running.beat(f"beat{index}-{generation}")
        end_ms = int(time.time() * 1000) - 4000
        let_pass(4)  # the last runs land
        result = tally(running.runs(), names, 2000, start_ms, end_ms)
        unexplained, lost = silent(api, result.lost), by_the_beats(api, result.lost)
        gap, whose = closest(api, names, start_ms)
        logs = running.logs()
    print(f"{result}; lost silently: {unexplained}; by the beats: {lost}; closest two runs: "
          f"{gap} ms apart ({whose})")  # fmt: skip
    assert gap >= 1000, f"{whose}: two runs {gap} ms apart\n{logs}"
    assert result.twice == [], f"{result}\n{logs}"
    assert unexplained == [], f"{result}\n{logs}"
    assert len(lost) <= 0.05 * result.due, f"{result}\n{logs}"


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[LocalSentinel]:
    with LocalSentinel(tmp_path / "sentinel") as running:
        yield running


def test_a_sentinel_failover_never_bunches_two_runs_of_an_entry(
    tmp_path: Path, sentinel: LocalSentinel
) -> None:
    """The primary dies just after a tick, its runs in flight: their begins wait for the
    promotion and are refused as expired (recorded); the ticks no beat could claim
    meanwhile are stood for by the first run after it, which keeps its distance."""
    names = [f"every-second-{n}" for n in range(10)]
    with (
        LocalRedis(tmp_path / "broker") as broker,
        LocalRedis(tmp_path / "runs") as runs,
        cluster(tmp_path, sentinel.url, broker.url, TEST_RUNS_URL=runs.url,
                TEST_REDIS_OPTIONS=json.dumps({"master_name": "mymaster"}),
                TEST_REPLICA_ACKS="1", TEST_HISTORY_LENGTH=HISTORY) as running,
    ):  # fmt: skip
        api = running.firing(names, task="guarded_record")
        start_ms = int(time.time() * 1000)
        let_pass(2 - time.time() % 1 + 0.01)  # the worst moment: runs of a tick in flight
        killed = sentinel.kill_primary()
        killed_at = time.time()
        wait_for(lambda: sentinel.primary() not in (None, killed), 30, "a promotion")
        wait_for(
            lambda: all(any(r["at"] > killed_at + 3 for r in running.runs_of(name))
                        for name in names),
            60, "every entry to fire again after the failover",
        )  # fmt: skip
        end_ms = int(time.time() * 1000) - 2000
        let_pass(2)
        result = tally(running.runs(), names, 1000, start_ms, end_ms)
        unexplained = silent(api, result.lost)
        gap, whose = closest(api, names, start_ms)
        logs = running.logs()
        api.delete_owner("tests")
        api.store.client.close()
    print(f"{result}; lost silently: {unexplained}; closest two runs: {gap} ms apart ({whose})")
    assert gap >= 500, f"{whose}: two runs {gap} ms apart\n{logs}"
    assert result.twice == [], f"{result}\n{logs}"
    assert unexplained == [], f"{result}\n{logs}"
