"""The beat's CPU per tick with ``periodiq_tracing`` off and on, in one run.

    .venv/bin/python bench/tracing_cost.py [--due 5000] [--rounds 3]

Each round stores ``--due`` entries (alike, every hour, their first tick a few seconds
ahead) in a fresh private ``redis-server`` pair (schedule and broker); when they are due,
a bare in-process ``Dispatcher`` (as bench/tick_cost.py runs it) publishes them all, in
a child process per mode so that each has its own global tracer provider:

- ``off``: ``periodiq_tracing`` unset (the default);
- ``on, no SDK``: tracing on with ``opentelemetry-api`` only (no tracer provider set:
  spans are not recorded, no header is added);
- ``on, SDK``: tracing on, the real SDK recording every span, a ``BatchSpanProcessor``
  handing them to an exporter that drops them (what an OTLP exporter adds is its own);
- ``on, SDK, 1%``: the same with a ``ParentBased(TraceIdRatioBased(0.01))`` sampler: a
  pass in a hundred is recorded, with its ticks (the others' spans are not recorded,
  their messages still carry a ``traceparent``, unsampled).

Printed per mode: the beat's CPU per tick (``time.process_time``, the batch processor's
thread included), the median of the rounds, the modes interleaved so that the machine's
drift hits them alike. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis

_TASK = "bench.noop"
MODES = {
    "off": {},
    "on, no SDK": {"periodiq_tracing": True},
    "on, SDK": {"periodiq_tracing": True},
    "on, SDK, 1%": {"periodiq_tracing": True},
}


def _app(schedule_url: str, broker_url: str, settings: dict[str, Any]) -> Celery:
    app = Celery("bench_tracing_cost", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = schedule_url
    app.conf.periodiq_stage_horizon = 0  # the usual path, a message sent per tick
    app.conf.update(settings)
    app.task(name=_TASK)(lambda: None)
    return app


def _sdk(ratio: float = 1.0) -> Any:
    """The real SDK on the global provider, its spans batched to an exporter that drops
    them, a ``ratio`` of the traces sampled."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
    return provider


def _beat(mode: str, urls: tuple[str, str], due: int, out: Any) -> None:
    ratio = {"on, SDK": 1.0, "on, SDK, 1%": 0.01}.get(mode)
    provider = None if ratio is None else _sdk(ratio)
    app = _app(*urls, MODES[mode])
    broker = redis.Redis.from_url(urls[1])
    dispatcher = Dispatcher(app, periodiq(app).store, "bench")
    began = time.process_time()
    while True:
        if not dispatcher.dispatch().claimed:
            if broker.llen("celery") >= due:
                break
            time.sleep(0.001)
    if provider is not None:
        provider.force_flush()  # the spans' export is part of the cost
    out.put(time.process_time() - began)


def _round(folder: Path, mode: str, due: int) -> float:
    """Seconds of beat CPU per tick for one round of ``mode``."""
    with LocalRedis(folder / "schedule") as schedule, LocalRedis(folder / "broker") as broker:
        start = datetime.fromtimestamp(time.time() + 3, UTC)
        periodiq(_app(schedule.url, broker.url, {})).add_many(
            {"name": f"due-{i:06d}", "task": _TASK, "every": 3600, "start_at": start}
            for i in range(due)
        )
        time.sleep(max(start.timestamp() - time.time(), 0) + 0.05)
        out: Any = multiprocessing.Queue()
        proc = multiprocessing.Process(
            target=_beat, args=(mode, (schedule.url, broker.url), due, out)
        )
        proc.start()
        seconds = float(out.get(timeout=600))
        proc.join()
        return seconds / due


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    found: dict[str, list[float]] = {mode: [] for mode in MODES}
    for index in range(args.rounds):
        for mode in MODES:
            with tempfile.TemporaryDirectory(prefix="periodiq-tracing-") as tmp:
                found[mode].append(_round(Path(tmp) / f"{index}", mode, args.due))
    off = statistics.median(found["off"])
    print(f"beat CPU per tick, {args.due} ticks, median of {args.rounds} rounds")
    for mode, values in found.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{value * 1e6:.1f}" for value in values)
        print(f"  {mode:<13} {median * 1e6:7.1f} us/tick ({median / off:.2f}x off)  [{rounds}]")


if __name__ == "__main__":
    sys.exit(main())
