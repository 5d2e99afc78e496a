"""Every tick the beat publishes looks to a tracing tool as a tick of Celery's own beat
does: with the real sentry-sdk Celery integration and the real OpenTelemetry Celery
instrumentation on in a real beat and worker, each tick carries its own enqueue time and
its own trace, started when the tick is sent (not when its message was first built, nor
when a burst was rendered ahead to be staged), and periodiq's beat starts cleanly with
celery-redbeat installed (Sentry's integration imports it).

The tools run only in the subprocesses (tests/apps/traced_app.py): their global hooks
(signal receivers, wrapped ``send_task``) never reach the other tests of this process.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Cluster, api_for, cluster, wait_for

pytestmark = pytest.mark.slow

TICKS = 6
"""Runs of the 1 s entry each test waits for."""
STAGED = {"TEST_STAGE_MIN": "1", "TEST_STAGE_HORIZON": "3"}
"""Staging on for a single entry: without a tool watching, its ticks would be rendered
and staged ahead of their instant."""


class Sink:
    """A Sentry DSN's ingest endpoint on loopback: keeps each envelope's items."""

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], dict[str, Any]]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                sink.items += envelope_items(body)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.dsn = f"http://public@127.0.0.1:{self.server.server_address[1]}/1"

    def transactions(self, name: str) -> list[dict[str, Any]]:
        return [
            payload
            for header, payload in list(self.items)
            if header.get("type") == "transaction" and payload.get("transaction") == name
        ]

    def errors(self) -> list[dict[str, Any]]:
        return [payload for header, payload in list(self.items) if header.get("type") == "event"]


def envelope_items(body: bytes) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (item header, JSON payload) pairs of one envelope (its first line: its header)."""
    items = []
    at = body.index(b"\n") + 1
    while at < len(body):
        end = body.find(b"\n", at)
        header = json.loads(body[at : len(body) if end < 0 else end])
        at = len(body) if end < 0 else end + 1
        length = header.get("length")
        stop = at + length if length is not None else (body.find(b"\n", at) % (len(body) + 1))
        stop = len(body) if stop < at else stop
        payload = body[at:stop]
        at = stop + 1
        if header.get("type") in ("transaction", "event"):
            items.append((header, json.loads(payload)))
    return items


@pytest.fixture
def sink() -> Iterator[Sink]:
    found = Sink()
    yield found
    found.server.shutdown()
    found.server.server_close()


def _stamp(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def run_traced(running: Cluster, name: str) -> list[dict[str, Any]]:
    """Add ``name`` (every 1 s), run a worker and a beat until it ran TICKS times; its runs."""
    api = api_for(running.redis_url, running.env["TEST_BROKER_URL"])
    api.add(name, "record", every=1)
    worker = running.worker()
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    running.beat()
    wait_for(lambda: len(running.runs_of(name)) >= TICKS, 60, f"{TICKS} runs", interval=0.2)
    return running.runs_of(name)[:TICKS]


@pytest.mark.parametrize("staging", [False, True], ids=["sent-when-due", "staging-on"])
def test_with_sentry_each_tick_has_its_own_enqueue_time_and_its_own_trace(
    tmp_path: Path, redis_url: str, broker_url: str, sink: Sink, staging: bool
) -> None:
    env = {"TEST_TRACING": "sentry", "TEST_SENTRY_DSN": sink.dsn, **(STAGED if staging else {})}
    with cluster(tmp_path, redis_url, broker_url, "traced_app", **env) as running:
        runs = run_traced(running, "sentried")
        ids = {run["task_id"]: run for run in runs}

        def seen() -> dict[str, dict[str, Any]]:
            found = {}
            for event in sink.transactions("record"):
                for span in event.get("spans", []):
                    task_id = span.get("data", {}).get("messaging.message.id")
                    if task_id in ids:
                        found[task_id] = {**event, "process": span}
            return found if len(found) == len(ids) else {}

        events = wait_for(seen, 30, "a Sentry transaction of each run")
        beat_log = running.processes[-1].output()
    for task_id, event in events.items():
        trace = event["contexts"]["trace"]
        process = event["process"]
        latency = process["data"]["messaging.message.receive.latency"] / 1000
        enqueued = _stamp(process["start_timestamp"]) - latency
        tick = ids[task_id]["tick"] / 1000
        # enqueued when its tick was sent: not the first tick's time, nor rendered ahead
        assert tick - 0.2 <= enqueued <= tick + 5, (task_id, tick, enqueued)
        # the trace the beat started for this tick (sentry-trace), continued by the worker
        assert trace.get("parent_span_id"), f"no sentry-trace from the beat: {trace}"
    traces = [event["contexts"]["trace"]["trace_id"] for event in events.values()]
    assert len(set(traces)) == TICKS, "each tick starts its own trace"
    assert "lock_key" not in beat_log, beat_log[-3000:]
    assert not [e for e in sink.errors() if "lock_key" in json.dumps(e)]


def test_with_opentelemetry_each_tick_is_a_producer_and_a_consumer_span_of_one_trace(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(
        tmp_path, redis_url, broker_url, "traced_app", TEST_TRACING="otel", **STAGED
    ) as running:
        runs = run_traced(running, "traced")

        def spans() -> dict[str, dict[str, dict[str, Any]]]:
            found: dict[str, dict[str, dict[str, Any]]] = {}
            for raw in running.client.lrange("spans", 0, -1):
                span = json.loads(raw)
                found.setdefault(span["task_id"], {})[span["kind"]] = span
            wanted = {run["task_id"]: found.get(run["task_id"], {}) for run in runs}
            return wanted if all(len(kinds) == 2 for kinds in wanted.values()) else {}

        by_task = wait_for(spans, 30, "a producer and a consumer span of each run")
    ticks = {run["task_id"]: run["tick"] / 1000 for run in runs}
    for task_id, kinds in by_task.items():
        producer, consumer = kinds["PRODUCER"], kinds["CONSUMER"]
        assert consumer["trace_id"] == producer["trace_id"]
        assert consumer["parent_id"] == producer["span_id"]
        # published when its tick was due, not rendered ahead to be staged
        assert producer["start"] >= ticks[task_id] - 0.2, (task_id, producer, ticks[task_id])
    assert len({kinds["PRODUCER"]["trace_id"] for kinds in by_task.values()}) == TICKS
