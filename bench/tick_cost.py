"""CPU per tick: the beat's and the schedule Redis's, with the beats run in-process.

    .venv/bin/python bench/tick_cost.py [--due 10000] [--rounds 3] [--beats 1]

Each round stores ``--due`` entries (alike, every hour, their first tick a few seconds
ahead) in a fresh private ``redis-server`` pair (schedule and broker), waits until
they are due, then lets ``--beats`` processes, each a bare ``Dispatcher`` (the
beat's claim/publish/settle passes without ``celery beat`` around it), publish them
all. Printed per tick: CPU seconds of the beat processes (``time.process_time``),
of the schedule's Redis and of the broker's (``INFO cpu``), and the wall time. What
``bench/beat.py --scenario burst`` measures end to end, taken apart; the machine's
speed drifts, so compare two checkouts by running this in each, one after the other,
more than once. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis

_TASK = "bench.noop"


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _app(schedule_url: str, broker_url: str) -> Celery:
    app = Celery("bench_tick_cost", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = schedule_url
    app.conf.result_expires = None
    app.task(name=_TASK)(lambda: None)
    return app


def _beat(index: int, urls: tuple[str, str], due: int, ready: Any, go: Any, out: Any) -> None:
    """One beat: publish until the broker holds every tick; report its CPU seconds."""
    app = _app(*urls)
    broker = redis.Redis.from_url(urls[1])
    dispatcher = Dispatcher(app, periodiq(app).store, f"bench-{index}", time.monotonic)
    ready.put(index)
    go.wait()
    began = time.process_time()
    while True:
        if not dispatcher.dispatch().claimed:
            if broker.llen("celery") >= due:
                break
            time.sleep(0.001)
    out.put(time.process_time() - began)


def _round(folder: Path, due: int, beats: int) -> dict[str, float]:
    with LocalRedis(folder / "schedule") as schedule, LocalRedis(folder / "broker") as broker:
        app = _app(schedule.url, broker.url)
        first = time.time() + 3
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
        redis_before = _cpu(schedule_client), _cpu(broker_client)
        began = time.perf_counter()
        go.set()
        beat_seconds = sum(out.get(timeout=600) for _ in procs)
        wall = time.perf_counter() - began
        redis_after = _cpu(schedule_client), _cpu(broker_client)
        for proc in procs:
            proc.join()
        published = int(broker_client.llen("celery"))
        if published != due:
            raise SystemExit(f"{published} messages in the broker, {due} expected")
    return {
        "beat_us": beat_seconds / due * 1e6,
        "schedule_redis_us": (redis_after[0] - redis_before[0]) / due * 1e6,
        "broker_redis_us": (redis_after[1] - redis_before[1]) / due * 1e6,
        "wall_us": wall / due * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beats", type=int, default=1)
    args = parser.parse_args()
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
