"""``PeriodicTask``: the base class that guards every run on the worker.

Before the body, one Lua call (begin.lua) drops a duplicate tick, drops a run
that starts too soon after the last one began (tolerance), and skips a run
while an earlier one is unfinished (overlap "skip"); otherwise it records the
start; a run it drops ends revoked for Celery's monitors and result backend
(:mod:`~celery_periodiq.worker.dropped`). After the body, one Lua call
(finish.lua) records the outcome. The run's timebox is its soft time limit;
``self.periodiq`` tells the body its deadline and keeps its checkpoint.
"""

from __future__ import annotations

import functools
import logging
import math
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

import redis
from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded
from celery.signals import task_revoked

from celery_periodiq.errors import ConfigurationError, PeriodiqError, ReplicasBehindError
from celery_periodiq.model import policy
from celery_periodiq.model.plan import from_ms, tick_text
from celery_periodiq.protocol.headers import (
    HEADER_BACKFILL,
    HEADER_CATCHUP,
    HEADER_ENTRY,
    HEADER_EXPIRES,
    HEADER_FLOOR,
    HEADER_GROUP,
    HEADER_INTERVAL,
    HEADER_MANUAL,
    HEADER_MIN_GAP,
    HEADER_MISSED,
    HEADER_OVERLAP,
    HEADER_TICK,
    HEADER_TTL,
)
from celery_periodiq.protocol.records import Admission, RunEnd, RunStart
from celery_periodiq.runtime import runtime_of
from celery_periodiq.store.checkpoint import Checkpoint
from celery_periodiq.store.store import Store
from celery_periodiq.worker import checkins
from celery_periodiq.worker.begin import begin_in_line, refused_end
from celery_periodiq.worker.dropped import dropped
from celery_periodiq.worker.run_tracing import traced_begin

__all__ = ["PeriodicTask", "RunContext"]

logger = logging.getLogger("celery_periodiq.task")

_HOST = socket.gethostname()


@dataclass
class RunContext:
    """What a guarded run knows about itself: ``self.periodiq`` inside the task."""

    entry: str
    """The entry this run belongs to."""
    scheduled_for: datetime | None
    """The tick's nominal instant (UTC); None for a manual run."""
    missed: int
    """How many ticks this run stands for (catch-up "last" folds missed ticks into one run)."""
    interval: float | None
    """Seconds from this tick to the entry's next one; None for a manual run."""
    deadline: datetime | None
    """When the timebox ends (the soft time limit), on the Redis clock; None without one."""
    checkpoint: Checkpoint
    """Saved progress, per entry: ``load()``, ``save(value)``, ``clear()``."""
    manual: bool = False
    """True for ``trigger()`` and plain ``.delay()`` calls."""
    _ends_at: float = field(default=math.inf, repr=False)

    def time_left(self) -> float:
        """Seconds until the timebox ends (``inf`` without one); check it often and stop cleanly."""
        return (
            max(self._ends_at - time.monotonic(), 0.0) if math.isfinite(self._ends_at) else math.inf
        )


def store_of(app: Any) -> Store:
    """The schedule's Store of ``app``, as its worker uses it (one per app, shared with
    the runtime API: :func:`~celery_periodiq.runtime.runtime_of`)."""
    return runtime_of(app).store


def request_header(request: Any, name: str) -> Any:
    value = getattr(request, name, None)
    if value is None and isinstance(getattr(request, "headers", None), dict):
        value = request.headers.get(name)
    return value


