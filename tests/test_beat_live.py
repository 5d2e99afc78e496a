"""Changes through the API reach running beats within a second; outages are survived.

Real beats and workers; the schedule's Redis and the broker are separate
private servers so each can fail alone.
"""

from __future__ import annotations

import re
import shutil
import time
from datetime import datetime
from pathlib import Path

import pytest

from celery_periodiq.localredis import LocalRedis
from tests.processes import Cluster, api_for, cluster, wait_for
from tests.test_beat_cluster import ticks_of

pytestmark = pytest.mark.slow


def started(running: Cluster, beats: int = 1) -> None:
    worker = running.worker()
    for index in range(beats):
        running.beat(f"beat{index}")
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    api = api_for(running.redis_url, running.env["TEST_BROKER_URL"])
    wait_for(lambda: len(api.beats()) == beats, 30, f"{beats} live beats")


def runs_after(running: Cluster, entry: str, instant: float) -> list[dict[str, object]]:
    return [run for run in running.runs() if run["entry"] == entry and run["tick"] > instant * 1000]


@pytest.mark.compat
def test_added_paused_resumed_and_deleted_entries_take_effect_within_a_second(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_url, broker_url)
        # The beats sleep up to beat_max_loop_interval (5 s) with nothing due: only a wake-up
        # through pub/sub lets the new entry fire within its first second.
        # Its first tick is the first whole second after Redis stored it (not after this
        # line: the add takes a few ms, which can pass a whole second).
        added = time.time()
        stored = api.add("live", "record", every=1)
        assert stored.next_run is not None
        first_tick = stored.next_run.timestamp()
        first = wait_for(lambda: runs_after(running, "live", added - 1), 5, "the first run")
        assert first[0]["tick"] / 1000 == first_tick
        assert float(first[0]["at"]) - first_tick <= 1.0  # not at the beats' next 5 s loop

        paused = time.time()
        api.pause("live", note="maintenance")
        wait_for(lambda: time.time() > paused + 3, 4, "three seconds to pass")
        assert runs_after(running, "live", paused + 1) == []

        resumed = time.time()
        api.resume("live")
        wait_for(lambda: runs_after(running, "live", resumed), 3, "a run after resume")

        deleted = time.time()
        api.delete("live")
        wait_for(lambda: time.time() > deleted + 3, 4, "three seconds to pass")
        assert runs_after(running, "live", deleted + 1) == []


def test_redis_restart_mid_run_is_survived_and_missed_ticks_follow_catchup_last(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str
) -> None:
    with cluster(tmp_path, redis_server.url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_server.url, broker_url)
        api.add("through-outage", "record", every=1)
        wait_for(lambda: len(ticks_of(running, "through-outage")) >= 3, 10, "three runs")
        beat_pids = [p.process.pid for p in running.processes if p.process and "beat" in p.log.name]

        redis_server.stop(kill=True)
        down = time.monotonic()
        wait_for(lambda: time.monotonic() > down + 5, 6, "five seconds of outage")
        redis_server.start()

        def caught_up() -> list[dict[str, object]]:
            return [run for run in running.runs() if (run["missed"] or 1) > 1]

        catchup = wait_for(caught_up, 20, "a run standing for the missed ticks")
        wait_for(lambda: len(ticks_of(running, "through-outage")) >= 8, 15, "runs after the outage")
        assert all(p.running for p in running.processes), running.logs()
        still = [p.process.pid for p in running.processes if p.process and "beat" in p.log.name]
        assert still == beat_pids
    assert catchup[0]["missed"] >= 4  # about five one-second ticks fell in the outage
    ticks = ticks_of(running, "through-outage")
    assert len(ticks) == len(set(ticks))
    assert "Redis unreachable" in running.logs()


_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): (\w+)/[^\]]*\] (.*)$")


def log_lines(text: str, since: float) -> list[tuple[float, str, str]]:
    """(time, level, message) of each line of a Celery log written at ``since`` or later."""
    lines = []
    for line in text.splitlines():
        found = _LINE.match(line)
        if found:
            stamp = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if stamp >= since:
                lines.append((stamp, found[2], found[3]))
    return lines


def test_a_schedule_redis_outage_is_one_error_and_one_usable_again_once_redis_answers(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str
) -> None:
    with cluster(tmp_path, redis_server.url, broker_url) as running:
        beat = running.beat("beat")
        api = api_for(redis_server.url, broker_url)
        api.add("hourly", "record", every=3600)  # nothing falls due: passes make few calls
        wait_for(lambda: " ready; " in beat.output(), 60, "the beat to be ready")
        wait_for(lambda: api.beats(), 30, "the beat to register")

        redis_server.stop(kill=True)
        down = time.time()
        # long enough for heartbeats, passes and a reconcile retry (every 5 s) to fail
        wait_for(lambda: time.time() > down + 7, 8, "seven seconds of outage")
        up = time.time()
        redis_server.start()
        wait_for(lambda: "usable again" in beat.output(), 30, "the beat to say it is usable")
        said = time.monotonic()
        wait_for(lambda: time.monotonic() > said + 3, 4, "three more seconds of passes")
        lines = log_lines(beat.output(), down - 0.05)
        api.store.client.close()
    shown = "\n".join(f"{stamp:.3f} {level} {message}" for stamp, level, message in lines)
    errors = [(stamp, message) for stamp, level, message in lines if level == "ERROR"]
    usable = [stamp for stamp, _, message in lines if "usable again" in message]
    assert len(errors) == 1, shown  # one outage, one ERROR
    assert "Redis unreachable" in errors[0][1], shown
    assert len(usable) == 1, shown  # and one INFO when it ends
    assert usable[0] >= up, shown  # never while Redis was down
    assert errors[0][0] < usable[0], shown
    assert not [m for _, _, m in lines if "heartbeat failed" in m or "restored" in m], shown


