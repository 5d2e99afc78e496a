"""One beat pass: claim due ticks, publish their messages, settle the claims.

Two Redis round trips per batch (claim.lua, ack.lua) however many entries
are due, and one broker producer for the whole batch. One entry's bad data, a
failure while planning it or a message of it that cannot be encoded quarantines
that entry alone; only the broker failing keeps a chunk's ticks in flight.
Settlements that could not be written are kept and written first in the next pass.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import redis
from celery import Celery

from celery_periodiq.beat.publish import Publisher, send
from celery_periodiq.clock import SAFE_SHARE, elapsed
from celery_periodiq.config import Settings
from celery_periodiq.errors import BrokerUnavailableError, EntryError, MessageError
from celery_periodiq.model import ring
from celery_periodiq.model.entry import Entry, EntryReader
from celery_periodiq.model.plan import (
    Plan,
    Tick,
    from_ms,
    next_tick,
    plan_tick,
    task_id_for,
    tick_text,
    to_ms,
)
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.protocol.records import EventRow, Settlement
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.scripts import Claim, ClaimBatch
from celery_periodiq.store.store import Store

__all__ = ["Dispatcher", "Pass"]

logger = logging.getLogger("celery_periodiq.dispatch")

# At most this many "missed" events are written per claim; the counter has them all.
_MISSED_EVENTS = 20
# Claims published per broker round trip: the first chunk small, so that the first
# message of a burst does not wait long, then twice as many each time up to the most.
_PUBLISH_CHUNK = 25
_PUBLISH_CHUNK_MOST = 400
# Ticks due this soon are claimed and planned ahead, then sent the moment they are
# due, so the claim's round trip is not part of their lateness.
_HORIZON_MS = 25
# A pass that sends more ticks than this logs each at DEBUG and one summary at INFO.
_LOG_EACH = 10
_REBUILT = "its state was missing; rebuilt from the definition"


_NEVER = threading.Event()


def _sleep_until(moment: float) -> None:
    """Sleep until :func:`elapsed` reaches ``moment`` (a few ms at most here).

    A timed wait rather than ``time.sleep``: under libfaketime (the clock-skew
    tests) ``time.sleep`` fails with EINVAL while timed waits work.
    """
    remaining = moment - elapsed()
    if remaining > 0:
        _NEVER.wait(remaining)


def _queued_ttl(tick: Tick, sent_at_ms: int) -> int:
    """How long a published run counts as waiting: until it expires, else two intervals."""
    if tick.expires is not None:
        return max(to_ms(tick.expires) - sent_at_ms, 1000)
    return max(int(tick.interval * 2000), 1000)


_READER = EntryReader()


@functools.lru_cache(maxsize=4096)
def _entry(definition: str) -> Entry:
    return _READER.read(definition)


class _Claimed(NamedTuple):
    """One partition's claims, when the claim was sent and when its reply was read."""

    batch: ClaimBatch
    claimed_at: float
    """``elapsed()`` before the claim was sent: its lease counts from here."""
    received_at: float
    """``elapsed()`` after its reply was read."""
    clock: float
    """The Redis clock (ms) when the last claim of its call ran, before ``received_at``:
    a due instant mapped from these two is never earlier than the real one."""


def _received(batches: list[ClaimBatch], claimed_at: float) -> list[_Claimed]:
    """The batches of one claim call, read just now."""
    received_at = elapsed()
    clock = max((batch.now_ms + batch.now_us / 1000 for batch in batches), default=0.0)
    return [_Claimed(batch, claimed_at, received_at, clock) for batch in batches]


