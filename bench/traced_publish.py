"""The beat's publish rate with Sentry's and OpenTelemetry's Celery integrations on vs off.

    .venv/bin/python bench/traced_publish.py [--due 5000] [--rounds 3]

Each mode runs in a process of its own (an integration patches Celery and kombu for
the whole process): ``off`` (nothing watches: messages built once and reused, put
straight into the Redis broker's lists), ``sentry`` (sentry-sdk's ``CeleryIntegration``,
every transaction sampled, its DSN a closed loopback port: the beat sends no envelope,
it starts no transaction) and ``otel`` (``CeleryInstrumentor`` with an in-memory span
exporter). With a tool on, each tick goes through ``send_task`` when it is sent (see
celery_periodiq/beat/watchers.py). Per round: ``--due`` entries due at one instant in
a fresh private ``redis-server`` pair (schedule and broker), one in-process
``Dispatcher`` (the beat's passes without ``celery beat`` around it) publishing them
all; printed: messages per second into the broker (the median of the rounds).
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis

MODES = ("off", "sentry", "otel")
_TASK = "bench.noop"


def _tool(mode: str) -> None:
    if mode == "sentry":
        import sentry_sdk
        from sentry_sdk.integrations.celery import CeleryIntegration

        sentry_sdk.init(
            dsn="http://public@127.0.0.1:9/1",
            integrations=[CeleryIntegration()],
            traces_sample_rate=1.0,
        )
    elif mode == "otel":
        from opentelemetry import trace
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        trace.set_tracer_provider(provider)
        CeleryInstrumentor().instrument()


def _round(folder: Path, due: int) -> float:
    """Messages per second of one beat publishing ``due`` ticks due at one instant."""
    with LocalRedis(folder / "schedule") as schedule, LocalRedis(folder / "broker") as broker:
        app = Celery("bench_traced", broker=broker.url, set_as_current=True)
        app.conf.periodiq_redis_url = schedule.url
        app.conf.periodiq_claim_lease = 10.0
        app.conf.periodiq_stage_horizon = 0  # the usual path: staging is off under a tool
        app.task(name=_TASK)(lambda: None)
        first = time.time() + 3
        periodiq(app).add_many(
            {"name": f"due-{i:07d}", "task": _TASK, "every": 3600,
             "start_at": datetime.fromtimestamp(first, UTC)}
            for i in range(due)
        )  # fmt: skip
        dispatcher = Dispatcher(app, periodiq(app).store, "bench")
        client = redis.Redis.from_url(broker.url)
        time.sleep(max(first - time.time(), 0) + 0.05)
        began = time.perf_counter()
        while client.llen("celery") < due:
            if not dispatcher.dispatch().claimed:
                time.sleep(0.001)
        return due / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--due", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one mode's process
    args = parser.parse_args()
    if args.mode:
        _tool(args.mode)
        with tempfile.TemporaryDirectory() as folder:
            rates = [_round(Path(folder) / str(n), args.due) for n in range(args.rounds)]
        print(json.dumps(rates))
        return
    figures = {}
    for mode in MODES:  # one process per mode, one after the other
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--due", str(args.due),
             "--rounds", str(args.rounds)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        figures[mode] = statistics.median(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.due} ticks due at one instant, 1 beat, median of {args.rounds} rounds")
    print(f"{'integration':<12} {'msgs/s':>9} {'vs off':>7}")
    for mode, rate in figures.items():
        print(f"{mode:<12} {rate:>9,.0f} {rate / figures['off']:>6.2f}x")


if __name__ == "__main__":
    main()
