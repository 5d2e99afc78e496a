"""``periodiq_app`` (the same app, tasks and settings) with a tracing tool's real Celery
integration on, in the beat and in the worker alike.

TEST_TRACING=sentry: sentry-sdk's ``CeleryIntegration``, every transaction sampled, its
envelopes sent to TEST_SENTRY_DSN (the test's sink). TEST_TRACING=otel: OpenTelemetry's
``CeleryInstrumentor`` with an in-memory span exporter; each finished span is also
copied, as JSON, to the Redis list "spans" (where "runs" goes) for the test to read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from periodiq_app import _results, app

__all__ = ["app"]

if os.environ["TEST_TRACING"] == "sentry":
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration

    sentry_sdk.init(
        dsn=os.environ["TEST_SENTRY_DSN"],
        integrations=[CeleryIntegration()],
        traces_sample_rate=1.0,
    )
else:
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class _Copied(InMemorySpanExporter):
        """Keeps the spans in memory, and copies each to Redis for the test."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            for span in spans:
                context, parent = span.get_span_context(), span.parent
                assert context is not None
                copied: dict[str, Any] = {
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_id": None if parent is None else f"{parent.span_id:016x}",
                    "start": (span.start_time or 0) / 1e9,
                    "task_id": (span.attributes or {}).get("messaging.message.id"),
                }
                _results.rpush("spans", json.dumps(copied))
            return super().export(spans)

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Copied()))
    trace.set_tracer_provider(provider)
    CeleryInstrumentor().instrument()