class PeriodicTask(Task):  # type: ignore[type-arg]
    """Base class of periodic tasks; ``@periodic`` applies it.

    Subclass it, or use it as ``base=`` of your own tasks: runs published by the
    periodiq beat (or ``trigger()``) are guarded; a plain ``.delay()`` of a task
    declared with ``@periodic`` is guarded as a manual run (no tolerance drop,
    overlap check kept); other calls run unguarded.
    """

    Request = "celery_periodiq.worker.dropped:Request"
    """Celery's worker request, but a run the guard drops ends revoked, with the reason
    (:mod:`~celery_periodiq.worker.dropped`); a custom one of your own gets that too."""

    periodiq_entry: ClassVar[str | None] = None
    """Entry name used for manual calls (set by ``@periodic``)."""
    periodiq_overlap: ClassVar[str | None] = None
    """Overlap policy used for manual calls; None: the app's ``periodiq_default_overlap``."""
    periodiq_clock: ClassVar[Callable[[], int] | None] = None
    """Milliseconds since the epoch to use instead of the Redis clock (tests only)."""

    @property
    def periodiq(self) -> RunContext:
        """The current run's :class:`RunContext`.

        Raises:
            PeriodiqError: called outside a guarded run.
        """
        context = vars(self.request).get("periodiq_run")
        if context is None:
            raise PeriodiqError(
                f"task {self.name!r}: self.periodiq is only set inside a guarded run"
            )
        return context  # type: ignore[no-any-return]

    def retry(self, *args: Any, **options: Any) -> Any:
        """Celery's ``retry``; the retry does not inherit the tick's message expiry.

        A retry belongs to a run that already began, whose running marker keeps
        other runs off; expiring it at the next tick would lose the run.
        """
        options.setdefault("expires", None)
        return super().retry(*args, **options)

    def _periodiq_now(self) -> int | None:
        clock = type(self).periodiq_clock
        return None if clock is None else clock()

    def _periodiq_store(self) -> Store:
        return store_of(self.app)

    def _run_start(self, store: Store) -> tuple[str, RunStart, RunContext] | None:
        request = self.request
        published_for = request_header(request, HEADER_ENTRY)
        entry = published_for or self.periodiq_entry
        if not entry:
            return None
        tick = request_header(request, HEADER_TICK)
        manual = tick is None or bool(request_header(request, HEADER_MANUAL))
        interval = request_header(request, HEADER_INTERVAL)
        hard, soft = (request.timelimit or (None, None)) if request.timelimit else (None, None)
        ttl = request_header(request, HEADER_TTL) or 1000 * policy.marker_ttl(
            hard or self.time_limit or self.app.conf.task_time_limit, None
        )
        overlap = (
            request_header(request, HEADER_OVERLAP)
            or self.periodiq_overlap
            or store.settings.default_overlap
        )
        group, limit = group_limit(request, store)
        start = RunStart(
            task_id=str(request.id),
            tick_ms=None if manual else int(tick),
            min_gap_ms=0 if manual else int(request_header(request, HEADER_MIN_GAP) or 0),
            overlap=overlap,
            ttl_ms=int(ttl),
            retries=int(request.retries or 0),
            host=_HOST,
            history_length=store.settings.history_length,
            published=bool(published_for),
            expires_ms=None if manual else _int_or_none(request_header(request, HEADER_EXPIRES)),
            attempt=uuid.uuid4().hex[:8],
            backfill=not manual and bool(request_header(request, HEADER_BACKFILL)),
            catchup=not manual and bool(request_header(request, HEADER_CATCHUP)),
            floor_ms=0 if manual else int(request_header(request, HEADER_FLOOR) or 0),
            group=group,
            group_limit=limit,
            group_wait=overlap == "buffer_one",
        )
        context = RunContext(
            entry=entry,
            scheduled_for=None if manual else from_ms(int(tick)),
            missed=int(request_header(request, HEADER_MISSED) or 1),
            interval=None if interval is None else float(interval),
            deadline=None,
            checkpoint=Checkpoint(store, entry),
            manual=manual,
        )
        soft = soft or self.soft_time_limit
        if soft:
            context._ends_at = time.monotonic() + float(soft)
        return entry, start, context

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        store = self._periodiq_store()
        prepared = self._run_start(store)
        if prepared is None:
            return super().__call__(*args, **kwargs)
        entry, start, context = prepared
        try:
            admission = self._begin(store, entry, start, context.time_left())
        except ConfigurationError as error:
            logger.error("periodiq: entry %r run %s not started: %s", entry, start.task_id, error)
            raise dropped("not started", str(error)) from error
        except ReplicasBehindError as error:
            logger.error("periodiq: entry %r run %s not started: %s", entry, start.task_id, error)
            self._finish(store, entry, refused_end(start, error))
            raise dropped("not started", str(error)) from error
        except redis.RedisError as error:
            logger.error(
                "periodiq: entry %r run %s not started, Redis failed: %s",
                entry,
                start.task_id,
                error,
            )
            raise dropped("not started", f"Redis failed: {error}") from error
        if not admission.runs:
            logger.warning(
                "periodiq: entry %r tick %s run %s %s%s",
                entry,
                "manual" if start.tick_ms is None else tick_text(start.tick_ms),
                start.task_id,
                admission.outcome,
                f": {admission.note}" if admission.note else "",
            )
            checkins.report(store, entry, start.task_id, admission.outcome)
            raise dropped(admission.outcome, admission.note)
        if not admission.guarded:  # a declared task whose entry is not stored (yet)
            return super().__call__(*args, **kwargs)
        if math.isfinite(context._ends_at):
            context.deadline = from_ms(admission.now_ms) + timedelta(
                seconds=context._ends_at - time.monotonic()
            )
        vars(self.request)["periodiq_run"] = context
        began = time.monotonic()
        checkins.report(store, entry, start.task_id, admission.outcome)
        outcome, problem, final, retry_ttl = "succeeded", "", True, 0
        try:
            return super().__call__(*args, **kwargs)
        except Retry as retry:
            outcome, final = "retrying", False
            retry_ttl = start.ttl_ms + int(_countdown(retry) * 1000)
            raise
        except SoftTimeLimitExceeded:
            outcome = "timeboxed"
            raise
        except Exception as exc:
            outcome, problem = "failed", f"{type(exc).__name__}: {exc}"
            raise
        except BaseException as exc:  # worker shutdown, Terminated: the run did not finish
            outcome, problem = "revoked", type(exc).__name__
            raise
        finally:
            if outcome == "succeeded" and context.time_left() == 0.0:
                outcome = "timeboxed"  # it ran to its deadline and stopped there
            end = RunEnd(
                task_id=start.task_id,
                tick_ms=start.tick_ms,
                outcome=outcome,
                error=problem[:500],
                duration_ms=int((time.monotonic() - began) * 1000),
                host=_HOST,
                history_length=start.history_length,
                final=final,
                retry_ttl_ms=retry_ttl,
                attempt=start.attempt,
                group=start.group,
            )
            self._finish(store, entry, end)
            checkins.report(store, entry, end.task_id, outcome, end.duration_ms / 1000)
            vars(self.request)["periodiq_run"] = None

    def _begin(self, store: Store, entry: str, start: RunStart, patience: float) -> Admission:
        """begin.lua, sent again while Redis fails over or its replicas are behind, or, for
        up to ``patience`` seconds, while the run waits for a slot of its group
        (:func:`~celery_periodiq.worker.begin.begin_in_line`)."""
        clock = self._periodiq_now
        begin = functools.partial(begin_in_line, store, entry, start, logger, clock, patience)
        return traced_begin(self.request, store, entry, start, begin)  # its span (tracing on)

    def _finish(self, store: Store, entry: str, end: RunEnd) -> None:
        try:
            store.scripts.finish(entry, end, self._periodiq_now())
        except redis.RedisError as failure:
            logger.error(
                "periodiq: entry %r run %s: could not record %s: %s",
                entry,
                end.task_id,
                end.outcome,
                failure,
            )


