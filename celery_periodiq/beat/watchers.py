"""Whether a tool watches what the beat publishes, and the scope a watched tick goes out in.

The Publisher (publish.py) builds a task's message once through ``send_task`` and
reuses it for later ticks; staging (staging.py) renders messages ahead of their
instant. Both are right only if nothing else puts per-publish values in a message.
Tracing tools do: Sentry wraps ``Celery.send_task`` and ``kombu.Producer.publish``
(the enqueue time, ``sentry-trace``, ``baggage``), OpenTelemetry and Datadog
receive the publish signals (a producer span, its context in the headers). When one
of them is there, each tick goes through the real ``send_task`` when it is sent, as
under Celery's own beat, and Sentry sees each tick in a scope of its own, named as
its hook of Celery's beat names it, so that each tick starts its own trace.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from celery import signals
from kombu import Producer

__all__ = ["tick_scope", "watched"]

_SIGNALS = (signals.before_task_publish, signals.after_task_publish, signals.task_sent)


def watched(app: Any) -> bool:
    """Whether something watches ``app``'s publishes: a receiver of a publish signal, or
    ``app.send_task`` or kombu's ``Producer.publish`` replaced or wrapped (Sentry)."""
    if any(signal.receivers for signal in _SIGNALS):
        return True
    send_task = getattr(app.send_task, "__func__", None)
    return not (
        _original(send_task, "celery.app.base", "Celery.send_task")
        and _original(Producer.publish, "kombu.messaging", "Producer.publish")
    )


def _original(function: Any, module: str, name: str) -> bool:
    """Whether ``function`` is the one ``module`` defines as ``name``, unwrapped (a wrapper
    made with ``functools.wraps`` or wrapt takes its name but has ``__wrapped__``)."""
    return (
        getattr(function, "__module__", None) == module
        and getattr(function, "__qualname__", None) == name
        and not hasattr(function, "__wrapped__")
    )


def tick_scope() -> contextlib.AbstractContextManager[None]:
    """The scope one tick is published in: with Sentry's Celery integration on, a new
    isolation scope with a new trace, named ``celery-beat`` as Sentry's hook of Celery's
    ``Scheduler.apply_entry`` names it (which periodiq's beat never calls); so Sentry
    adds a fresh ``sentry-trace`` and ``baggage`` to each tick, as under Celery's beat."""
    sentry = sys.modules.get("sentry_sdk")  # never imported here: only if the app did
    if sentry is None or sentry.get_client().get_integration("celery") is None:
        return contextlib.nullcontext()
    return _sentry_tick(sentry)


@contextlib.contextmanager
def _sentry_tick(sentry: Any) -> Iterator[None]:
    with sentry.isolation_scope() as scope:
        scope.set_new_propagation_context()
        scope._name = "celery-beat"  # what Sentry's send_task wrapper reads
        yield