@dataclass(frozen=True, slots=True)
class Pass:
    """What one dispatch pass saw, over the partitions it claimed."""

    claimed: int
    """Ticks claimed in this pass."""
    full: bool
    """Some partition gave a whole batch: more may be due at once."""
    complete: bool
    """False when publishing stopped early (broker down, lease running out)."""
    wake_ms: float | None
    """The Redis clock (ms) of the next due tick or claim recheck of any partition."""
    clock_ms: float
    """The Redis clock (ms, with its microseconds) at ``measured``."""
    measured: float
    """``elapsed()`` at ``clock_ms``."""

    def seconds_until_next(self) -> float | None:
        """Seconds until the next due tick or claim recheck, from now."""
        if self.wake_ms is None:
            return None
        passed = elapsed() - self.measured
        # wake a horizon early: the claim then takes those ticks ahead of time
        return max((self.wake_ms - self.clock_ms - _HORIZON_MS) / 1000 - passed, 0.0)


class Dispatcher:
    """Claims, publishes and settles ticks for one beat instance."""

    def __init__(
        self,
        app: Celery,
        store: Store,
        beat_id: str,
        on_vanished: Callable[[list[str]], None] | None = None,
        covered: Callable[[float, float], bool] | None = None,
    ) -> None:
        """``covered(since, now)``: whether this beat's heartbeat held without a gap from
        ``since`` to ``now`` (:meth:`Heartbeat.covers`); without it, a claim is this beat's
        for its own lease only."""
        self.app = app
        self.store = store
        self.settings: Settings = store.settings
        self._publisher = Publisher(app)
        self.beat_id = beat_id
        self._covered = covered
        self._injected = False
        """The pass runs on an injected clock (tests)."""
        self.refused = 0
        """Settlements Redis refused since the start: claims another beat had taken over."""
        self._on_vanished = on_vanished
        self.ticks_claimed = 0
        self.last_tick_ms: int | None = None
        self._broker_down = False
        self._prefetched: tuple[Callable[[], list[ClaimBatch]], float] | None = None
        """Claims sent during the last pass, and when: read by the next pass."""
        self._refill: Callable[[], None] | None = None
        self._settling: Callable[[], int] | None = None
        """Waits for the settlements of the last chunk published (see _settle_chunk)."""
        self._unsettled_chunk: dict[int, list[Settlement]] = {}
        self._unsettled: dict[int, list[Settlement]] = {}
        """Settlements of published ticks whose ack failed, by partition: written first in
        the next pass."""
        self._wake: dict[int, float] = {}
        """Per partition, the Redis clock (ms) when it next has something due; a partition
        not in it (never claimed, or changed since) is claimed in the next pass."""
        self._lock = threading.Lock()
        self._clock = (0.0, 0.0)
        """The last Redis clock reading (ms) and ``elapsed()`` when it was taken."""
        self._watched: frozenset[int] | None = None
        """The partitions the ring gives this beat (None: all, until the ring is known)."""
        self._sweep_at = 0.0
        """``elapsed()`` of the next pass over every partition, watched or not."""

    def touch(self, name: str | None = None) -> None:
        """Something changed: claim ``name``'s partition (every partition when None) in the
        next pass, whatever it was known to have due."""
        with self._lock:
            if name is None:
                self._wake.clear()
            else:
                self._wake.pop(self.store.keys.partition_of(name), None)

    def watch(self, beats: list[str]) -> None:
        """The live beats changed (or were read again): take this beat's share of the
        partitions, two beats to each (:mod:`celery_periodiq.model.ring`)."""
        watched = ring.watched(self.beat_id, beats, self.store.keys.partitions)
        with self._lock:
            if watched != self._watched:
                logger.info(
                    "periodiq: beat %s watches %d of %d partitions (%d live beats)",
                    self.beat_id, len(watched), self.store.keys.partitions, len(beats),
                )  # fmt: skip
                self._wake = {index: moment for index, moment in self._wake.items()
                              if self._watched is None or index in self._watched}  # fmt: skip
            self._watched = watched

    @property
    def watched(self) -> int:
        """How many partitions this beat watches."""
        watched = self._watched
        return self.store.keys.partitions if watched is None else len(watched)

    def mine(self) -> list[Partition]:
        """The partitions the ring gives this beat (all of them until it is known)."""
        with self._lock:
            return [part for part in self.store.keys.all() if self._mine(part.index, False)]

    def _mine(self, index: int, sweeping: bool) -> bool:
        watched = self._watched
        return sweeping or watched is None or index in watched

    def _due_partitions(self, now_ms: int | None) -> list[Partition]:
        """The partitions that may have something due now (or within the horizon): of
        those the ring gives this beat, or of all of them in a sweep, which comes once
        per lease so that claims of beats gone are taken over whatever the ring says."""
        clock, measured = self._clock
        estimate = (
            float(now_ms) if now_ms is not None
            else clock + (elapsed() - measured) * 1000 if measured else math.inf
        )  # fmt: skip
        sweeping = elapsed() >= self._sweep_at
        if sweeping:
            self._sweep_at = elapsed() + self.settings.claim_lease
        with self._lock:
            return [
                part for part in self.store.keys.all()
                if self._mine(part.index, sweeping)
                and self._wake.get(part.index, -math.inf) <= estimate + _HORIZON_MS
            ]  # fmt: skip

    def dispatch(self, now_ms: int | None = None) -> Pass:
        """Claim the due ticks of every partition that has some, publish them, settle them.

        ``now_ms`` replaces the Redis clock (tests drive timelines with it).

        Raises:
            redis.RedisError: the schedule's Redis failed (nothing published is lost:
                unsettled claims are settled in the next pass, or taken over).
        """
        settings = self.settings
        self._injected = now_ms is not None
        self._settle_pending()
        lease_ms = int(settings.claim_lease * 1000)
        horizon = 0 if now_ms is not None else _HORIZON_MS
        batches: list[_Claimed] = []
        claimed: list[_Claimed] = []
        if self._prefetched is not None:  # sent during the last pass
            read, sent_at = self._prefetched
            self._prefetched = None
            claimed = _received(read(), sent_at)
        # Aging the Redis clock reading from before the call wakes us early, never late.
        claimed_at = elapsed()
        taken = {got.batch.partition for got in claimed}
        due = [part for part in self._due_partitions(now_ms) if part.index not in taken]
        # about periodiq_batch_size claims in a pass, however many partitions are due
        share = max(settings.batch_size // max(len(due) + len(taken), 1),
                    min(settings.batch_size, 32))  # fmt: skip
        if due:
            more = self.store.scripts.claim_many(
                due, self.beat_id, share, lease_ms, now_ms, horizon
            )
            claimed += _received(more, claimed_at)
        for got in claimed:
            batch = got.batch
            part = self.store.keys.part(batch.partition)
            self._clock = (batch.now_ms + batch.now_us / 1000, got.claimed_at)
            moments = [m for m in (batch.next_due_ms, batch.next_recheck_ms) if m is not None]
            with self._lock:
                self._wake[part.index] = min(moments, default=math.inf)
            self._report(batch)
            batches.append(got)
        full = [got.batch.partition for got in batches if len(got.batch.claims) >= share]
        # More is due in full partitions: their next claims are sent while the last
        # chunk of these is published (not with an injected clock: tests step by step).
        self._refill = None if now_ms is not None or not full else functools.partial(
            self._prefetch, [self.store.keys.part(index) for index in full], share, lease_ms,
        )  # fmt: skip
        count = sum(len(got.batch.claims) for got in batches)
        complete = True
        if count:
            complete = self._publish_batches(batches)
        clock, measured = self._clock
        with self._lock:
            mine = [moment for index, moment in self._wake.items() if self._mine(index, False)]
        # wake for the next sweep too (on the Redis clock, from the last reading)
        sweep = clock + (self._sweep_at - measured) * 1000 if measured else math.inf
        wake = min([*mine, sweep], default=math.inf)
        return Pass(
            claimed=count,
            full=bool(full),
            complete=complete,
            wake_ms=None if math.isinf(wake) else wake,
            clock_ms=clock,
            measured=measured,
        )

    def _publish_batches(self, batches: list[_Claimed]) -> bool:
        """Publish every claimed tick, then settle each partition's claims."""
        self.ticks_claimed += sum(len(got.batch.claims) for got in batches)
        self.last_tick_ms = max(got.batch.now_ms for got in batches)
        settlements: dict[int, list[Settlement]] = {}
        sent: list[tuple[str, Tick]] = []
        complete = False
        try:
            with self.app.producer_or_acquire() as producer:
                complete = self._publish_all(batches, producer, settlements, sent)
            if self._broker_down and sent:  # a pass that sent nothing proves nothing
                logger.info("periodiq: broker reachable again")
                self._broker_down = False
        except BrokerUnavailableError as error:
            # Only the broker's connection or channel failing gets here (the Publisher
            # tells them from a message's own failure, which quarantines its entry); a
            # failure of the schedule's Redis (claims, settlements) goes up as what it is.
            if not self._broker_down:
                left = sum(len(got.batch.claims) for got in batches) - sum(
                    map(len, settlements.values())
                )
                logger.error("periodiq: %s; %d claimed ticks stay in flight", error, left)
            self._broker_down = True
        finally:
            self._log_sent(sent)
            self._settled_chunk()
            self._settle_pending()
            with self._lock:
                for items in settlements.values():
                    for item in items:
                        if item.due_ms is not None:
                            index = self.store.keys.partition_of(item.name)
                            self._wake[index] = min(self._wake.get(index, math.inf), item.due_ms)
        return complete

    def _settle_pending(self) -> None:
        """Write the settlements not yet written (ack.lua): a batch of each partition at a
        time, every partition's in one round trip. Written again after a failure: a
        settlement written twice changes nothing the second time."""
        size = self.settings.batch_size
        while self._unsettled:
            batches = [(self.store.keys.part(index), items[:size])
                       for index, items in self._unsettled.items()]  # fmt: skip
            settled = self.store.scripts.ack_many(
                batches, self.beat_id, self.settings.history_length
            )
            self._count_refused(sum(len(items) for _, items in batches), settled)
            for index in list(self._unsettled):
                del self._unsettled[index][:size]
                if not self._unsettled[index]:
                    del self._unsettled[index]

    def _report(self, batch: ClaimBatch) -> None:
        if batch.vanished:
            logger.warning(
                "periodiq: entries %s were due but their definitions are gone (deleted outside "
                "periodiq?); they are listed as quarantined until deleted or declared again",
                batch.vanished,
            )
            if self._on_vanished is not None:
                self._on_vanished(batch.vanished)

    def _publish_all(
        self,
        batches: list[_Claimed],
        producer: Any,
        settlements: dict[int, list[Settlement]],
        sent: list[tuple[str, Tick]],
    ) -> bool:
        """Publish the claims of every partition in due order, in chunks; a chunk's claims
        count as settled once it is flushed.

        Returns whether every claim was published.
        """
        claims = sorted(
            ((claim, got) for got in batches for claim in got.batch.claims),
            key=lambda item: item[0].due_ms,
        )
        start, size = 0, _PUBLISH_CHUNK
        while start < len(claims):
            chunk = claims[start : start + size]
            if start + size >= len(claims) and self._refill is not None:
                self._refill()  # Redis claims the next pass while this chunk goes out
                self._refill = None
            try:
                self._publish_chunk(chunk, producer, settlements, sent)
            except _LeaseLostError as lost:
                logger.warning(
                    "periodiq: %d claimed ticks not sent: %s; they stay in flight, for this "
                    "beat's next pass if they are still its own, else for the beat that took "
                    "them over", len(claims) - start, lost,
                )  # fmt: skip
                return False
            start += size
            size = min(size * 2, _PUBLISH_CHUNK_MOST)  # the first few go out soonest
        return True

    def _publish_chunk(
        self,
        chunk: list[tuple[Claim, _Claimed]],
        producer: Any,
        settlements: dict[int, list[Settlement]],
        sent: list[tuple[str, Tick]],
    ) -> None:
        """Publish one chunk of claims, and settle those the broker took, also when the
        rest failed (a broker error, or :class:`_LeaseLostError`).

        Messages of a chunk go to the broker in one round trip where the transport can
        batch (kombu >= 5.7, Redis); they are settled only after that flush succeeded, so
        a failed flush leaves them in flight. The lease is checked before each message
        is built and again right before each flush: a beat stopped in between (SIGSTOP,
        a VM paused) sends nothing it may have lost meanwhile.
        """
        oldest = min(got.claimed_at for _, got in chunk)
        safe, injected = self.settings.claim_lease * SAFE_SHARE, self._injected
        flushed: list[tuple[int, Settlement]] = []
        try:
            with self._publisher.batch(producer) as flush:
                pending: list[tuple[int, Settlement]] = []

                def send_now() -> None:
                    self._check_lease(oldest)
                    flush()
                    flushed.extend(pending)
                    pending.clear()

                for claim, got in chunk:
                    if claim.due_ms > got.clock:  # claimed ahead: send it when it is due
                        send_now()
                        # from after the claim's reply: never sent before it is due
                        _sleep_until(got.received_at + (claim.due_ms - got.clock) / 1000)
                    now = elapsed()
                    if now - oldest >= safe:  # past the claims' own lease: ask the heartbeat
                        self._check_lease(oldest)
                    # the Redis clock now, from the claim's reading of it (injected: its own)
                    sent_at = got.batch.now_ms if injected else int(
                        got.clock + (now - got.received_at) * 1000
                    )  # fmt: skip
                    settlement = self._settle_isolated(claim, producer, sent_at, sent)
                    pending.append((got.batch.partition, settlement))
                send_now()
        finally:
            written: dict[int, list[Settlement]] = {}
            for index, settlement in flushed:
                settlements.setdefault(index, []).append(settlement)
                written.setdefault(index, []).append(settlement)
            if written:
                self._settle_chunk(written)

    def _prefetch(self, parts: list[Partition], share: int, lease_ms: int) -> None:
        """Send the next pass's claims of ``parts``; the next pass reads them."""
        sent_at = elapsed()
        try:
            read = self.store.scripts.claim_later(parts, self.beat_id, share, lease_ms, _HORIZON_MS)
        except redis.RedisError:  # the next pass claims them the usual way, or fails
            return
        self._prefetched = (read, sent_at)

    def _settle_chunk(self, chunk: dict[int, list[Settlement]]) -> None:
        """Send a published chunk's settlements; Redis runs them while the next chunk is
        published (the last chunk's are waited for before this one's are sent)."""
        self._settled_chunk()
        self._unsettled_chunk = chunk
        size = self.settings.batch_size
        batches = [
            (self.store.keys.part(index), items[start : start + size])
            for index, items in chunk.items()
            for start in range(0, len(items), size)
        ]
        self._settling = self.store.scripts.ack_later(
            batches, self.beat_id, self.settings.history_length
        )

    def _settled_chunk(self) -> None:
        """Wait for the settlements sent by :meth:`_settle_chunk`; those that failed, or
        could not even be sent, are written by :meth:`_settle_pending` (first thing in the
        next pass, if not at the end of this one)."""
        settling, chunk = self._settling, self._unsettled_chunk
        self._settling, self._unsettled_chunk = None, {}
        if settling is not None:
            try:
                settled = settling()
            except Exception:  # kept below, with the others not written yet
                pass
            else:
                self._count_refused(sum(map(len, chunk.values())), settled)
                return
        # Not sent (ack_later raised) or failed: dropping them would leave their claims
        # to be taken over after the lease and published again.
        for index, items in chunk.items():
            self._unsettled.setdefault(index, []).extend(items)

    def _count_refused(self, given: int, settled: int) -> None:
        """ack.lua settles only claims this beat still owns: say how many it refused."""
        if settled >= given:
            return
        self.refused += given - settled
        logger.warning(
            "periodiq: %d settlements refused: another beat took their claims over while "
            "this one could not renew them (stopped, or cut off from Redis); its messages "
            "of those ticks were sent before, and the worker's guard drops a second copy "
            "(%d refused since this beat started)", given - settled, self.refused,
        )  # fmt: skip

    def _check_lease(self, claimed_at: float) -> None:
        """Raise :class:`_LeaseLostError` unless claims sent at ``claimed_at`` (:func:`elapsed`)
        are surely still this beat's: within their own lease, or within a heartbeat that
        held without a gap since before that lease ran out (other beats take a claim
        over only once both have run out)."""
        now = elapsed()
        safe = self.settings.claim_lease * SAFE_SHARE
        if now - claimed_at < safe:
            return
        if self._covered is not None and self._covered(claimed_at + safe, now):
            return
        raise _LeaseLostError(
            f"claimed {now - claimed_at:.1f} s ago, and this beat's heartbeat did not hold "
            "throughout (was the process stopped?)"
        )

    def _settle_isolated(
        self, claim: Claim, producer: Any, sent_at_ms: int, sent: list[tuple[str, Tick]]
    ) -> Settlement:
        """:meth:`_settle`, except that anything but a broker failure quarantines this entry
        alone instead of stopping the batch."""
        try:
            return self._settle(claim, producer, sent_at_ms, sent)
        except BrokerUnavailableError:
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
            entry = _entry(claim.definition)
        except EntryError as error:
            logger.error("periodiq: entry %r quarantined: %s", claim.name, error)
            return Settlement(claim.id, claim.name, claim.version, claim.inc, quarantine=str(error))
        if claim.rebuilt:
            nominal = _recovered_tick(entry, claim)
            if nominal is None:
                return self._rebuilt(entry, claim)
            logger.warning(
                "periodiq: entry %r had no readable state; rebuilt from its definition at "
                "tick %s", entry.name, tick_text(nominal),
            )  # fmt: skip
            claim = replace(claim, nominal_ms=nominal)
        plan = plan_tick(
            entry,
            from_ms(claim.nominal_ms),
            # a tick claimed ahead is decided as of its own instant
            from_ms(max(claim.claimed_ms, claim.nominal_ms)),
            running=claim.running,
            queued=claim.queued,
            prefix=self.settings.key_prefix,
            catchup_cap=self.settings.catchup_cap,
            default_grace=self.settings.default_grace,
            sent_at=from_ms(sent_at_ms),
            previous=None if claim.prev_ms is None else from_ms(claim.prev_ms),
            runs=claim.runs,
            owed=claim.owed,
            taken=claim.taken > 0,
        )
        for tick in plan.publish:
            self._publisher.send(entry, tick, producer)
            sent.append((entry.name, tick))
        return self._accounting(plan, claim, sent_at_ms)

    def _rebuilt(self, entry: Entry, claim: Claim) -> Settlement:
        """The settlement of an entry whose state was missing and whose due instant is no
        tick of its schedule: its next tick computed afresh from the claim's clock."""
        upcoming = next_tick(entry, entry.parsed_schedule(), from_ms(claim.claimed_ms))
        following = "none" if upcoming is None else tick_text(to_ms(upcoming[0]))
        logger.warning(
            "periodiq: entry %r had no readable state; rebuilt from its definition, next tick %s",
            entry.name, following,
        )  # fmt: skip
        event = EventRow("rebuilt", None, "-", note=_REBUILT)
        next_ms = due_ms = None
        if upcoming is not None:
            next_ms, due_ms = to_ms(upcoming[0]), to_ms(upcoming[1])
        return Settlement(
            claim.id, claim.name, claim.version, claim.inc, next_ms, due_ms,
            counts={}, events=(event,),
        )  # fmt: skip

    def _accounting(self, plan: Plan, claim: Claim, sent_at_ms: int) -> Settlement:
        counts: dict[str, int] = {}
        events: list[EventRow] = []
        publish = plan.publish
        for tick in publish:  # "" task id: the one the tick derives
            events.append(EventRow("enqueued", to_ms(tick.nominal), "", tick.missed))
        late = runs = queued = last_tick = last_enqueued = None
        if publish:
            counts["enqueued"] = len(publish)
            runs = len(publish)  # what max_runs counts
            # due -> published; the claimed tick is due at its jittered instant
            late = tuple(sent_at_ms - (claim.due_ms if to_ms(tick.nominal) == claim.nominal_ms
                                       else to_ms(tick.nominal)) for tick in publish)  # fmt: skip
            last = publish[-1]
            queued = (last.task_id, _queued_ttl(last, sent_at_ms))
            last_enqueued, last_tick = claim.claimed_ms, to_ms(last.nominal)
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
                    if plan.owed else "too late to keep its place"
                )  # fmt: skip
            if note is not None:
                events[-1] = replace(events[-1], note=note)
            logger.info("periodiq: entry %r: %d ticks %s", claim.name, total, reason)
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

    @staticmethod
    def _log_sent(sent: list[tuple[str, Tick]]) -> None:
        """One INFO line per tick sent, or, for a pass that sent many, DEBUG lines and one
        INFO summary, so a beat with many entries does not flood its log."""
        if not sent:
            return
        each = logging.INFO if len(sent) <= _LOG_EACH else logging.DEBUG
        if logger.isEnabledFor(each):
            for name, tick in sent:
                logger.log(
                    each, "periodiq: entry %r tick %s sent as %s (stands for %d)",
                    name, tick_text(to_ms(tick.nominal)), tick.task_id, tick.missed,
                )  # fmt: skip
        if each == logging.DEBUG:
            logger.info(
                "periodiq: sent %d ticks of %d entries (ticks %s to %s)",
                len(sent), len({name for name, _ in sent}),
                tick_text(min(to_ms(tick.nominal) for _, tick in sent)),
                tick_text(max(to_ms(tick.nominal) for _, tick in sent)),
            )  # fmt: skip

    def fire_events(self, event: str, done: set[str] | None = None) -> list[str]:
        """Publish every enabled, unpaused ``@reboot``/``@shutdown`` entry not in ``done``.

        Each name sent is added to ``done`` at once, so after a broker failure a
        second call sends only the rest. An entry whose message cannot be encoded is
        logged and left out. Returns the names sent by this call.

        Raises:
            BrokerUnavailableError: the broker failed.
            redis.RedisError: the schedule's Redis failed.
        """
        done = set() if done is None else done
        fired = []
        now_ms = self.store.now_ms()
        for stored in self.store.load(self.store.event_entries(event)):
            entry = stored.entry
            if entry is None or stored.invalid or stored.paused or not entry.enabled:
                continue
            schedule = entry.parsed_schedule()
            if entry.name in done or not isinstance(schedule, EventSchedule):
                continue
            if schedule.event != event:
                continue
            now = from_ms(now_ms)
            tick = Tick(
                nominal=now,
                missed=1,
                interval=0.0,
                gap_before=0.0,
                expires=now + timedelta(hours=1),
                soft_time_limit=None,
                time_limit=None,
                task_id=task_id_for(self.settings.key_prefix, entry.name, now_ms),
            )
            try:
                send(self.app, entry, tick)
            except MessageError as error:  # its own: the others are sent
                logger.error("periodiq: entry %r not sent on @%s: %s", entry.name, event, error)
                continue
            done.add(entry.name)
            self.store.published(entry.name, "enqueued", tick.task_id, now_ms, f"@{event}")
            logger.info(
                "periodiq: entry %r tick %s sent on @%s as %s",
                entry.name, tick_text(now_ms), event, tick.task_id,
            )  # fmt: skip
            fired.append(entry.name)
        return fired


class _LeaseLostError(Exception):
    """Claims may have been taken over by another beat: they must not be sent."""


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
