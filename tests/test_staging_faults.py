"""Staged release, when something fails between staging and the instant: real beats and a
worker (``tests/apps/periodiq_app.py``), twenty entries due at one instant a few seconds
ahead, and settings that make them a burst (``periodiq_stage_min`` = 1).

Whatever happens (the staging beat killed or frozen, the broker restarted, a beat that
does not stage beside one that does), each tick runs once, none before its instant, and
none is lost.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from celery_periodiq import Periodiq
from celery_periodiq.localredis import LocalRedis
from tests.processes import Celery, Cluster, cluster, wait_for
from tests.test_faults import claims_of

pytestmark = pytest.mark.slow

LEASE = 2.0
NAMES = [f"burst-{n:02d}" for n in range(20)]
STAGING = {"TEST_STAGE_MIN": "1", "TEST_STAGE_HORIZON": "10"}
AHEAD = 7.0
"""Seconds from adding the burst to its instant: the beats start meanwhile (staging
begins about 2 s before the instant)."""


@contextmanager
def staging_cluster(tmp: Path, redis_url: str, broker_url: str) -> Iterator[Cluster]:
    with cluster(tmp, redis_url, broker_url, lease=LEASE, **STAGING) as running:
        yield running


def started(running: Cluster, *beats: tuple[str, dict[str, str]]) -> tuple[int, list[Celery]]:
    """A worker, then the burst (all due at one whole second ``AHEAD`` seconds on), then
    ``beats`` (name, environment) once it is written: the burst's instant (ms), the beats
    once ready. (Entries written while a beat's claim is on its way may stay hidden from
    it: see test_staging_between.py.)"""
    worker = running.worker()
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=AHEAD)
    running.api().add_many(
        {"name": name, "task": "record", "every": 3600, "start_at": start} for name in NAMES
    )
    started = [running.beat(name, **env) for name, env in beats]
    wait_for(lambda: all(" ready; " in beat.output() for beat in started), AHEAD,
             "the beats to be ready")  # fmt: skip
    return int(start.timestamp() * 1000), started


class Staged:
    """What waits staged in the broker's Redis (keys under the app's staging prefix)."""

    def __init__(self, running: Cluster, broker_url: str) -> None:
        self.client = redis.Redis.from_url(broker_url, decode_responses=True)
        self.prefix = f"{running.api().store.settings.key_prefix}:staged:"

    def waiting(self) -> int:
        try:
            return int(self.client.get(self.prefix + "count") or 0)
        except redis.ConnectionError:  # restarting
            return 0

    def instants(self) -> list[str]:
        return list(self.client.zrange(self.prefix + "at", 0, -1))

    def all_of_them(self, instant_ms: int) -> None:
        """Wait until every entry's message is staged, and check the instant is ahead."""
        wait_for(lambda: self.waiting() >= len(NAMES), AHEAD, "the burst to be staged")
        assert time.time() * 1000 < instant_ms - 100, "staged too late for the test"
        assert self.instants() == [str(instant_ms)]


def settled(api: Periodiq, instant_ms: int) -> bool:
    """Whether every entry's tick at ``instant_ms`` is settled (its next one scheduled)."""
    return all(int(api.get(name).state.get("next") or 0) > instant_ms for name in NAMES)


def drained(running: Cluster) -> None:
    """Wait until the worker ran a call sent after everything else: whatever was in the
    queue before it has reached the worker."""
    api = running.api()
    marker = api.app.send_task("record", args=["marker"])
    wait_for(lambda: any(r["task_id"] == marker.id for r in running.runs()), 20, "the marker")


def check_once_at(running: Cluster, api: Periodiq, instant_ms: int) -> None:
    """Every entry ran its tick once, none before the instant, no copy reached a worker."""
    runs = [run for run in running.runs() if run["entry"] in NAMES]
    logs = running.logs()
    assert sorted(run["entry"] for run in runs) == NAMES, logs
    assert {run["tick"] for run in runs} == {instant_ms}, logs
    assert min(run["at"] * 1000 for run in runs) >= instant_ms, logs  # none early
    copies = {name: api.get(name).counters.get("duplicate") for name in NAMES}
    assert not any(copies.values()), f"{copies}\n{logs}"


def released(beat: Celery) -> int:
    """How many staged messages ``beat`` says it released."""
    return sum(
        int(line.split("released ", 1)[1].split()[0])
        for line in beat.output().splitlines()
        if "periodiq: released " in line
    )


def sent_usual_way(beat: Celery) -> int:
    """How many ticks ``beat`` sent the usual way (a line each, or one for many)."""
    count = 0
    for line in beat.output().splitlines():
        if " sent as " in line:
            count += 1
        elif "periodiq: sent " in line and " ticks of " in line:
            count += int(line.split("periodiq: sent ", 1)[1].split()[0])
    return count


