"""Backfill: run an entry's past ticks now, each with its nominal instant, each guarded.

Temporal's schedule backfill is the model. The ticks of a range are those the entry's
schedule fires at in ``[start, end)``; a tick the worker's guard knows began (the
newest ticks it keeps, earlier backfills, the history) is skipped and reported as
such. The others are published with their own task ids (derived from the tick, so
the same backfill sent twice sends the same messages) and a header that tells the
worker's guard they are backfill runs: no tolerance drop, not dropped for being older
than the ticks it remembers, and a duplicate once their tick began.

``overlap="buffer_all"`` runs them one after another: each is published once the
previous one ended (a run refused because another run of the entry was unfinished is
published again when that one ends). ``overlap="allow"`` publishes them all at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kombu.exceptions import KombuError

from celery_periodiq.beat.publish import send_backfill
from celery_periodiq.errors import BrokerUnavailableError, EntryError, shown
from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import Tick, from_ms, tick_text, to_ms
from celery_periodiq.ops.steer import readable
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.runtime import Runtime
from celery_periodiq.worker.plain import is_plain

__all__ = [
    "BACKFILL_MOST",
    "OVERLAPS",
    "BackfillReport",
    "BackfillTick",
    "backfill",
    "backfill_ticks",
]

BACKFILL_MOST = 10_000
"""The most ticks one backfill runs; a wider range is refused (split it)."""
OVERLAPS = ("buffer_all", "allow")
_FINAL = frozenset({"succeeded", "failed", "timeboxed", "revoked", "expired"})
_US = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class BackfillTick:
    """One tick of a backfill and what became of it."""

    nominal: datetime
    """The tick's nominal instant (UTC)."""
    task_id: str
    outcome: str
    """``already ran`` (not published: its tick began before), ``would run`` (dry run),
    ``published`` (``allow``: sent, not waited for), ``waiting`` (sent, but no worker
    began it in time: it stays in its queue), ``not sent`` (the backfill stopped
    before it), or how the run ended under ``buffer_all``: ``succeeded``,
    ``failed``, ``timeboxed``, ``revoked``, ``expired``, ``ran`` (it ended, its history
    event is gone) or ``duplicate`` (another copy of the tick began first)."""


@dataclass
class BackfillReport:
    """What a backfill did, tick by tick, oldest first."""

    name: str
    overlap: str
    dry_run: bool = False
    ticks: list[BackfillTick] = field(default_factory=list)
    stalled: str | None = None
    """Why a ``buffer_all`` backfill stopped before its last tick; None when it did not."""

    def count(self, *outcomes: str) -> int:
        """How many ticks ended in one of ``outcomes``."""
        return sum(tick.outcome in outcomes for tick in self.ticks)


def backfill_task_id(prefix: str, name: str, nominal_ms: int) -> str:
    """The task id of a backfill run: the same tick always gets the same id, another
    than the scheduled run of that tick."""
    return task_id_for(prefix, name, nominal_ms, backfill=True)


def backfill_ticks(
    entry: Entry,
    start: datetime,
    end: datetime,
    *,
    prefix: str,
    default_grace: float,
    most: int = BACKFILL_MOST,
    plain: bool = False,
) -> list[Tick]:
    """The ticks of ``entry`` in ``[start, end)`` as messages to publish (pure); ``plain``:
    its task is not a ``PeriodicTask`` (:func:`celery_periodiq.model.policy.timebox`).

    Raises:
        EntryError: the range holds more than ``most`` ticks.
    """
    schedule = entry.parsed_schedule()
    fires: list[datetime] = []
    current = start - _US
    while True:
        following = schedule.next_after(current)
        if following is None or following >= end:
            break
        if len(fires) == most:
            raise EntryError(
                f"entry {shown(entry.name)}: the range holds more than {most} ticks "
                "(allowed: at most that many per backfill; split the range)"
            )
        fires.append(following)
        current = following
    ticks = []
    for position, nominal in enumerate(fires):
        after = fires[position + 1] if position + 1 < len(fires) else schedule.next_after(nominal)
        before = fires[position - 1] if position else None
        if after is not None:
            interval = (after - nominal).total_seconds()
        else:
            interval = (nominal - before).total_seconds() if before else 0.0
        limits = policy.limits(entry, interval or None, default_grace, plain)
        ticks.append(
            Tick(
                nominal=from_ms(to_ms(nominal)),
                missed=1,
                interval=interval,
                gap_before=interval,
                expires=None,
                soft_time_limit=limits.timebox,
                time_limit=limits.time_limit,
                task_id=backfill_task_id(prefix, entry.name, to_ms(nominal)),
            )
        )
    return ticks


def backfill(
    runtime: Runtime,
    name: str,
    start: datetime,
    end: datetime,
    *,
    overlap: str,
    dry_run: bool,
    timeout: float,
    progress: Callable[[BackfillTick], None] | None,
    audit: Audit | None = None,
) -> BackfillReport:
    """Run the entry's ticks in ``[start, end)`` (see the module docstring), inside the
    caller's guard, recorded in its audit trail by ``audit`` before the first is sent;
    the arguments (their defaults too) and errors are those of
    :meth:`Periodiq.backfill <celery_periodiq.api.Periodiq.backfill>`."""
    entry = readable(runtime.store, name)
    try:
        return _backfill(runtime, entry, start, end, overlap, dry_run, timeout, progress, audit)
    except (KombuError, OSError) as error:  # reaching the broker (a message's own: MessageError)
        raise BrokerUnavailableError(f"the broker is unreachable: {error}") from error