def test_broker_outage_keeps_claimed_ticks_in_flight_until_it_returns(
    tmp_path: Path, redis_url: str
) -> None:
    # What the beat published is read from the entry's history: the worker has its own
    # reconnect back-off, and messages older than one interval rightly expire there.
    with (
        LocalRedis(tmp_path / "broker", persist=True) as broker,
        cluster(tmp_path, redis_url, broker.url, lease=1) as running,
    ):
        started(running, beats=1)
        api = api_for(redis_url, broker.url)
        api.add("through-broker-outage", "record", every=1, catchup="all")
        wait_for(lambda: len(ticks_of(running, "through-broker-outage")) >= 2, 10, "two runs")
        broker.stop(kill=True)
        down = time.time()
        wait_for(lambda: time.time() > down + 4, 5, "four seconds of broker outage")
        broker.start()

        def enqueued() -> list[int]:
            events = api.history("through-broker-outage", limit=100)
            return sorted(int(e.tick.timestamp() * 1000) for e in events if e.kind == "enqueued")

        wait_for(lambda: enqueued() and enqueued()[-1] > (down + 8) * 1000, 30, "publishing")
        ticks = enqueued()
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 1000)), running.logs()
    outage = [tick for tick in ticks if down * 1000 < tick < (down + 4) * 1000]
    assert len(outage) >= 3
    (beat,) = [process for process in running.processes if "beat" in process.log.name]
    assert beat.output().count("broker unreachable") == 1, running.logs()  # once an outage


@pytest.mark.skipif(
    shutil.which("faketime") is None, reason="faketime is not installed (make test installs it)"
)
@pytest.mark.parametrize("skew", ["+10m", "-7m"])
def test_beat_with_a_skewed_host_clock_fires_on_time(
    tmp_path: Path, redis_url: str, broker_url: str, skew: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        worker = running.worker()
        # A wrong wall clock, as on a host whose NTP is off; the monotonic clock stays real
        # (libfaketime would otherwise also shift the deadlines of Python's timed waits).
        running.beat("skewed", prefix=["faketime", "-f", skew], FAKETIME_DONT_FAKE_MONOTONIC="1")
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        api = api_for(redis_url, broker_url)
        wait_for(lambda: api.beats(), 30, "the skewed beat to register")
        api.add("on-time", "record", every=1)
        wait_for(lambda: len(ticks_of(running, "on-time")) >= 5, 15, "five runs")
        runs = [run for run in running.runs() if run["entry"] == "on-time"]
        banner = re.search(r"LocalTime -> (\S+ \S+)", running.processes[-1].output())
        assert banner is not None
        beat_clock = datetime.fromisoformat(banner.group(1)).timestamp()
    minutes = int(skew[1:-1]) * (1 if skew[0] == "+" else -1)
    assert abs(beat_clock - time.time() - minutes * 60) < 60  # the beat's host clock is off
    lateness = [run["at"] - run["tick"] / 1000 for run in sorted(runs, key=lambda r: r["tick"])]
    # The first tick may come a few ms after the add: the beat is woken for it (pub/sub),
    # which took 0.505 s under faketime with two test processes on two cores. A clock
    # 7-10 minutes off would show as minutes, early or late, in any of them.
    assert lateness[0] < 1.0, lateness
    assert max(lateness[1:]) < 0.5, lateness
    assert min(lateness) >= -0.05, lateness


@pytest.mark.skipif(
    shutil.which("faketime") is None, reason="faketime is not installed (make test installs it)"
)
def test_beat_with_a_skewed_host_clock_survives_a_schedule_redis_outage(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str
) -> None:
    """The failed passes of an outage are waited out (Celery's beat sleeps between them)
    on a host whose clock is off as on any other; then the ticks are on time again."""
    with cluster(tmp_path, redis_server.url, broker_url) as running:
        running.worker()
        beat = running.beat(
            "skewed", prefix=["faketime", "-f", "+10m"], FAKETIME_DONT_FAKE_MONOTONIC="1"
        )
        api = api_for(redis_server.url, broker_url)
        wait_for(lambda: api.beats(), 60, "the skewed beat to register")
        api.add("on-time", "record", every=1)
        wait_for(lambda: len(ticks_of(running, "on-time")) >= 2, 15, "two runs")
        api.store.client.close()
        redis_server.stop(kill=True)
        down = time.time()
        wait_for(lambda: time.time() > down + 3, 4, "three seconds of outage")
        redis_server.start()
        up = time.time()
        wait_for(
            lambda: len([t for t in ticks_of(running, "on-time") if t > (up + 2) * 1000]) >= 3,
            30,
            "three runs after the outage",
        )
        assert beat.running, running.logs()
        runs = [run for run in running.runs() if run["entry"] == "on-time"]
    after = [run["at"] - run["tick"] / 1000 for run in runs if run["tick"] > (up + 2) * 1000]
    assert max(after) < 0.5, after
    assert min(after) >= -0.05, after
