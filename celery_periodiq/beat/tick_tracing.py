"""Tick-level tracing (the ``otel`` extra): a span per beat pass and per claimed tick.

With ``periodiq_tracing = True`` and ``opentelemetry-api`` importable, a pass that claimed
something (or released staged messages) is a ``periodiq.pass`` span, and each tick it
decides a ``periodiq.tick`` span inside it, whose attributes say the entry, the tick and
the decision: ``publish``, ``catch-up`` (one run standing for missed ticks, or sent too
late to keep its place), ``fold`` (too late: the next run stands for it), ``missed``,
``skip-overlap``, ``skip-window``, ``deferred``, ``excluded`` (a maintenance window or
an excluded date), ``quarantined`` or ``gone``. The tick span's context goes out in each
of its messages (W3C ``traceparent``, or whatever the global propagator writes), so the
publish span of a Celery instrumentation (sent inside the tick span) and the worker's run
and guard decision (:mod:`celery_periodiq.worker.run_tracing`) are in the tick's trace.

Spans go to the global tracer provider; while none is set (the API alone), a pass looks
for one and records nothing, and no header is added. Off, a pass costs one boolean check,
a tick one more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery_periodiq._version import __version__
from celery_periodiq.beat.publish import Publisher
from celery_periodiq.config import Settings
from celery_periodiq.model.plan import Plan, from_ms
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.beat_scripts import Claim

try:
    from opentelemetry import propagate, trace
except ImportError:  # the otel extra is not installed: tracing stays off
    trace = None  # type: ignore[assignment]

__all__ = ["AVAILABLE", "TickTracing", "decision"]

AVAILABLE = trace is not None
"""Whether ``opentelemetry-api`` is importable."""
TRACER = "celery_periodiq"
"""The instrumentation scope of every span periodiq records."""


def decision(plan: Plan) -> str:
    """What the beat decided for one claimed tick, in a word (the ``periodiq.decision``)."""
    if plan.folded is not None:
        return "fold"
    if plan.publish:
        late = any(tick.catchup or tick.missed > 1 for tick in plan.publish)
        return "catch-up" if late or len(plan.publish) > 1 else "publish"
    if plan.skipped_overlap:
        return "skip-overlap"
    if plan.held:  # a maintenance window or an excluded date: skip-window, deferred, ...
        return plan.held[0].reason.replace("skipped_", "skip-")
    return "missed" if plan.missed_count else "none"


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat()


def _attributes(
    claim: Claim, staged: bool, settlement: Settlement, decided: dict[str, Any] | None
) -> dict[str, Any]:
    """A tick span's attributes: the claim's, and what was decided (``planned``)."""
    attributes: dict[str, Any] = {
        "periodiq.entry": claim.name,
        "periodiq.tick": _iso(claim.nominal_ms),
        "periodiq.due": _iso(claim.due_ms),
        "periodiq.claimed_at": _iso(claim.claimed_ms),
        "periodiq.staged": staged,
    }
    if claim.taken:
        attributes["periodiq.taken_over"] = True
    if settlement.quarantine is not None:
        attributes["periodiq.decision"] = "quarantined"
        attributes["periodiq.reason"] = settlement.quarantine
    elif decided is None:  # deleted, or its state rebuilt with no tick to run
        attributes["periodiq.decision"] = "gone" if claim.definition is None else "none"
    else:
        attributes.update(decided)
    if settlement.next_ms is not None:
        attributes["periodiq.next_tick"] = _iso(settlement.next_ms)
    return attributes


class TickTracing:
    """One beat's spans: ``on`` says whether it records any."""

    def __init__(self, settings: Settings, publisher: Publisher) -> None:
        self.enabled = bool(settings.tracing) and AVAILABLE
        self.on = self.enabled
        """Whether this pass records spans: enabled, and a tracer provider set (checked
        at each pass: without one, the API records nothing anyway)."""
        self._publisher = publisher
        self._tracer: Any = trace.get_tracer(TRACER, __version__) if self.enabled else None
        self._decided: dict[str, Any] | None = None

    def beat_pass(
        self, beat_id: str, claimed: int, started_ns: int, publish: Callable[[], bool]
    ) -> bool:
        """Run ``publish()`` (the pass's publishing) inside the pass's span, from
        ``started_ns`` (``time.time_ns()`` as the pass began, before its claims); off, just
        run it. Returns what ``publish()`` does: whether every claim was published."""
        if not self.enabled:
            return publish()
        self.on = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        if not self.on:
            return publish()
        attributes = {"periodiq.beat": beat_id, "periodiq.claimed": claimed}
        with self._tracer.start_as_current_span(
            "periodiq.pass", start_time=started_ns, attributes=attributes
        ) as span:
            complete = publish()
            span.set_attribute("periodiq.complete", complete)
            return complete

    def settle(self, claim: Claim, staged: bool, decide: Callable[[], Settlement]) -> Settlement:
        """Run ``decide()`` (the settling of ``claim``) inside the claim's tick span, with
        the span's context added to the headers of each message sent meanwhile."""
        with self._tracer.start_as_current_span("periodiq.tick") as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)  # sampled out too: the worker follows the decision
            self._publisher.headers, self._decided = carrier, None
            try:
                settlement = decide()
            finally:
                self._publisher.headers = {}
            if span.is_recording():  # not a tick sampled out: its attributes
                span.set_attributes(_attributes(claim, staged, settlement, self._decided))
            if settlement.quarantine is not None:
                span.set_status(trace.Status(trace.StatusCode.ERROR, settlement.quarantine))
            return settlement

    def planned(self, plan: Plan) -> None:
        """Note what was decided for the tick being settled (settle.py calls this)."""
        decided: dict[str, Any] = {
            "periodiq.decision": decision(plan),
            "periodiq.published": len(plan.publish),
        }
        if plan.publish:
            decided["periodiq.task_ids"] = [tick.task_id for tick in plan.publish]
            decided["periodiq.stands_for"] = sum(tick.missed for tick in plan.publish)
        if plan.missed_count:
            decided["periodiq.missed"] = plan.missed_count
        if plan.skipped_overlap:
            decided["periodiq.skipped_overlap"] = len(plan.skipped_overlap)
        if plan.folded is not None:
            decided["periodiq.folded"] = plan.folded.isoformat()
        for held in plan.held:
            decided[f"periodiq.{held.reason}"] = held.count
        self._decided = decided
