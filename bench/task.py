"""Overhead of PeriodicTask's guards per run, and the Redis round trips they cost.

    .venv/bin/python bench/task.py [--runs 10000] [--replica-acks 1]

Runs the same no-op task eagerly in this process, once as a plain Celery task
and once as a PeriodicTask (begin.lua + finish.lua against a private
redis-server on loopback), and prints p50/p99 per run of each and of the
difference, plus Redis commands per guarded run (target: exactly 2).
Target: p50 overhead under 1 ms. With ``--replica-acks N`` the Redis has N
replicas and every begin waits for them (``periodiq_replica_acks``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from typing import Any

import redis
from celery import Celery

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.headers import (
    HEADER_ENTRY,
    HEADER_INTERVAL,
    HEADER_MIN_GAP,
    HEADER_TICK,
)
from celery_periodiq.store.topology import replicas


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


def timings(call: Any, runs: int) -> list[float]:
    spent = []
    for index in range(runs):
        began = time.perf_counter()
        call(index)
        spent.append((time.perf_counter() - began) * 1000)
    return spent


class RoundTrips:
    """Counts requests written to Redis sockets in this process (a pipeline is one)."""

    def __init__(self) -> None:
        self.count = 0
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(connection: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            original(connection, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]


def _wait_for_replicas(server: LocalRedis, count: int) -> None:
    client = redis.Redis(port=server.port, decode_responses=True)
    deadline = time.monotonic() + 30
    while len(replicas(client.info("replication"), "online")) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the {count} replicas did not sync in 30 s")
        time.sleep(0.05)
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--replica-acks", type=int, default=0)
    args = parser.parse_args()

    with LocalRedis() as server, contextlib.ExitStack() as replicas:
        for _ in range(args.replica_acks):
            replicas.enter_context(
                LocalRedis(extra_args=["--replicaof", "127.0.0.1", str(server.port)])
            )
        _wait_for_replicas(server, args.replica_acks)
        app = Celery("bench", broker="memory://", set_as_current=False)
        app.conf.periodiq_redis_url = server.url
        app.conf.periodiq_replica_acks = args.replica_acks
        app.conf.task_store_eager_result = False

        @app.task(name="plain")
        def plain() -> None:
            return None

        @app.task(base=PeriodicTask, name="guarded")
        def guarded() -> None:
            return None

        periodiq(app).add("guarded", "guarded", every=1)
        trips = RoundTrips()
        base = int(time.time() * 1000)

        def run_plain(index: int) -> None:
            plain.apply()

        def run_guarded(index: int) -> None:
            guarded.apply(
                task_id=f"tick-{index}",
                headers={
                    HEADER_ENTRY: "guarded",
                    HEADER_TICK: base + index,
                    HEADER_INTERVAL: 1.0,
                    HEADER_MIN_GAP: 0,
                },
            )

        timings(run_plain, 500)  # warm up both paths and the script cache
        timings(run_guarded, 500)
        plain_ms = timings(run_plain, args.runs)
        before = trips.count
        guarded_ms = timings(lambda i: run_guarded(i + 500), args.runs)
        per_run = (trips.count - before) / args.runs
        overhead = [g - p for g, p in zip(sorted(guarded_ms), sorted(plain_ms), strict=True)]

    print(f"runs: {args.runs} each, eager, in-process; Redis {server.url} (loopback), "
          f"replica acks {args.replica_acks}")  # fmt: skip
    print(f"{'':24} {'p50 ms':>8} {'p99 ms':>8}")
    for label, values in (
        ("plain task", plain_ms),
        ("PeriodicTask", guarded_ms),
        ("guard overhead", overhead),
    ):
        print(f"{label:24} {statistics.median(values):8.3f} {percentile(values, 0.99):8.3f}")
    print(f"Redis round trips per guarded run: {per_run:.2f} (begin.lua + finish.lua)")


if __name__ == "__main__":
    main()
