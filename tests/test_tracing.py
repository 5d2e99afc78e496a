"""Tick-level tracing (``periodiq_tracing``, the ``otel`` extra): a span per beat pass and
per claimed tick, its decision in its attributes, its context in the tick's messages, and
the guard's verdict as an event in the tick's trace; nothing at all when it is off.

The real OpenTelemetry SDK records the spans (an ``InMemorySpanExporter`` on the global
tracer provider here; a file per process in the process test). In-process tests drive
the real beat (Dispatcher) and the real guard on the injected clock of
tests/test_seed_timelines.py (task A, every minute at :30), or on the real clock with a
Redis broker (the fast path's rendered messages, and staged release); the process test
runs a real ``celery beat`` and a real ``celery worker`` with Celery's OpenTelemetry
instrumentation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.worker.plain import install
from tests.processes import cluster, wait_for
from tests.test_seed_timelines import World
from tests.test_staging import Arrivals, burst, run_beats, staging_app

TRACED = {"periodiq_tracing": True}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Spans recorded in this test. The global provider can be set once per process: a
    test that finds one (another module's) adds its exporter to it."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()  # its processor stays, exporting nothing


def ours(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [
        span
        for span in exporter.get_finished_spans()
        if span.name == name and span.instrumentation_scope.name == "celery_periodiq"
    ]


def traceparent(span: ReadableSpan) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def begin(world: World, message: int, mmss: str) -> str:
    """The worker takes queued ``message`` at ``mmss`` with all its headers (the tick's
    context too); returns the guard's verdict."""
    world.clock.set(mmss)
    headers = dict(world.queue[message].headers)
    result = world.task.apply(task_id=headers["id"], headers=headers)
    return world.history()[0] if result.state == "IGNORED" else "ran"


def verdicts(exporter: InMemorySpanExporter) -> list[tuple[str, str, str, int]]:
    """Each guard span's event: (name, outcome, reason, trace id)."""
    found = []
    for span in ours(exporter, "periodiq.guard"):
        for event in span.events:
            attributes = event.attributes or {}
            outcome, reason = attributes["periodiq.outcome"], attributes["periodiq.reason"]
            found.append((event.name, str(outcome), str(reason), span.context.trace_id))
    return found


