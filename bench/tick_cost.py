"""CPU per tick: the beat's and the schedule Redis's, with the beats run in-process.

    .venv/bin/python bench/tick_cost.py [--due 10000] [--rounds 3] [--beats 1]
    .venv/bin/python bench/tick_cost.py --instructions [--due 1000]

Each round stores ``--due`` entries (alike, every hour, their first tick a few seconds
ahead) in a fresh private ``redis-server`` pair (schedule and broker), waits until
they are due, then lets ``--beats`` processes, each a bare ``Dispatcher`` (the
beat's claim/publish/settle passes without ``celery beat`` around it), publish them
all. Printed per tick: CPU seconds of the beat processes (``time.process_time``),
of the schedule's Redis and of the broker's (``INFO cpu``), and the wall time. Then
Celery's ``send_task`` loop in ``producer.batch(500)`` (bench/_limit.py) sends as many
messages to the same broker: ``loop_wall_us`` a message, ``ratio`` (the beats' rate
over the loop's), and what this machine allows at most: ``floor_us``, the least wall
time a tick can take with these CPU costs (each beat is one thread; the beats and both
Redis servers share the machine's cores), and ``ceiling``, the ratio at that floor. What
``bench/beat.py --scenario burst`` measures end to end, taken apart; the machine's
speed drifts, so compare two checkouts by running this in each, one after the other,
more than once. Printed, never asserted.

``--instructions`` counts instructions instead, with valgrind's callgrind, which
does not depend on the machine's speed: the script runs itself and the schedule's
``redis-server`` under callgrind, zeroes their counters when the ticks are due,
and prints the marginal instructions per tick of the beat and of that Redis
(rounds of ``--due`` and of three times as many ticks, one beat; about two minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from _machine import ceiling
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis, find_redis_server

_TASK = "bench.noop"
_LEASE = {"seconds": 10.0}
"""The claim lease; under callgrind, passes are slow enough to outlast the default."""


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _app(schedule_url: str, broker_url: str) -> Celery:
    app = Celery("bench_tick_cost", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = schedule_url
    app.conf.periodiq_claim_lease = _LEASE["seconds"]
    app.conf.periodiq_stage_horizon = 0  # the usual path: --scenario boundary times staging
    app.conf.result_expires = None
    app.task(name=_TASK)(lambda: None)
    return app


def _beat(index: int, urls: tuple[str, str], due: int, ready: Any, go: Any, out: Any) -> None:
    """One beat: publish until the broker holds every tick; report its CPU seconds."""
    app = _app(*urls)
    broker = redis.Redis.from_url(urls[1])
    dispatcher = Dispatcher(app, periodiq(app).store, f"bench-{index}")
    ready.put(index)
    go.wait()
    began = time.process_time()
    while True:
        if not dispatcher.dispatch().claimed:
            if broker.llen("celery") >= due:
                break
            time.sleep(0.001)
    out.put(time.process_time() - began)


def _instructions(out: str) -> int:
    """The total a callgrind output file records."""
    for line in Path(out).read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no instruction count in {out}")


def _round(folder: Path, due: int, beats: int, counted: Path | None = None) -> dict[str, float]:
    """One round; with ``counted`` (a folder for callgrind's files, this process running
    under callgrind) the instruction counts of the beat and of the schedule's Redis too."""
    server = find_redis_server()
    if counted is not None:  # the schedule's Redis under callgrind too
        wrapper = counted / "redis-server"
        wrapper.write_text(
            "#!/bin/sh\nexec valgrind --tool=callgrind "
            f'--callgrind-out-file={counted}/redis.%p.out {server} "$@"\n'
        )
        wrapper.chmod(0o755)
        os.environ["PERIODIQ_REDIS_SERVER"] = str(wrapper)
    with contextlib.ExitStack() as stack:
        schedule = stack.enter_context(LocalRedis(folder / "schedule"))
        os.environ.pop("PERIODIQ_REDIS_SERVER", None)
        broker = stack.enter_context(LocalRedis(folder / "broker"))
        app = _app(schedule.url, broker.url)
        first = time.time() + (30 if counted is not None else 3)
        start = datetime.fromtimestamp(first, UTC)
        periodiq(app).add_many(
            {"name": f"due-{i:07d}", "task": _TASK, "every": 3600, "start_at": start}
            for i in range(due)
        )
        ready, out, go = multiprocessing.Queue(), multiprocessing.Queue(), multiprocessing.Event()
        urls = (schedule.url, broker.url)
        procs = [
            multiprocessing.Process(target=_beat, args=(index, urls, due, ready, go, out))
            for index in range(beats)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=60)
        time.sleep(max(first - time.time(), 0) + 0.05)
        schedule_client, broker_client = (redis.Redis.from_url(url) for url in urls)
        if counted is not None:  # count from here
            for pid in [schedule.pid, *(proc.pid for proc in procs)]:
                subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                               capture_output=True)  # fmt: skip
        redis_before = _cpu(schedule_client), _cpu(broker_client)
        began = time.perf_counter()
        go.set()
        beat_seconds = sum(out.get(timeout=3600) for _ in procs)
        wall = time.perf_counter() - began
        redis_after = _cpu(schedule_client), _cpu(broker_client)
        for proc in procs:
            proc.join()
        published = int(broker_client.llen("celery"))
        if published != due:
            raise SystemExit(f"{published} messages in the broker, {due} expected")
        if counted is not None:
            schedule_pid = schedule.pid
            schedule.stop()  # SIGTERM: callgrind writes its file
            return {
                "beat": sum(_instructions(f"{counted}/beat.{proc.pid}.out") for proc in procs),
                "schedule_redis": _instructions(f"{counted}/redis.{schedule_pid}.out"),
            }
        loop_wall_us = _loop(broker.url, due)
    found = {
        "beat_us": beat_seconds / due * 1e6,
        "schedule_redis_us": (redis_after[0] - redis_before[0]) / due * 1e6,
        "broker_redis_us": (redis_after[1] - redis_before[1]) / due * 1e6,
        "wall_us": wall / due * 1e6,
        "loop_wall_us": loop_wall_us,
    }
    found["ratio"] = loop_wall_us / found["wall_us"]
    spent = found["beat_us"] + found["schedule_redis_us"] + found["broker_redis_us"]
    found["floor_us"], found["ceiling"] = ceiling(found["beat_us"] / beats, spent, loop_wall_us)
    return found


