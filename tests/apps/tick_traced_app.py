"""An app with ``periodiq_tracing`` on, for tests/test_tracing.py: its beat and worker
record their spans with the real OpenTelemetry SDK, each process into a file of its own
under TEST_SPANS (one JSON span a line); the worker also runs Celery's OpenTelemetry
instrumentation (its run spans). TEST_BROKER_URL, TEST_REDIS_URL, TEST_LEASE; each run
of ``traced`` records itself in the Redis list "runs".
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from celery import Celery, signals
from opentelemetry import trace
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from celery_periodiq import PeriodicTask

app = Celery("tick_traced_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
app.conf.periodiq_claim_lease = float(os.environ.get("TEST_LEASE", "2"))
app.conf.periodiq_tracing = True
app.conf.beat_max_loop_interval = 5
app.conf.worker_prefetch_multiplier = 1

_results = redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)


class FileExporter(SpanExporter):
    """Appends each span as one JSON line to this process's file."""

    def __init__(self, folder: str) -> None:
        self.path = Path(folder) / f"{os.getpid()}.jsonl"
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
        with self.lock, self.path.open("a") as handle:
            handle.write(lines)
        return SpanExportResult.SUCCESS


_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["TEST_SPANS"])))
trace.set_tracer_provider(_provider)


@signals.worker_init.connect
def _instrument(**_: Any) -> None:
    """The worker only: in the beat, its publish signal receivers would change the path."""
    CeleryInstrumentor().instrument(tracer_provider=_provider)


@app.task(base=PeriodicTask, bind=True, name="traced")
def traced(self: Any) -> None:
    """Record the run."""
    request = self.request
    entry = getattr(request, "periodiq_entry", None)
    _results.rpush("runs", json.dumps({"entry": entry, "task_id": request.id}))