def _backfill(
    runtime: Runtime,
    entry: Entry,
    start: datetime,
    end: datetime,
    overlap: str,
    dry_run: bool,
    timeout: float,
    progress: Callable[[BackfillTick], None] | None,
    audit: Audit | None = None,
) -> BackfillReport:
    """Run ``entry``'s ticks in ``[start, end)`` (see the module docstring).

    Raises:
        EntryError: a bad range or overlap; nothing is published.
    """
    if overlap not in OVERLAPS:
        raise EntryError(f"overlap={shown(overlap)} is invalid (allowed: {', '.join(OVERLAPS)})")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise EntryError(f"timeout={shown(timeout)} is invalid (allowed: seconds > 0)")
    for what, value in (("start", start), ("end", end)):
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise EntryError(f"{what}={shown(value)} is invalid (allowed: an aware datetime)")
    if start >= end:
        raise EntryError(
            f"the range {start.isoformat()} .. {end.isoformat()} is empty "
            "(allowed: start before end)"
        )
    store, settings = runtime.store, runtime.settings
    now = from_ms(store.now_ms())
    if end > now:
        raise EntryError(
            f"end={end.isoformat()} is after now ({now.isoformat()} on the Redis clock): "
            "backfill runs past ticks; the beats run the coming ones"
        )
    ticks = backfill_ticks(
        entry,
        start,
        end,
        prefix=store.keys.prefix,
        default_grace=settings.default_grace,
        plain=bool(is_plain(runtime.app, entry.task)),
    )
    report = BackfillReport(entry.name, overlap, dry_run)
    began = store.run_memory(entry.name).began
    settled: dict[int, BackfillTick] = {}

    def settle(tick: Tick, outcome: str) -> None:
        done = BackfillTick(tick.nominal, tick.task_id, outcome)
        settled[to_ms(tick.nominal)] = done
        if progress is not None:
            progress(done)

    pending = []
    for tick in ticks:
        if to_ms(tick.nominal) in began:
            settle(tick, "already ran")
        elif dry_run:
            settle(tick, "would run")
        else:
            pending.append(tick)
    if pending and audit is not None:
        span = f"{pending[0].nominal.isoformat()} .. {pending[-1].nominal.isoformat()}"
        note, argument = f"{len(pending)} ticks, {span} ({overlap})", store.audit_argument(audit)
        # in the audit trail alone (record.lua), before the first tick is sent
        store.scripts.record(entry.name, "backfill", "", None, note, 0, argument)
    if pending and overlap == "allow":
        with runtime.app.producer_or_acquire() as producer:
            for tick in pending:
                send_backfill(runtime.app, entry, tick, "allow", producer)
                settle(tick, "published")
    elif pending:
        for position, tick in enumerate(pending):
            outcome = _run_one(runtime, entry, tick, timeout)
            if outcome.startswith("stalled: "):
                report.stalled = outcome.removeprefix("stalled: ")
                settle(tick, "waiting")
                for rest in pending[position + 1 :]:
                    settle(rest, "not sent")
                break
            settle(tick, outcome)
    report.ticks = [settled[to_ms(tick.nominal)] for tick in ticks]
    return report


def _run_one(runtime: Runtime, entry: Entry, tick: Tick, timeout: float) -> str:
    """Publish one tick and wait until its run ended; returns how it ended, or
    ``stalled: <why>`` when no worker began it within ``timeout`` seconds."""
    store, nominal = runtime.store, to_ms(tick.nominal)
    sent_ms = store.now_ms()
    with runtime.app.producer_or_acquire() as producer:
        send_backfill(runtime.app, entry, tick, "skip", producer)
    waited_since, pause = time.monotonic(), 0.02
    while True:
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)
        memory = store.run_memory(entry.name, nominal)
        mine = [
            event.kind
            for event in memory.events
            if event.task_id == tick.task_id and to_ms(event.at) >= sent_ms
        ]
        final = next((kind for kind in mine if kind in _FINAL), None)
        if final is not None:
            return final
        if "duplicate" in mine:
            return "duplicate"
        if "damaged" in mine:
            return f"stalled: entry {entry.name!r} is quarantined (see `show`)"
        if "skipped_overlap" in mine and memory.running is None:
            # another run of the entry was unfinished: send this one again now it ended
            sent_ms = store.now_ms()
            with runtime.app.producer_or_acquire() as producer:
                send_backfill(runtime.app, entry, tick, "skip", producer)
            waited_since = time.monotonic()
            continue
        if nominal in memory.began:
            if memory.running != tick.task_id:
                return "ran"  # it ended; its events are no longer in the history
            waited_since = time.monotonic()  # running: its hard limit bounds the wait
        elif "skipped_overlap" in mine:
            waited_since = time.monotonic()  # waiting for the other run, not for a worker
        if time.monotonic() - waited_since > timeout:
            if not store.existing([entry.name]):
                return f"stalled: entry {entry.name!r} was deleted"
            queue = entry.options.get("queue") or runtime.app.conf.task_default_queue
            return (
                f"stalled: no worker began the run of tick {tick_text(nominal)} within "
                f"{timeout:g} s (is a worker consuming queue {queue!r}?); the same backfill "
                "again goes on from there (ticks that ran are skipped)"
            )
