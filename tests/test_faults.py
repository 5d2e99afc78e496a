"""Faults that are not crashes, with real beats and workers: a beat frozen and resumed,
beats killed at random beside a Redis killed once.

Every scenario counts, per entry, the ticks due in a window and what became of them:
a tick is covered when a run of its own began, or a later run says it stands for it
(``periodiq_missed``); it ran twice when two runs of it began.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq import EntryNotFoundError, Periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from tests.processes import Celery, Cluster, cluster, wait_for

pytestmark = pytest.mark.slow
FREEZES = int(os.environ.get("PERIODIQ_FREEZES", "4"))
"""How often the frozen-beat test stops a beat (6 or more for a longer run)."""
KILLING_S = float(os.environ.get("PERIODIQ_KILLING_S", "60"))
"""Seconds of SIGKILLs every 4 s in the random-kill soak."""


@dataclass
class Tally:
    """What became of the ticks due in a window."""

    due: int
    twice: list[tuple[str, int]]
    lost: list[tuple[str, int]]

    @property
    def lost_share(self) -> float:
        return len(self.lost) / max(self.due, 1)

    def __str__(self) -> str:
        return (
            f"{self.due} ticks due, {len(self.twice)} ran twice, {len(self.lost)} lost "
            f"({self.lost_share:.1%}); twice: {self.twice[:10]}; lost: {self.lost[:10]}"
        )


def tally(
    runs: list[dict[str, Any]], entries: list[str], period_ms: int, start_ms: int, end_ms: int
) -> Tally:
    """Count the ticks of ``entries`` (every ``period_ms``, anchored to the epoch) due in
    ``[start_ms, end_ms)``: how many, which ran twice, which no run began for or stands for."""
    wanted = set(entries)
    began: Counter[tuple[str, int]] = Counter()
    covered: set[tuple[str, int]] = set()
    for run in runs:
        if run["entry"] not in wanted or run["tick"] is None:
            continue
        tick = int(run["tick"])
        began[(run["entry"], tick)] += 1
        stands_for = int(run.get("missed") or 1)
        for back in range(stands_for):
            covered.add((run["entry"], tick - back * period_ms))
    first = -(-start_ms // period_ms) * period_ms
    due = [(name, tick) for name in entries for tick in range(first, end_ms, period_ms)]
    return Tally(
        due=len(due),
        twice=sorted(tick for tick, count in began.items() if count > 1),
        lost=[tick for tick in due if tick not in covered],
    )


DROPS = frozenset({"dropped_too_soon", "expired", "skipped_overlap", "missed"})
"""History events that say why a tick did not run: the guard refused its run (too soon
after a late one, past its expiry, the last run unfinished) or the beat skipped it."""


def silent(api: Periodiq, lost: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The ``lost`` (entry, tick) pairs whose entry's history records no drop of them:
    lost silently (the history must keep every event of the scenario)."""
    return _unrecorded(api, lost, DROPS)