def _loop(broker_url: str, due: int) -> float:
    """Wall µs a message of Celery's ``send_task`` loop in ``producer.batch(500)``."""
    limit = str(Path(__file__).with_name("_limit.py"))
    at = str(time.time() + 2)  # the loop's connection is open by then
    command = [sys.executable, limit, "--broker", broker_url, "--count", str(due), "--at", at,
               "--batch", "500"]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"]) / due * 1e6


def _count_instructions(due: int) -> None:
    """Run this script under callgrind for ``due`` and ``3 * due`` ticks; print the
    marginal instructions per tick."""
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="periodiq-tick-instructions-") as tmp:
        counts = []
        for size in (due, 3 * due):
            command = [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/beat.%p.out",
                sys.executable, __file__, "--counted", tmp, "--due", str(size),
            ]  # fmt: skip
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            counts.append(json.loads(done.stdout.strip().splitlines()[-1]))
    per_tick = {key: round((counts[1][key] - counts[0][key]) / (2 * due)) for key in counts[0]}
    print(f"instructions per tick (marginal, {due:,} and {3 * due:,} due, one beat):")
    print(json.dumps(per_tick))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beats", type=int, default=1)
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--counted", type=Path, help=argparse.SUPPRESS)  # under callgrind
    args = parser.parse_args()
    if args.instructions:
        _count_instructions(args.due or 1_000)
        return
    if args.counted is not None:
        _LEASE["seconds"] = 3600.0
        with tempfile.TemporaryDirectory(prefix="periodiq-tick-cost-") as tmp:
            counted = _round(Path(tmp), args.due, 1, args.counted)
        print(json.dumps(counted))
        return
    args.due = args.due or 10_000
    rounds = []
    with tempfile.TemporaryDirectory(prefix="periodiq-tick-cost-") as tmp:
        for index in range(args.rounds):
            rounds.append(_round(Path(tmp) / str(index), args.due, args.beats))
            print(json.dumps({key: round(value, 1) for key, value in rounds[-1].items()}))
    median = {key: round(statistics.median(r[key] for r in rounds), 1) for key in rounds[0]}
    print(f"median of {len(rounds)} rounds, {args.due:,} due, {args.beats} beat(s), µs per tick:")
    print(json.dumps(median))


if __name__ == "__main__":
    main()