def group_limit(request: Any, store: Store) -> tuple[str, int]:
    """The run's group and its limit (``periodiq_group_limits``), or ("", 0) for none."""
    group = request_header(request, HEADER_GROUP)
    limit = store.settings.group_limits.get(group, 0) if isinstance(group, str) else 0
    return (group, limit) if limit and isinstance(group, str) else ("", 0)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _countdown(retry: Retry) -> float:
    when = retry.when
    if isinstance(when, datetime):
        return max((when - datetime.now(when.tzinfo)).total_seconds(), 0.0)
    return float(when or 0)


@task_revoked.connect
def _record_revoked(
    sender: Any = None,
    request: Any = None,
    terminated: bool = False,
    expired: bool = False,
    **_: Any,
) -> None:
    """A guarded run revoked by the worker, or a message expired in the queue, is recorded;
    a copy of a tick whose run began (the same task id) changes nothing of that run."""
    if not isinstance(sender, PeriodicTask) or request is None:
        return
    entry = request_header(request, HEADER_ENTRY) or sender.periodiq_entry
    if not entry:
        return
    tick = request_header(request, HEADER_TICK)
    store = sender._periodiq_store()
    end = RunEnd(
        task_id=str(request.id),
        tick_ms=None if tick is None else int(tick),
        outcome="expired" if expired else "revoked",
        error="terminated" if terminated else "",
        duration_ms=0,
        host=_HOST,
        history_length=store.settings.history_length,
        ran=bool(terminated),
        group=group_limit(request, store)[0],
    )
    recorded = ""
    try:
        recorded = store.scripts.finish(entry, end)
    except redis.RedisError as failure:
        logger.error(
            "periodiq: entry %r run %s: could not record %s: %s",
            entry,
            request.id,
            end.outcome,
            failure,
        )
    # a copy of a tick whose run began ("duplicate") changed nothing of it: no check-in
    checkins.report(store, entry, end.task_id, recorded or end.outcome)
