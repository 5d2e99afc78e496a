"""A run's begin (begin.lua), sent again until Redis answers and the replicas have it.

Both guards use it: :class:`~celery_periodiq.worker.task.PeriodicTask` and the plain
tasks' duplicate check (:mod:`~celery_periodiq.worker.plain`). A begin is sent again
with the run's attempt token, so that begin.lua recognises it as this run's (whatever
began since), not as a duplicate, and writes the start again for the replicas to take:

- while Redis does not answer (a failover), up to ``FAILOVER_PATIENCE``;
- while not every replica attached to the primary (and at least
  ``periodiq_replica_acks``) has the start, until the tick's expiry or, for a run
  without one, until its running marker would end, on the Redis clock; then
  :class:`~celery_periodiq.errors.ReplicasBehindError`, and the run is not run
  (:func:`refused_end` is what it records);
- while they do not have its refusal (too soon, a duplicate, expired...), up to
  ``FAILOVER_PATIENCE``: the message is let go only once a failover cannot lose the
  record of why it did not run; then the refusal is returned as it is, and said so.
  begin.lua tells the same refusal to a begin sent again, and records it once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import redis

from celery_periodiq.errors import ReplicasBehindError
from celery_periodiq.protocol.records import Admission, RunEnd, RunStart
from celery_periodiq.store.run_scripts import RECORDED, RefusalBehindError
from celery_periodiq.store.store import Store

__all__ = ["FAILOVER_PATIENCE", "begin_in_line", "begin_run", "refused_end"]

FAILOVER_PATIENCE = 30.0
"""Seconds a run waits for Redis to answer its begin (a failover in progress) before it
is dropped: longer than a Sentinel or Cluster failover with their usual settings."""
_FAILING_OVER = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)
"""Errors of a Redis that is failing over (or restarting): the begin is sent again."""


def begin_run(
    store: Store,
    entry: str,
    start: RunStart,
    logger: logging.Logger,
    clock: Callable[[], int | None] | None = None,
) -> Admission:
    """begin.lua's verdict on ``start``, sent again as the module says; ``logger`` is the
    guard's, ``clock`` gives each call's ``now_ms`` (tests; None: the Redis clock).

    Raises:
        ReplicasBehindError: the replicas did not have the start by the run's limit; it
            must not run.
        redis.RedisError: Redis did not answer for ``FAILOVER_PATIENCE``, or failed
            otherwise.
        ConfigurationError: Redis holds another layout of the schedule.
    """
    began = answered = give_up = time.monotonic()
    pause, limit_ms, told = 0.1, None, False
    while True:
        try:
            store.ensure_layout()
            admission = store.scripts.begin(entry, start, None if clock is None else clock())
        except ReplicasBehindError as behind:
            answered = time.monotonic()
            now_ms = behind.now_ms if behind.now_ms is not None else 0
            refusal = behind.admission if isinstance(behind, RefusalBehindError) else None
            if limit_ms is None:
                limit_ms = (
                    _replica_limit_ms(start, now_ms)
                    if refusal is None
                    else now_ms + int(FAILOVER_PATIENCE * 1000)
                )
                # the same bound on this host's clock, should the Redis clock be held
                give_up = answered + (limit_ms - now_ms) / 1000
                logger.warning(
                    "periodiq: entry %r run %s waits: %s; its %s is written again "
                    "until the replicas have it, for up to %.1f s",
                    entry,
                    start.task_id,
                    behind,
                    "start" if refusal is None else f"refusal ({refusal.outcome})",
                    (limit_ms - now_ms) / 1000,
                )
            if now_ms >= limit_ms or time.monotonic() >= give_up:
                if refusal is not None:
                    logger.error(
                        "periodiq: entry %r run %s: its refusal (%s) is recorded on the "
                        "primary, but the replicas did not have it %.1f s later; a failover "
                        "before they do loses that record",
                        entry,
                        start.task_id,
                        refusal.outcome,
                        time.monotonic() - began,
                    )
                    return refusal
                until = (
                    "its tick expired"
                    if limit_ms == start.expires_ms
                    else "its running marker ended"
                )
                raise ReplicasBehindError(
                    f"{behind}, and they had not {time.monotonic() - began:.1f} s later, "
                    f"when {until}: it is not run; a copy of its tick is dropped as a "
                    "duplicate unless a failover lost the start, then the copy runs"
                ) from behind
            wait = min(pause, (limit_ms - now_ms) / 1000)
        except _FAILING_OVER as error:
            if time.monotonic() + pause > answered + FAILOVER_PATIENCE:
                raise
            if not told:
                told = True
                logger.warning(
                    "periodiq: entry %r run %s waits for Redis (%s); trying again for up to %d s",
                    entry,
                    start.task_id,
                    error,
                    FAILOVER_PATIENCE,
                )
            wait = pause
        else:
            if limit_ms is not None and admission.outcome in RECORDED:
                logger.info(
                    "periodiq: entry %r run %s: the replicas have its %s after %.1f s",
                    entry,
                    start.task_id,
                    "start" if admission.guarded else f"refusal ({admission.outcome})",
                    time.monotonic() - began,
                )
            return admission
        time.sleep(wait)
        pause = min(pause * 2, 2.0)


def begin_in_line(
    store: Store,
    entry: str,
    start: RunStart,
    logger: logging.Logger,
    clock: Callable[[], int | None] | None = None,
    patience: float = float("inf"),
) -> Admission:
    """:func:`begin_run`; a run over its group's limit that waits (``start.group_wait``:
    overlap ``buffer_one``) sends its begin again, in line, until a slot of the group frees,
    its tick expires, its running marker would end or ``patience`` seconds (what is left of
    its timebox) pass; then once more, to be refused ("dropped_group_limit")."""
    admission = begin_run(store, entry, start, logger, clock)
    if admission.outcome != "waiting_group":
        return admission
    ends = admission.now_ms + min(start.ttl_ms, patience * 1000)
    until = ends if start.expires_ms is None else min(start.expires_ms, ends)
    logger.info(
        "periodiq: entry %r run %s waits for a slot of its group %r (at most %d at once), "
        "for up to %.1f s",
        entry,
        start.task_id,
        start.group,
        start.group_limit,
        (until - admission.now_ms) / 1000,
    )
    pause = 0.05
    while admission.outcome == "waiting_group" and admission.now_ms < until:
        time.sleep(min(pause, max(until - admission.now_ms, 1) / 1000))
        pause = min(pause * 2, 0.5)
        admission = begin_run(store, entry, start, logger, clock)
    if admission.outcome == "waiting_group":
        admission = begin_run(store, entry, replace(start, group_wait=False), logger, clock)
    return admission


def refused_end(start: RunStart, error: ReplicasBehindError) -> RunEnd:
    """What a run refused after its begin records (finish.lua): revoked, never ran, and
    its own start ended (its attempt token), no other delivery's."""
    return RunEnd(
        task_id=start.task_id,
        tick_ms=start.tick_ms,
        outcome="revoked",
        error=f"not run: {error}"[:500],
        duration_ms=0,
        host=start.host,
        history_length=start.history_length,
        ran=False,
        attempt=start.attempt,
        group=start.group,
    )


def _replica_limit_ms(start: RunStart, now_ms: int) -> int:
    """Until when (Redis clock, ms) a run whose start no replica has yet waits for one:
    its tick's expiry, and never past the end of its running marker (its hard time limit,
    else two intervals, else an hour), after which it would no longer keep other runs off.
    """
    ends = now_ms + start.ttl_ms
    return ends if start.expires_ms is None else min(start.expires_ms, ends)
