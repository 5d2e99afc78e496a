"""The guard's decision in the tick's trace (the ``otel`` extra; see ``beat/tick_tracing``).

With ``periodiq_tracing = True`` and ``opentelemetry-api`` importable, each guarded begin
(both guards: :class:`~celery_periodiq.worker.task.PeriodicTask` and the plain tasks'
duplicate check) is a ``periodiq.guard`` span whose event says what the guard decided:
``periodiq.started`` or ``periodiq.dropped`` with the outcome (``dropped_too_soon``,
``duplicate``, ``skipped_overlap``, ``dropped_group_limit``, ``expired``, ``deleted``,
``damaged``, ``not started``) and the reason. Its parent is the span current in the
worker (the consumer span of OpenTelemetry's Celery instrumentation, which has the event
too), else the context the message carries (the tick span's ``traceparent``): so "why
did my 09:00 run not run" is one trace from the beat's claim to the guard's verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery_periodiq.protocol.records import Admission, RunStart
from celery_periodiq.store.store import Store

try:
    from opentelemetry import propagate, trace
    from opentelemetry.propagators.textmap import Getter
except ImportError:  # the otel extra is not installed: tracing stays off
    trace = None  # type: ignore[assignment]
    Getter = object  # type: ignore[assignment,misc]

__all__ = ["traced_begin"]

_TRACER = "celery_periodiq"


class _RequestGetter(Getter):  # type: ignore[type-arg]
    """Reads a propagator's fields from a Celery request (its message headers)."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        value = getattr(carrier, key, None)
        if value is None and isinstance(getattr(carrier, "headers", None), dict):
            value = carrier.headers.get(key)
        return None if value is None else [str(value)]

    def keys(self, carrier: Any) -> list[str]:
        headers = getattr(carrier, "headers", None)
        return list(headers) if isinstance(headers, dict) else []


def traced_begin(
    request: Any, store: Store, entry: str, start: RunStart, begin: Callable[[], Admission]
) -> Admission:
    """``begin()`` (the run's begin.lua), in a span of the tick's trace when tracing is on;
    its exception, if it raises, is the drop's reason."""
    if trace is None or not store.settings.tracing:
        return begin()
    current = trace.get_current_span()
    parent = (
        None
        if current.get_span_context().is_valid
        else propagate.extract(request, getter=_RequestGetter())
    )
    attributes: dict[str, Any] = {"periodiq.entry": entry, "periodiq.task_id": start.task_id}
    if start.tick_ms is not None:
        attributes["periodiq.tick_ms"] = start.tick_ms
    tracer = trace.get_tracer(_TRACER)
    with tracer.start_as_current_span(
        "periodiq.guard", context=parent, attributes=attributes, record_exception=False
    ) as span:
        try:
            admission = begin()
        except Exception as error:
            _decided(span, current, "periodiq.dropped", "not started", f"{error}")
            raise
        if admission.runs:
            _decided(span, current, "periodiq.started", admission.outcome, admission.note)
        else:
            _decided(span, current, "periodiq.dropped", admission.outcome, admission.note)
        return admission


def _decided(span: Any, run: Any, event: str, outcome: str, reason: str) -> None:
    attributes = {"periodiq.outcome": outcome, "periodiq.reason": reason}
    span.set_attribute("periodiq.outcome", outcome)
    span.add_event(event, attributes)
    if run.is_recording():  # the run's own span (a Celery instrumentation's) says it too
        run.add_event(event, attributes)