def test_each_pass_and_claimed_tick_is_a_span_and_the_guard_verdict_is_in_the_tick_trace(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    world = World(redis_url, conf=TRACED)

    assert world.cron("00:30") == 1
    assert begin(world, 0, "00:31") == "ran"
    assert begin(world, 0, "00:32") == "duplicate"  # the same message again

    passes, ticks = ours(exporter, "periodiq.pass"), ours(exporter, "periodiq.tick")
    assert len(passes) == 1
    assert len(ticks) == 1
    tick = ticks[0]
    assert tick.parent is not None
    assert tick.parent.span_id == passes[0].context.span_id
    attributes = dict(tick.attributes or {})
    assert attributes["periodiq.entry"] == "A"
    assert attributes["periodiq.tick"] == "2026-01-01T00:00:30+00:00"
    assert attributes["periodiq.decision"] == "publish"
    message = world.queue[0].headers
    assert attributes["periodiq.task_ids"] == (message["id"],)
    assert message["traceparent"] == traceparent(tick)  # the run's context is the tick's
    trace_id = tick.context.trace_id
    assert verdicts(exporter) == [
        ("periodiq.started", "started", "", trace_id),
        ("periodiq.dropped", "duplicate", "this tick already began", trace_id),
    ]
    guard = ours(exporter, "periodiq.guard")[0]
    assert guard.parent is not None
    assert guard.parent.span_id == tick.context.span_id


def test_a_tick_folded_into_the_next_run_and_a_catch_up_run_say_so(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    world = World(redis_url, conf=TRACED)

    assert world.cron("01:01") == 0  # 00:30 claimed 31 s late: folded into 01:30
    assert world.cron("01:30") == 1  # which stands for it
    assert world.cron("02:50") == 1  # 02:30, 20 s late: a catch-up run

    decided = [
        (span.attributes or {}).get("periodiq.decision") for span in ours(exporter, "periodiq.tick")
    ]
    assert decided == ["fold", "catch-up", "catch-up"]
    folded = dict(ours(exporter, "periodiq.tick")[0].attributes or {})
    assert folded["periodiq.missed"] == 1
    assert folded["periodiq.next_tick"] == "2026-01-01T00:01:30+00:00"


def test_a_run_dropped_too_soon_says_why_in_the_tick_trace(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    world = World(redis_url, conf=TRACED, overlap="allow")

    assert world.cron("00:30") == 1
    assert world.cron("01:30") == 1
    assert begin(world, 0, "01:20") == "ran"  # the 00:30 run, late in the queue
    assert begin(world, 1, "01:31") == "dropped_too_soon"

    second = ours(exporter, "periodiq.tick")[1]
    name, outcome, reason, trace_id = verdicts(exporter)[1]
    assert (name, outcome, trace_id) == (
        "periodiq.dropped",
        "dropped_too_soon",
        second.context.trace_id,
    )
    assert reason  # begin.lua's note: when the last run began, what the floor was


def test_under_celery_instrumentation_the_publish_span_is_the_tick_span_child(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    """OpenTelemetry's Celery instrumentation in the beat: each tick goes through
    ``send_task``, whose producer span opens inside the tick span and whose context the
    message carries instead."""
    world = World(redis_url, conf=TRACED)
    instrumentor = CeleryInstrumentor()
    instrumentor.instrument()
    try:
        assert world.cron("00:30") == 1
    finally:
        instrumentor.uninstrument()

    tick = ours(exporter, "periodiq.tick")[0]
    publish = next(s for s in exporter.get_finished_spans() if s.name.startswith("apply_async/"))
    assert publish.parent is not None
    assert publish.parent.span_id == tick.context.span_id
    assert world.queue[0].headers["traceparent"] == traceparent(publish)


def test_a_plain_task_run_by_an_entry_has_its_duplicate_check_in_the_tick_trace(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    app = Celery("traced-plain", broker="memory://", set_as_current=False)
    app.conf.update(periodiq_redis_url=redis_url, **TRACED)

    @app.task(name="proj.plain", shared=False)
    def plain() -> None:
        """A task without PeriodicTask."""

    install(app)
    api = periodiq(app)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    api.add("plain-entry", "proj.plain", every=60, start_at=start)
    tick = to_ms(start + timedelta(seconds=60))
    with trace.get_tracer("tests").start_as_current_span("a tick") as parent:
        headers: dict[str, Any] = {HEADER_ENTRY: "plain-entry", HEADER_TICK: tick}
        propagate.inject(headers)
    task_id = "plain-entry-tick"

    first = plain.apply(task_id=task_id, headers=headers)
    again = plain.apply(task_id=task_id, headers=headers)

    assert (first.state, again.state) == ("SUCCESS", "IGNORED")
    trace_id = parent.get_span_context().trace_id
    assert verdicts(exporter) == [
        ("periodiq.started", "started", "", trace_id),
        ("periodiq.dropped", "duplicate", "this tick already began", trace_id),
    ]
    api.store.client.close()


def test_tracing_off_records_no_span_and_sends_no_trace_context(
    redis_url: str, exporter: InMemorySpanExporter
) -> None:
    world = World(redis_url)  # periodiq_tracing unset: off

    assert world.cron("00:30") == 1
    assert begin(world, 0, "00:31") == "ran"

    assert [span.name for span in exporter.get_finished_spans()] == []
    assert "traceparent" not in world.queue[0].headers


def test_the_tracing_setting_takes_true_or_false_only(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match="periodiq_tracing='yes' is invalid"):
        World(redis_url, conf={"periodiq_tracing": "yes"})


def _arrived(arrivals: Arrivals) -> dict[str, str]:
    """Task id -> the traceparent of each message popped from the broker."""
    return {m["headers"]["id"]: m["headers"].get("traceparent", "") for _, m in arrivals.got}


def _contexts(spans: Sequence[ReadableSpan]) -> dict[str, str]:
    """Task id -> the traceparent of the tick span that sent it."""
    return {
        task_id: traceparent(span)
        for span in spans
        for task_id in (span.attributes or {}).get("periodiq.task_ids", ())  # type: ignore[union-attr]
    }


@pytest.mark.parametrize("staged", [False, True], ids=["sent", "staged"])
def test_each_message_put_in_a_redis_broker_carries_its_own_tick_span(
    redis_url: str, broker_url: str, exporter: InMemorySpanExporter, staged: bool
) -> None:
    """The fast path renders a kind of message from a template; staged release renders it
    ahead of its instant: either way each message has its own tick span's context."""
    settings = {} if staged else {"periodiq_stage_horizon": 0}
    app, api = staging_app(redis_url, broker_url, **TRACED, **settings)
    start = burst(api, 30, 3)
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: len(arrivals.got) >= 30, 15)
    arrivals.stop()

    assert (beat._stager.staged_count == 30) is staged
    ticks = ours(exporter, "periodiq.tick")
    arrived = _arrived(arrivals)
    assert len(arrived) == 30
    assert arrived == _contexts(ticks)
    assert len(set(arrived.values())) == 30
    assert {(span.attributes or {}).get("periodiq.staged") for span in ticks} == {staged}
    assert all(span.start_time < start.timestamp() * 1e9 for span in ticks) is staged


def test_a_redis_broker_untraced_gets_no_trace_context(
    redis_url: str, broker_url: str, exporter: InMemorySpanExporter
) -> None:
    app, api = staging_app(redis_url, broker_url, periodiq_stage_horizon=0)
    burst(api, 5, 2)
    arrivals = Arrivals(broker_url)
    run_beats([Dispatcher(app, api.store, "beat-a")], lambda: len(arrivals.got) >= 5, 15)
    arrivals.stop()

    assert set(_arrived(arrivals).values()) == {""}
    assert exporter.get_finished_spans() == ()


def _spans(folder: Path) -> list[dict[str, Any]]:
    """The spans every process wrote (tests/apps/tick_traced_app.py), one JSON object a line."""
    found = []
    for path in folder.glob("*.jsonl"):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found


def _trace_of(folder: Path, task_id: str) -> dict[str, dict[str, Any]] | None:
    """The spans of the run ``task_id`` by kind (its tick's, the pass's, the guard's, the
    run's) once every process wrote them (a run span ends after the run); None until then."""
    spans = _spans(folder)
    ticks = [s for s in spans if task_id in s["attributes"].get("periodiq.task_ids", [])]
    if not ticks:
        return None
    found = {"tick": ticks[0]}
    for span in spans:
        if span["context"]["span_id"] == ticks[0]["parent_id"]:
            found["pass"] = span
        elif span["context"]["trace_id"] != ticks[0]["context"]["trace_id"]:
            continue
        elif span["name"] == "periodiq.guard":
            found["guard"] = span
        elif span["name"].startswith("run/"):
            found["run"] = span
    return found if len(found) == 4 else None


@pytest.mark.slow
def test_a_real_beat_and_worker_put_the_tick_publish_and_run_in_one_trace(
    tmp_path: Path, redis_url: str, broker_url: str, redis_client: redis.Redis
) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    with cluster(
        tmp_path, redis_url, broker_url, "tick_traced_app", TEST_SPANS=str(folder)
    ) as running:
        api = running.api()
        api.add("every-second", "traced", every=1)
        running.worker()
        running.beat()
        wait_for(lambda: len(running.runs()) >= 3, 60, "three runs")
        ran = running.runs()[-1]["task_id"]
        found = wait_for(lambda: _trace_of(folder, ran), 10, "the run's spans")

    tick, guard, run = found["tick"], found["guard"], found["run"]
    assert found["pass"]["name"] == "periodiq.pass"  # the tick's parent
    # on time, or late on a loaded machine (the in-process tests tell them apart)
    assert tick["attributes"]["periodiq.decision"] in ("publish", "catch-up")
    assert tick["attributes"]["periodiq.entry"] == "every-second"
    assert [event["name"] for event in guard["events"]] == ["periodiq.started"]
    # Celery's instrumentation: its run span is the tick span's child, the guard's parent
    assert run["parent_id"] == tick["context"]["span_id"]
    assert guard["parent_id"] == run["context"]["span_id"]
    assert [event["name"] for event in run["events"]] == ["periodiq.started"]