def by_the_beats(api: Periodiq, lost: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The ``lost`` (entry, tick) pairs the guard did not refuse as too soon (the tolerance
    drop, recorded): what the beats lost. A worker that began a run late (a loaded
    machine) makes the next on-time run too soon after it, and drops it, by design; the
    scenarios bound what the beats lose, not the worker's pace."""
    return _unrecorded(api, lost, frozenset({"dropped_too_soon"}))


def _unrecorded(
    api: Periodiq, lost: list[tuple[str, int]], kinds: frozenset[str]
) -> list[tuple[str, int]]:
    """The ``lost`` (entry, tick) pairs whose entry's history has no event of ``kinds`` for them."""
    recorded = {
        (name, int(event.tick.timestamp() * 1000))
        for name in {name for name, _ in lost}
        for event in api.history(name, limit=1000)
        if event.kind in kinds and event.tick is not None
    }
    return [tick for tick in lost if tick not in recorded]


def let_pass(seconds: float) -> None:
    """Let ``seconds`` of real time pass (the scenario is that time passes)."""
    until = time.monotonic() + seconds
    wait_for(lambda: time.monotonic() > until, seconds + 1, f"{seconds} s to pass")


def claims_of(running: Cluster, pid: int) -> int:
    """How many claimed ticks the beat of process ``pid`` holds now."""
    keys = running.api().store.keys
    pipe = running.client.pipeline(transaction=False)
    for part in keys.all():
        pipe.hvals(part.ticks)
    owner = f":{pid}:"
    return sum(1 for claims in pipe.execute() for claim in claims if owner in claim)


def freeze_while_it_holds_claims(running: Cluster, beat: Celery, attempts: int = 20) -> int:
    """SIGSTOP ``beat`` at a moment it holds claimed ticks (checked once it is stopped);
    returns how many it holds."""
    assert beat.process is not None
    pid = beat.process.pid
    for _ in range(attempts):
        # ticks of every-second entries fall due together at each whole second
        wait_for(lambda: time.time() % 1 > 0.97, 2, "the end of a second", interval=0.002)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            if claims_of(running, pid):
                os.killpg(pid, signal.SIGSTOP)
                held = claims_of(running, pid)
                if held:
                    return held
                os.killpg(pid, signal.SIGCONT)
                break
    raise AssertionError(f"beat {pid} was never caught holding claims")


def test_a_beat_frozen_while_it_holds_claims_sends_nothing_stale_and_loses_almost_nothing(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    plain = [f"plain-{n:02d}" for n in range(20)]
    guarded = [f"guarded-{n:03d}" for n in range(100)]
    schedule = {name: {"task": "record", "every": 1} for name in plain}
    # every event of the scenario kept (40 by default, about 12 runs: a drop in its
    # first seconds would have left the history by the end, and look silent)
    with cluster(
        tmp_path,
        redis_url,
        broker_url,
        lease=2,
        beat_schedule=schedule,
        TEST_HISTORY_LENGTH=1000,
    ) as running:
        api = running.api()
        for name in guarded:
            api.add(name, "guarded_record", every=1, tolerance=0.5)
        worker = running.worker("worker", "-c", "12")
        beats = [running.beat("beat-1"), running.beat("beat-2")]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: all(" ready; " in beat.output() for beat in beats), 60, "two beats")
        wait_for(lambda: {r["entry"] for r in running.runs()} >= {*plain, *guarded}, 30,
                 "a run of every entry")  # fmt: skip
        start_ms = int(time.time() * 1000)
        held = []
        for round_ in range(FREEZES):
            beat = beats[round_ % 2]
            held.append(freeze_while_it_holds_claims(running, beat))
            let_pass(5)
            assert beat.process is not None
            os.killpg(beat.process.pid, signal.SIGCONT)
            let_pass(2)
        end_ms = int(time.time() * 1000) - 2000
        let_pass(4)  # the last runs land
        assert all(beat.running for beat in beats), running.logs()
        result = tally(running.runs(), [*plain, *guarded], 1000, start_ms, end_ms)
        counters: Counter[str] = Counter()
        for name in guarded:
            counters.update(api.get(name).counters)
        unexplained = silent(api, result.lost)
    print(f"claims held at each freeze: {held}; {result}; lost silently: {unexplained}; "
          f"guarded counters: {dict(counters)}")  # fmt: skip
    assert result.twice == [], f"{result}\n{running.logs()}"
    assert unexplained == [], f"{result}\n{running.logs()}"
    assert result.lost_share <= 0.02, f"{result}\n{running.logs()}"


def test_a_plain_task_runs_a_tick_sent_twice_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    # A beat that dies (or is stopped) between sending a tick and settling it is taken
    # over one lease later, and the tick is sent again with the same task id.
    schedule = {"plain-yearly": {"task": "record", "every": 365 * 24 * 3600}}
    with cluster(tmp_path, redis_url, broker_url, beat_schedule=schedule) as running:
        worker = running.worker()
        beat = running.beat()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: " ready; " in beat.output(), 60, "the beat to be ready")
        api = running.api()
        tick = int(time.time() * 1000)
        for _ in range(2):
            api.app.send_task(
                "record", task_id="one-tick", headers={HEADER_ENTRY: "plain-yearly",
                                                       HEADER_TICK: tick}
            )  # fmt: skip
        wait_for(lambda: api.get("plain-yearly").counters.get("duplicate"), 20,
                 "the copy to be dropped")  # fmt: skip
        succeeded = wait_for(lambda: api.get("plain-yearly").counters.get("succeeded"), 20,
                             "the run to be recorded")  # fmt: skip
        runs = [run for run in running.runs() if run["task_id"] == "one-tick"]
        other = api.app.send_task("record", args=[1])  # not a tick: untouched
        wait_for(lambda: [r for r in running.runs() if r["task_id"] == other.id], 20, "a call")
    assert len(runs) == 1, running.logs()
    assert succeeded == 1