def holder(running: Cluster, beats: list[Celery]) -> tuple[Celery, Celery]:
    """Of two beats, the one holding the most claims (staged ones), and the other."""
    first, second = sorted(beats, key=lambda beat: -claims_of(running, pid_of(beat)))
    assert claims_of(running, pid_of(first)), "no beat holds a claim"
    return first, second


def in_flight(running: Cluster) -> str:
    """Each beat's claims, for a failure's message."""
    keys = running.api().store.keys
    held = {part.index: running.client.hgetall(part.ticks) for part in keys.all()}
    return f"claims in flight: { {index: got for index, got in held.items() if got} }"


def pid_of(beat: Celery) -> int:
    assert beat.process is not None
    return beat.process.pid


def test_the_staging_beat_killed_before_the_instant_its_messages_are_released_by_another(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with staging_cluster(tmp_path, redis_url, broker_url) as running:
        instant, beats = started(running, ("beat-a", {}), ("beat-b", {}))
        api, staged = running.api(), Staged(running, broker_url)
        staged.all_of_them(instant)
        staging, other = holder(running, beats)
        staging.kill()
        wait_for(lambda: settled(api, instant), 30,
                 f"every tick settled\n{running.logs()}\n{in_flight(running)}")  # fmt: skip
        drained(running)
        check_once_at(running, api, instant)
        assert released(other) == len(NAMES), running.logs()  # at the instant, not sent later
        assert sent_usual_way(other) == 0, running.logs()
        assert staged.instants() == []
        assert staged.waiting() == 0


def test_the_staging_beat_frozen_across_the_instant_sends_nothing_stale_when_resumed(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with staging_cluster(tmp_path, redis_url, broker_url) as running:
        instant, beats = started(running, ("beat-a", {}), ("beat-b", {}))
        api, staged = running.api(), Staged(running, broker_url)
        staged.all_of_them(instant)
        frozen, other = holder(running, beats)
        os.killpg(pid_of(frozen), signal.SIGSTOP)
        try:
            # the other beat releases at the instant, then takes the claims over
            wait_for(lambda: settled(api, instant), 30,
                     f"every tick settled\n{running.logs()}\n{in_flight(running)}")  # fmt: skip
            assert claims_of(running, pid_of(frozen)) == 0
        finally:
            os.killpg(pid_of(frozen), signal.SIGCONT)
        wait_for(lambda: "settlements refused" in frozen.output(), 20,
                 f"the resumed beat's settlements to be refused\n{running.logs()}")  # fmt: skip
        drained(running)
        check_once_at(running, api, instant)
        assert released(other) == len(NAMES), running.logs()
        assert sent_usual_way(frozen) == 0, running.logs()  # nothing stale
        assert frozen.running, running.logs()


@pytest.mark.parametrize("persist", [True, False], ids=["aof", "no-persistence"])
def test_a_broker_restarted_with_staged_messages_loses_no_tick_and_runs_none_twice(
    tmp_path: Path, redis_url: str, persist: bool
) -> None:
    with (
        LocalRedis(tmp_path / "broker", persist=persist) as broker,
        staging_cluster(tmp_path, redis_url, broker.url) as running,
    ):
        instant, (beat,) = started(running, ("beat-a", {}))
        api, staged = running.api(), Staged(running, broker.url)
        staged.all_of_them(instant)
        broker.restart(kill=True)
        assert staged.waiting() == (len(NAMES) if persist else 0)
        wait_for(lambda: settled(api, instant), 30, f"every tick settled\n{running.logs()}")
        wait_for(lambda: len([r for r in running.runs() if r["entry"] in NAMES]) >= len(NAMES),
                 20, f"a run of each entry\n{running.logs()}")  # fmt: skip
        drained(running)
        check_once_at(running, api, instant)
        if persist:  # released at the instant as staged
            assert released(beat) == len(NAMES), running.logs()
            assert sent_usual_way(beat) == 0, running.logs()
        else:  # lost with the broker's data: sent the usual way at the instant
            assert released(beat) == 0, running.logs()
            assert sent_usual_way(beat) == len(NAMES), running.logs()
        assert staged.instants() == []


def test_a_beat_that_does_not_stage_beside_one_that_does_runs_each_tick_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with staging_cluster(tmp_path, redis_url, broker_url) as running:
        instant, (staging, previous) = started(
            running, ("beat-new", {}), ("beat-old", {"TEST_STAGE_HORIZON": "0"})
        )
        api, staged = running.api(), Staged(running, broker_url)
        mine = wait_for(lambda: staged.waiting(), AHEAD, "a staged message")
        wait_for(lambda: settled(api, instant), 30, f"every tick settled\n{running.logs()}")
        drained(running)
        check_once_at(running, api, instant)
        # the staging beat claims ahead, so it usually gets them all; whatever the other
        # beat claimed at the instant it sent the usual way
        by_old = sent_usual_way(previous)
        assert released(staging) == len(NAMES) - by_old, running.logs()
        assert 0 < mine <= len(NAMES) - by_old
        assert released(previous) == 0
        assert sent_usual_way(staging) == 0
