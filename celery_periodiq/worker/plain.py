"""The duplicate check for plain tasks that periodiq entries run.

A ``beat_schedule`` entry (or one added at run time) may name a plain task, one
without :class:`~celery_periodiq.PeriodicTask`. A tick's message can reach the
broker twice with one task id: a beat that died or was stopped after sending it and
before settling it is taken over one lease later, and the beat that takes over sends
it again. A guarded task drops the copy; a plain one would run it twice.

So on every worker of an app that uses periodiq, each task without ``PeriodicTask``
gets two of Celery's own task handlers wrapped around its own (as Celery's
``task_annotations`` ``"@name"`` form does): ``before_start`` asks begin.lua whether
the tick already began, and a run refused is ``Ignore``-d (and ends revoked:
:mod:`~celery_periodiq.worker.dropped`); ``after_return`` records
how the run ended, so a plain entry has a history, a last run and alerts too. A manual
run of the entry (``trigger()``: ``celery periodiq run``, the dashboard's and the
admin's Run now) has no tick to check, and is recorded and checked in the same way.
Nothing else of the guard applies: no too-soon drop, no overlap check, no running
marker, no timebox unless the entry sets one (:func:`is_plain` tells the beat). A
message without a periodiq entry (every other call of the task) passes untouched, at
the cost of one header read.

Handlers rather than ``__call__``: Celery calls a task's ``run`` directly unless
``__call__`` is overridden, and these keep that. It looks for them when it builds a
task's tracer, so they are installed on ``worker_init``, before it does
(:mod:`~celery_periodiq.worker.startup`), for apps whose ``beat_scheduler`` is
periodiq's, that set a ``periodiq_*`` setting or that have a ``PeriodicTask``. The begin
waits as a guarded run's does (:func:`~celery_periodiq.worker.begin.begin_run`): through
a failover, and with ``periodiq_replica_acks`` until a replica has its start (a run none
has by its tick's expiry is refused, never run unchecked). If the schedule's Redis still
cannot be asked, a plain task runs (as it would without periodiq) and a warning says so.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery, Task
from celery import states as celery_states
from celery.exceptions import SoftTimeLimitExceeded

from celery_periodiq.errors import ConfigurationError, ReplicasBehindError
from celery_periodiq.model import policy
from celery_periodiq.model.plan import tick_text
from celery_periodiq.protocol.headers import (
    HEADER_BACKFILL,
    HEADER_ENTRY,
    HEADER_EXPIRES,
    HEADER_FLOOR,
    HEADER_MANUAL,
    HEADER_TICK,
    HEADER_TTL,
)
from celery_periodiq.protocol.records import RunEnd, RunStart
from celery_periodiq.worker import checkins
from celery_periodiq.worker.begin import begin_run, refused_end
from celery_periodiq.worker.dropped import dropped
from celery_periodiq.worker.run_tracing import traced_begin
from celery_periodiq.worker.task import _HOST, PeriodicTask, request_header, store_of
from celery_periodiq.worker.task_modules import import_task_modules

__all__ = ["install", "is_plain", "uses_periodiq"]

logger = logging.getLogger("celery_periodiq.plain")

_MARK = "_periodiq_plain"
"""Set on a task class whose handlers are wrapped."""
_STARTED = "periodiq_plain_run"
"""Request attribute of a plain run that began: (entry, start, when)."""


def is_plain(app: Celery, name: str) -> bool | None:
    """Whether ``app``'s task ``name`` is plain (not a ``PeriodicTask``): its runs keep the
    task's own time limits unless their entry sets a timebox. None when ``app`` does not
    know the task here (a task only the workers' code defines), once its task modules
    are imported as a worker imports them."""
    import_task_modules(app)
    try:
        task = app.tasks.get(name)
    except Exception:  # an app that cannot finalize here: nothing to tell by
        return None
    return None if task is None else not isinstance(task, PeriodicTask)


def uses_periodiq(app: Celery) -> bool:
    """Whether ``app`` runs periodiq: its beat scheduler, a ``periodiq_*`` setting, or a
    ``PeriodicTask`` among its tasks."""
    if "periodiq" in str(app.conf.get("beat_scheduler") or ""):
        return True
    if any(str(key).startswith("periodiq_") for key in app.conf):
        return True
    return any(isinstance(task, PeriodicTask) for task in app.tasks.values())


def install(app: Celery) -> int:
    """Give every task of ``app`` without ``PeriodicTask`` the duplicate check; returns
    how many tasks got it (a task that has it already is left as it is)."""
    count = 0
    for task in list(app.tasks.values()):
        cls = type(task)
        if isinstance(task, PeriodicTask) or getattr(cls, _MARK, False):
            continue
        cls.add_around("before_start", _wrap_before_start)
        cls.add_around("after_return", _wrap_after_return)
        setattr(cls, _MARK, True)
        count += 1
    return count


def _wrap_before_start(original: Callable[..., Any]) -> Callable[..., Any]:
    def before_start(self: Task, task_id: str, args: Any, kwargs: Any) -> Any:  # type: ignore[type-arg]
        _begin(self, task_id)
        return original(self, task_id, args, kwargs)

    return before_start


def _wrap_after_return(original: Callable[..., Any]) -> Callable[..., Any]:
    def after_return(
        self: Task,  # type: ignore[type-arg]
        status: str,
        retval: Any,
        task_id: str,
        args: Any,
        kwargs: Any,
        einfo: Any,
    ) -> Any:
        try:
            return original(self, status, retval, task_id, args, kwargs, einfo)
        finally:
            _finish(self, status, retval)

    return after_return


def _begin(task: Task, task_id: str) -> None:  # type: ignore[type-arg]
    """The duplicate check of a plain run of a tick, and the start of a manual run (the
    entry's ``trigger()``), both recorded; raises ``Ignore`` to refuse the run."""
    request = task.request
    entry = request_header(request, HEADER_ENTRY)
    if not entry:
        return
    tick = request_header(request, HEADER_TICK)
    manual = bool(request_header(request, HEADER_MANUAL))
    if tick is None and not manual:
        return
    store = store_of(task.app)
    expires = None if manual else request_header(request, HEADER_EXPIRES)
    which = "manual" if manual else tick_text(int(tick))
    start = RunStart(
        task_id=str(task_id),
        tick_ms=None if manual else int(tick),
        min_gap_ms=0,
        overlap="allow",
        ttl_ms=int(request_header(request, HEADER_TTL) or policy.marker_ttl(None, None) * 1000),
        retries=int(request.retries or 0),
        host=_HOST,
        history_length=store.settings.history_length,
        expires_ms=None if expires is None else int(expires),
        attempt=uuid.uuid4().hex[:8],
        backfill=not manual and bool(request_header(request, HEADER_BACKFILL)),
        plain=True,
        floor_ms=int(request_header(request, HEADER_FLOOR) or 0),
    )
    try:
        begin = functools.partial(begin_run, store, entry, start, logger)
        admission = traced_begin(request, store, entry, start, begin)  # its span (tracing on)
    except ReplicasBehindError as error:  # no replica has its start: it must not run
        logger.error("periodiq: entry %r run %s not started: %s", entry, task_id, error)
        _record(task, entry, refused_end(start, error))
        raise dropped("not started", str(error)) from error
    except (redis.RedisError, ConfigurationError) as error:
        logger.warning(
            "periodiq: entry %r tick %s run %s starts without its duplicate check: the "
            "schedule's Redis failed: %s",
            entry,
            which,
            task_id,
            error,
        )
        return
    if not admission.runs:
        logger.warning(
            "periodiq: entry %r tick %s run %s %s%s",
            entry,
            which,
            task_id,
            admission.outcome,
            f": {admission.note}" if admission.note else "",
        )
        checkins.report(store, entry, start.task_id, admission.outcome, plain=True)
        raise dropped(admission.outcome, admission.note)
    if admission.guarded:
        setattr(request, _STARTED, (entry, start, time.monotonic()))
        checkins.report(store, entry, start.task_id, admission.outcome, plain=True)


def _finish(task: Task, status: str, retval: Any) -> None:  # type: ignore[type-arg]
    """Record how a plain run that began ended."""
    request = task.request
    started = getattr(request, _STARTED, None)
    if started is None:
        return
    setattr(request, _STARTED, None)
    entry, start, began = started
    outcome, error = "succeeded", ""
    if status == celery_states.FAILURE:
        outcome = "timeboxed" if isinstance(retval, SoftTimeLimitExceeded) else "failed"
        error = f"{type(retval).__name__}: {retval}"
    elif status != celery_states.SUCCESS:
        outcome = "revoked"
    end = RunEnd(
        task_id=start.task_id,
        tick_ms=start.tick_ms,
        outcome=outcome,
        error=error[:500],
        duration_ms=int((time.monotonic() - began) * 1000),
        host=_HOST,
        history_length=start.history_length,
        attempt=start.attempt,
    )
    checkins.report(
        store_of(task.app), entry, start.task_id, outcome, end.duration_ms / 1000, plain=True
    )
    _record(task, entry, end)


def _record(task: Task, entry: str, end: RunEnd) -> None:  # type: ignore[type-arg]
    try:
        store_of(task.app).scripts.finish(entry, end)
    except redis.RedisError as failure:
        logger.error(
            "periodiq: entry %r run %s: could not record %s: %s",
            entry,
            end.task_id,
            end.outcome,
            failure,
        )
