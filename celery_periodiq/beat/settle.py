"""A claimed tick decided: plan it, publish its messages, and the settlement recording it.

One entry's bad data, a failure while planning it or a message of it that cannot be
encoded quarantines that entry alone; only the broker failing goes up (and stops the
chunk). An entry whose state was missing is rebuilt from its definition.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from celery_periodiq.beat.definitions import Definitions
from celery_periodiq.beat.publish import Publisher
from celery_periodiq.beat.redis_publish import NotStagedError
from celery_periodiq.beat.tick_tracing import TickTracing
from celery_periodiq.beat.windows import WindowBook
from celery_periodiq.config import Settings
from celery_periodiq.errors import BrokerUnavailableError, EntryError, MessageError
from celery_periodiq.model.entry import AUTO, Entry
from celery_periodiq.model.plan import (
    Plan,
    Tick,
    from_ms,
    next_tick,
    next_tick_ms,
    plan_tick,
    task_id_for,
    tick_text,
    to_ms,
)
from celery_periodiq.model.window_plan import plan_held
from celery_periodiq.model.windows import Window
from celery_periodiq.protocol.records import EventRow, Settlement
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.beat_scripts import Claim
from celery_periodiq.store.store import Store
from celery_periodiq.worker import checkins
from celery_periodiq.worker.plain import is_plain

__all__ = ["Settler"]

logger = logging.getLogger("celery_periodiq.dispatch")

# At most this many "missed" events are written per claim; the counter has them all.
_MISSED_EVENTS = 20
_REBUILT = "its state was missing; rebuilt from the definition"


def _queued_ttl(tick: Tick, sent_at_ms: int) -> int:
    """How long a published run counts as waiting: until it expires, else two intervals."""
    if tick.expires is not None:
        return max(to_ms(tick.expires) - sent_at_ms, 1000)
    return max(int(tick.interval * 2000), 1000)


class Settler:
    """Decides one beat's claimed ticks and publishes them through its :class:`Publisher`."""

    def __init__(
        self, publisher: Publisher, settings: Settings, store: Store | None = None
    ) -> None:
        """``store``: where the check-ins of ticks a window held back are sent from."""
        self._publisher = publisher
        self.settings = settings
        self._store = store
        self._plain: dict[str, bool] = {}
        """Task name -> whether its runs are a plain task's (:meth:`_is_plain`)."""
        self._definitions = Definitions()
        self.tracing = TickTracing(settings, publisher)
        self.windows = WindowBook()
        """The maintenance windows this beat decides with (read by the dispatcher)."""

    def settle(
        self, claim: Claim, producer: Any, sent_at_ms: int, sent: list[tuple[str, Tick]]
    ) -> Settlement:
        """Decide ``claim``, publish its ticks through ``producer`` (each appended to ``sent``)
        and return its settlement; ``sent_at_ms`` is the Redis clock now.

        Anything but a broker failure quarantines this entry alone instead of stopping
        the batch.

        Raises:
            BrokerUnavailableError: the broker failed.
        """
        if self.tracing.on:  # inside the tick's span (tick_tracing.py)
            staged = self._publisher.staged is not None
            return self.tracing.settle(
                claim, staged, lambda: self._told(claim, producer, sent_at_ms, sent)
            )
        return self._told(claim, producer, sent_at_ms, sent)

    def _told(
        self, claim: Claim, producer: Any, sent_at_ms: int, sent: list[tuple[str, Tick]]
    ) -> Settlement:
        try:
            return self._settle(claim, producer, sent_at_ms, sent)
        except (BrokerUnavailableError, NotStagedError):
            raise
        except MessageError as error:  # its message cannot be encoded, the broker is fine
            logger.error("periodiq: entry %r quarantined: %s", claim.name, error)
            reason = str(error)
        except Exception as error:
            logger.exception("periodiq: entry %r quarantined: planning its tick failed", claim.name)
            reason = f"the beat failed on it: {type(error).__name__}: {error}"
        return Settlement(claim.id, claim.name, claim.version, claim.inc, quarantine=reason)

    def _settle(
        self, claim: Claim, producer: Any, sent_at_ms: int, sent: list[tuple[str, Tick]]
    ) -> Settlement:
        if claim.definition is None:
            return Settlement(claim.id, claim.name, claim.version, claim.inc)
        try:
            entry = self._definitions.entry(claim.name, claim.version, claim.definition)
        except EntryError as error:
            logger.error("periodiq: entry %r quarantined: %s", claim.name, error)
            return Settlement(claim.id, claim.name, claim.version, claim.inc, quarantine=str(error))
        if claim.rebuilt:
            nominal = _recovered_tick(entry, claim)
            if nominal is None:
                return self._rebuilt(entry, claim)
            logger.warning(
                "periodiq: entry %r had no readable state; rebuilt from its definition at tick %s",
                entry.name,
                tick_text(nominal),
            )
            claim = claim._replace(nominal_ms=nominal)
        book = self.windows
        if book.windows or entry.exclude:
            plan = self._held(entry, claim, sent_at_ms, book.of(entry) if book.windows else ())
        else:  # a tick claimed ahead is decided as of its own instant
            plan = self._plan(
                entry, claim, sent_at_ms, from_ms(max(claim.claimed_ms, claim.nominal_ms))
            )
        if self.tracing.on:
            self.tracing.planned(plan)
        for tick in plan.publish:
            self._publisher.send(entry, tick, producer, sent_at_ms)
            sent.append((entry.name, tick))
        return self._accounting(plan, claim, sent_at_ms)

    def _plan(self, entry: Entry, claim: Claim, sent_at_ms: int, now: datetime) -> Plan:
        """:func:`plan_tick` of ``claim`` as of ``now``."""
        return plan_tick(
            entry,
            from_ms(claim.nominal_ms),
            now,
            running=claim.running,
            queued=claim.queued,
            prefix=self.settings.key_prefix,
            catchup_cap=self.settings.catchup_cap,
            default_grace=self.settings.default_grace,
            sent_at=from_ms(sent_at_ms),
            previous=None if claim.prev_ms is None else from_ms(claim.prev_ms),
            runs=claim.runs,
            owed=claim.owed,
            plain=entry.timebox == AUTO and self._is_plain(entry.task),
        )

    def _held(
        self, entry: Entry, claim: Claim, sent_at_ms: int, windows: tuple[Window, ...]
    ) -> Plan:
        """:meth:`_plan` under the entry's maintenance windows and excluded dates
        (:func:`plan_held`): decided as of the instant the claim is sent for."""
        return plan_held(
            entry,
            from_ms(claim.nominal_ms),
            from_ms(max(claim.claimed_ms, claim.nominal_ms)),
            from_ms(max(claim.claimed_ms, claim.due_ms)),
            windows=windows,
            excluded=entry.excluded_dates,
            previous=None if claim.prev_ms is None else from_ms(claim.prev_ms),
            owed=claim.owed,
            plan=lambda chosen, now: self._plan(chosen, claim, sent_at_ms, now),
        )

    def _is_plain(self, task: str) -> bool:
        """Whether ``task`` is plain in this beat's app (:func:`is_plain`); one it does not
        know is timeboxed as a ``PeriodicTask`` is, and said so once."""
        plain = self._plain.get(task)
        if plain is not None:
            return plain
        found = is_plain(self._publisher.app, task)
        if found is None:
            logger.warning(
                "periodiq: task %r is not registered in this beat's app: its entries' runs "
                "are timeboxed as a PeriodicTask's are (a plain task keeps its own time "
                "limits where the beat knows it: import its module in the beat, or set "
                "timebox=None on its entries)",
                task,
            )
        plain = self._plain[task] = bool(found)
        return plain

    def _rebuilt(self, entry: Entry, claim: Claim) -> Settlement:
        """The settlement of an entry whose state was missing and whose due instant is no
        tick of its schedule: its next tick computed afresh from the claim's clock."""
        upcoming = next_tick_ms(entry, from_ms(claim.claimed_ms))
        following = "none" if upcoming is None else tick_text(upcoming[0])
        logger.warning(
            "periodiq: entry %r had no readable state; rebuilt from its definition, next tick %s",
            entry.name,
            following,
        )
        event = EventRow("rebuilt", None, "-", note=_REBUILT)
        next_ms, due_ms = (None, None) if upcoming is None else upcoming
        return Settlement(
            claim.id,
            claim.name,
            claim.version,
            claim.inc,
            next_ms,
            due_ms,
            counts={},
            events=(event,),
        )

    def _accounting(self, plan: Plan, claim: Claim, sent_at_ms: int) -> Settlement:
        counts: dict[str, int] = {}
        events: list[EventRow] = []
        publish = plan.publish
        nominals = [to_ms(tick.nominal) for tick in publish]
        for tick, nominal_ms in zip(publish, nominals, strict=True):
            # "" task id: the one the tick derives
            events.append(EventRow("enqueued", nominal_ms, "", tick.missed))
        late = runs = queued = last_tick = last_enqueued = None
        if publish:
            counts["enqueued"] = len(publish)
            runs = len(publish)  # what max_runs counts
            # due -> published; the claimed tick is due at its jittered instant
            jittered, nominal = claim.due_ms, claim.nominal_ms
            late = tuple([sent_at_ms - (jittered if ms == nominal else ms) for ms in nominals])
            last = publish[-1]
            queued = (last.task_id, _queued_ttl(last, sent_at_ms))
            last_enqueued, last_tick = claim.claimed_ms, nominals[-1]
        for reason, instants, total in (
            ("missed", plan.missed, plan.missed_count),
            ("skipped_overlap", plan.skipped_overlap, len(plan.skipped_overlap)),
        ):
            if not total:
                continue
            counts[reason] = total
            for instant in instants[-_MISSED_EVENTS:]:  # "-": no task was sent for these
                events.append(EventRow(reason, to_ms(instant), "-"))
            listed = min(len(instants), _MISSED_EVENTS)
            note = f"{total - listed} earlier not listed" if total > listed else None
            if reason == "missed" and plan.folded is not None:
                note = (
                    "too late to keep its place: the next run stands for it"
                    if plan.owed
                    else "too late to keep its place"
                )
            if note is not None:
                events[-1] = events[-1]._replace(note=note)
            logger.info("periodiq: entry %r: %d ticks %s", claim.name, total, reason)
        for held in plan.held:  # a window or an excluded date: nothing lost silently
            counts[held.reason] = counts.get(held.reason, 0) + held.count
            for instant in held.ticks:
                events.append(EventRow(held.reason, to_ms(instant), "-", note=held.note))
            logger.info("periodiq: entry %r: %d ticks %s", claim.name, held.count, held.reason)
            if self._store is not None and self.settings.checkins:  # skipped, not missed
                for instant in held.ticks:
                    task_id = task_id_for(self.settings.key_prefix, claim.name, to_ms(instant))
                    checkins.report(self._store, claim.name, task_id, held.reason)
        if claim.rebuilt:
            events.append(EventRow("rebuilt", claim.nominal_ms, "-", note=_REBUILT))
        next_ms = due_ms = None
        if plan.next_nominal is not None and plan.next_due is not None:
            next_ms, due_ms = to_ms(plan.next_nominal), to_ms(plan.next_due)
        return Settlement(
            claim.id,
            claim.name,
            claim.version,
            claim.inc,
            next_ms,
            due_ms,
            counts=counts,
            events=tuple(events),
            owed=plan.owed if plan.owed or claim.owed else None,
            late=late,
            runs=runs,
            prev_ms=None if plan.newest is None else to_ms(plan.newest),
            queued=queued,
            last_enqueued=last_enqueued,
            last_tick=last_tick,
        )


def _recovered_tick(entry: Entry, claim: Claim) -> int | None:
    """The tick whose due instant (jitter applied) is the claim's, or None: how the beat
    tells whether a due instant found without a state is a real tick of the schedule."""
    schedule = entry.parsed_schedule()
    if isinstance(schedule, EventSchedule):
        return None
    due = from_ms(claim.due_ms)
    moment: datetime | None = due - timedelta(seconds=entry.jitter, milliseconds=1)
    while moment is not None and moment < due:
        upcoming = next_tick(entry, schedule, moment)
        if upcoming is None:
            return None
        if to_ms(upcoming[1]) == claim.due_ms:
            return to_ms(upcoming[0])
        moment = upcoming[0]
    return None