def test_a_wiped_redis_gets_the_declared_entries_back_and_says_the_runtime_ones_are_gone(
    tmp_path: Path, broker_url: str
) -> None:
    schedule = {"declared-1s": {"task": "record", "every": 1}}
    with (
        LocalRedis(tmp_path / "schedule") as redis_server,  # no persistence: a restart wipes it
        cluster(tmp_path, redis_server.url, broker_url, beat_schedule=schedule) as running,
    ):
        api = running.api()
        api.add("runtime-1s", "record", every=1)
        worker = running.worker()
        beats = [running.beat("beat-1"), running.beat("beat-2")]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: running.runs_of("runtime-1s"), 30, "a run of the runtime entry")
        for wipe in ("flushall", "restart"):
            if wipe == "flushall":
                running.client.flushall()
            else:
                redis_server.restart(kill=True)
            wiped = time.time()
            # "runs" lives in that Redis too: a run recorded after the wipe
            wait_for(lambda: running.runs_of("declared-1s"), 20,
                     f"the declared entry to run after the {wipe}")  # fmt: skip
            with pytest.raises(EntryNotFoundError):
                api.get("runtime-1s")
            assert all(run["tick"] > (wiped - 1) * 1000 for run in running.runs())
        assert all(beat.running for beat in beats), running.logs()


@pytest.mark.soak  # a minute of kills: `make soak`; CI has test_beat_cluster's SIGKILL tests
def test_beats_killed_at_random_and_a_redis_killed_once_run_95_percent_of_ticks(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str
) -> None:
    chance = random.Random(20)
    names = [f"every-2s-{n}" for n in range(10)]
    with cluster(tmp_path, redis_server.url, broker_url) as running:
        api = running.api()
        for name in names:
            api.add(name, "guarded_record", every=2)
        worker = running.worker()
        beats = [running.beat(f"beat{index}") for index in range(3)]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: all(running.runs_of(name) for name in names), 30, "a first run of each")
        start_ms = int(time.time() * 1000)
        began = time.monotonic()
        generation = 0
        redis_killed = False
        while time.monotonic() < began + KILLING_S:
            let_pass(4)
            index = chance.randrange(len(beats))
            beats[index].kill()
            generation += 1
            beats[index] = running.beat(f"beat{index}-{generation}")
            if not redis_killed and time.monotonic() > began + KILLING_S / 2:
                redis_server.stop(kill=True)
                redis_server.start()
                redis_killed = True
        end_ms = int(time.time() * 1000) - 3000
        let_pass(4)  # the last runs land
        result = tally(running.runs(), names, 2000, start_ms, end_ms)
        counters: Counter[str] = Counter()
        for name in names:
            counters.update(api.get(name).counters)
    print(f"{result}; counters: {dict(counters)}")
    assert result.twice == [], f"{result}\n{running.logs()}"
    assert result.lost_share <= 0.05, f"{result}\n{running.logs()}"
