"""One beat pass: claim due ticks, publish their messages in chunks, settle the claims.

Two Redis round trips per batch (claim.lua, ack.lua) however many entries
are due, and one broker producer for the whole batch. Claims go out in due order,
in chunks that each reach the broker in one round trip; before each message and
each flush the claims' lease is checked, so a beat stopped meanwhile sends nothing
another beat may have taken over. Deciding each claim is :mod:`.settle`'s, writing
the settlements :mod:`.ledger`'s, choosing the partitions :mod:`.partitions`'.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery

from celery_periodiq.beat.backlog import Backlog
from celery_periodiq.beat.broker_link import BrokerLink
from celery_periodiq.beat.collector import collector_paused
from celery_periodiq.beat.fire import fire_events
from celery_periodiq.beat.ledger import Ledger
from celery_periodiq.beat.partitions import HORIZON_MS, Claimed, Partitions, received
from celery_periodiq.beat.pauses import end_pauses
from celery_periodiq.beat.publish import Publisher
from celery_periodiq.beat.sent_log import log_sent
from celery_periodiq.beat.settle import Settler
from celery_periodiq.beat.staging import Stager
from celery_periodiq.clock import SAFE_SHARE, elapsed, sleep_until
from celery_periodiq.config import Settings
from celery_periodiq.errors import BrokerRefusedError, BrokerUnavailableError
from celery_periodiq.model.plan import Tick
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.beat_scripts import Claim, ClaimBatch
from celery_periodiq.store.store import Store

__all__ = ["Dispatcher", "Pass"]

logger = logging.getLogger("celery_periodiq.dispatch")

# Claims published per broker round trip: the first chunk small, so that the first
# message of a burst does not wait long, then twice as many each time up to the most.
_PUBLISH_CHUNK = 25
_PUBLISH_CHUNK_MOST = 400
_SETTLE_CHUNK = 2000  # settlements of staged claims sent at once


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
        return max((self.wake_ms - self.clock_ms - HORIZON_MS) / 1000 - passed, 0.0)


class Dispatcher:
    """Claims, publishes and settles ticks for one beat instance."""

    def __init__(
        self,
        app: Celery,
        store: Store,
        beat_id: str,
        on_vanished: Callable[[list[str]], None] | None = None,
        covered: Callable[[float, float], bool] | None = None,
        link: BrokerLink | None = None,
        on_cut_off: Callable[[str], None] | None = None,
    ) -> None:
        """``covered(since, now)``: whether this beat's heartbeat held without a gap from
        ``since`` to ``now`` (:meth:`Heartbeat.covers`); without it, a claim is this beat's
        for its own lease only. ``link``: the beat's connection to its broker;
        ``on_cut_off(why)``: called when publishing fails for the broker's sake
        (:meth:`Heartbeat.withdraw`); without it, the claims stay this beat's."""
        self.app, self.store = app, store
        self.settings: Settings = store.settings
        self._publisher = Publisher(app)
        self._link = link or BrokerLink(app, self.settings.claim_lease)
        self._on_cut_off, self.beat_id = on_cut_off, beat_id
        self._covered = covered
        self._injected = False
        """The pass runs on an injected clock (tests)."""
        self._on_vanished = on_vanished
        self.ticks_claimed = 0
        self.last_tick_ms: int | None = None
        self._broker_down = False
        self._prefetched: tuple[Callable[[], list[ClaimBatch]], float] | None = None
        """Claims sent during the last pass, and when: read by the next pass."""
        self._refill: Callable[[], None] | None = None
        self._settler = Settler(self._publisher, self.settings, store)
        self._tracing = self._settler.tracing
        self._stager = Stager(store, self._publisher, self._settler, self._link.advanced)
        self._backlog = Backlog(self.settings.claim_lease)
        self._ledger = Ledger(store, beat_id)
        self._partitions = Partitions(store.keys, self.settings, beat_id)

    def touch(self, name: str | None = None) -> None:
        """Something changed: claim ``name``'s partition (every partition when None) in the
        next pass, whatever it was known to have due."""
        self._settler.windows.touched(name)
        self._partitions.touch(name)

    def watch(self, beats: list[str]) -> None:
        """The live beats changed (or were read again): take this beat's share of the
        partitions, two beats to each (:mod:`celery_periodiq.model.ring`)."""
        self._partitions.watch(beats)

    @property
    def watched(self) -> int:
        """How many partitions this beat watches."""
        return self._partitions.watched

    def mine(self) -> list[Partition]:
        """The partitions the ring gives this beat (all of them until it is known)."""
        return self._partitions.mine()

    def dispatch(self, now_ms: int | None = None) -> Pass:
        """Claim the due ticks of every partition that has some, publish them, settle them
        (with Python's cyclic garbage collector paused: :mod:`.collector`).

        ``now_ms`` replaces the Redis clock (tests drive timelines with it).

        Raises:
            redis.RedisError: the schedule's Redis failed (nothing published is lost:
                unsettled claims are settled in the next pass, or taken over).
        """
        with collector_paused():
            return self._pass(now_ms)

    def _pass(self, now_ms: int | None) -> Pass:
        settings = self.settings
        started = time.time_ns()  # a traced pass's span begins here (tick_tracing.py)
        self._injected = now_ms is not None
        self._ledger.write_pending()
        self._settler.windows.refresh(self.store)
        partitions = self._partitions
        lease_ms = int(settings.claim_lease * 1000)
        horizon = 0 if now_ms is not None else HORIZON_MS
        ahead = (
            0
            if now_ms is not None
            else self._stager.horizon_ms(partitions.mine(), partitions.estimate())
        )
        batches: list[Claimed] = []
        claimed: list[Claimed] = []
        if self._prefetched is not None:  # sent during the last pass
            read, sent_at = self._prefetched
            self._prefetched = None
            claimed = received(read(), sent_at)
        # Aging the Redis clock reading from before the call wakes us early, never late.
        claimed_at = elapsed()
        taken = {got.batch.partition for got in claimed}
        due = [
            part for part in partitions.due(now_ms, max(horizon, ahead)) if part.index not in taken
        ]
        # about periodiq_batch_size claims in a pass, however many partitions are due
        share = max(
            settings.batch_size // max(len(due) + len(taken), 1), min(settings.batch_size, 32)
        )
        if due:
            more = self.store.scripts.claim_many(
                due, self.beat_id, share, lease_ms, now_ms, max(horizon, ahead)
            )
            claimed += received(more, claimed_at)
        for got in claimed:
            partitions.claimed(got)
            self._report(got.batch)
            batches.append(got)
        full = [got.batch.partition for got in batches if len(got.batch.claims) >= share]
        # More is due in full partitions: their next claims are sent while the last
        # chunk of these is published (not with an injected clock: tests step by step).
        self._refill = None
        if now_ms is None and full:
            parts = [self.store.keys.part(index) for index in full]
            self._refill = functools.partial(self._prefetch, parts, share, lease_ms)
        count = sum(len(got.batch.claims) for got in batches)
        complete = True
        if count or self._backlog or self._stager.due(partitions.estimate() + HORIZON_MS):
            publish = functools.partial(self._publish_batches, batches, bool(full))
            complete = self._tracing.beat_pass(self.beat_id, count, started, publish)
        else:  # the last pass's settlements, if it left them to this one
            self.settle_sent()
        # staged messages wake the beat at their instant; claims ahead, a horizon before
        wake = min(partitions.next_wake(max(ahead - HORIZON_MS, 0)), self._stager.next_at)
        clock, measured = partitions.clock
        return Pass(
            claimed=count,
            full=bool(full or self._backlog),
            complete=complete,
            wake_ms=None if math.isinf(wake) else wake,
            clock_ms=clock,
            measured=measured,
        )

    def _publish_batches(self, batches: list[Claimed], more_due: bool) -> bool:
        """Publish every claimed tick, then settle each partition's claims (and of a
        released burst's, one chunk while ``more_due``: :mod:`.backlog`)."""
        self.ticks_claimed += sum(len(got.batch.claims) for got in batches)
        if batches:
            self.last_tick_ms = max(got.batch.now_ms for got in batches)
        settlements: dict[int, list[Settlement]] = {}
        sent: list[tuple[str, Tick]] = []
        complete = False
        try:
            with self._link.producer() as producer:
                batches, ahead, released = self._staged(batches, producer)
                self._backlog.add(released)
                try:
                    complete = self._publish_all(batches, producer, settlements, sent)
                finally:  # what was released is settled after what goes out now
                    self._write(self._backlog.take(more_due), settlements)
                if ahead:  # planned and rendered now, staged for their instant
                    self._stage(ahead, producer, settlements)
            if self._broker_down and sent:  # a pass that sent nothing proves nothing
                logger.info("periodiq: broker reachable again")
                self._broker_down = False
        except BrokerUnavailableError as error:
            # Only the broker's connection or channel failing gets here (the Publisher
            # tells them from a message's own failure, which quarantines its entry); a
            # failure of the schedule's Redis (claims, settlements) goes up as what it is.
            # A broker that refused a publish (its channel failed) is still reached: the
            # beat keeps claiming; one that does not answer cuts the beat off.
            if self._on_cut_off is not None and not isinstance(error, BrokerRefusedError):
                self._on_cut_off(str(error))
            elif not self._broker_down:
                left = sum(len(got.batch.claims) for got in batches) - sum(
                    map(len, settlements.values())
                )
                logger.error("periodiq: %s; %d claimed ticks stay in flight", error, left)
            self._broker_down = True
        finally:
            log_sent(sent)
            # a burst's next pass comes at once: its first chunk's send waits for these
            if self._injected or not (more_due and complete):
                self.settle_sent()
            self._partitions.settled(settlements)
        return complete

    def settle_sent(self) -> None:
        """Wait for the settlements sent, and write those not written yet (:mod:`.ledger`)."""
        self._ledger.wait()
        self._ledger.write_pending()

    def _staged(
        self, batches: list[Claimed], producer: Any
    ) -> tuple[list[Claimed], list[tuple[Claim, Claimed]], list[tuple[int, Settlement]]]:
        """Release what is staged for now (any beat's), and split ``batches``: the claims to
        send now (with this beat's staged claims that were not released), those ahead, to
        stage (:mod:`.staging`), and the settlements of what was released (a burst's: they
        wait until what is to be sent now has gone out)."""
        if self._injected:  # tests step by step: nothing is claimed ahead
            return batches, [], []
        return self._stager.sort(batches, producer, sleep_until)

    def _stage(
        self, ahead: list[tuple[Claim, Claimed]], producer: Any, into: dict[int, list[Settlement]]
    ) -> None:
        check = functools.partial(self._check_lease, min(got.claimed_at for _, got in ahead))
        try:
            self._write(self._stager.stage(ahead, producer, check), into)
        except _LeaseLostError as lost:
            logger.warning("periodiq: %d claimed ticks not staged: %s", len(ahead), lost)

    def _write(
        self, written: list[tuple[int, Settlement]], into: dict[int, list[Settlement]]
    ) -> None:
        """Send ``written`` (a burst's: in chunks, each a step the broker watchdog sees)."""
        for start in range(0, len(written), _SETTLE_CHUNK):
            chunk: dict[int, list[Settlement]] = {}
            for index, settlement in written[start : start + _SETTLE_CHUNK]:
                chunk.setdefault(index, []).append(settlement)
                into.setdefault(index, []).append(settlement)
            self._ledger.send(chunk)
            self._link.advanced()

    def _report(self, batch: ClaimBatch) -> None:
        if batch.ended:
            ahead = int(self.settings.stage_horizon * 1000) + HORIZON_MS
            end_pauses(self.store, batch.ended, batch.now_ms + ahead, self.beat_id)
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
        batches: list[Claimed],
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
        oldest = min((got.claimed_at for got in batches), default=0.0)
        start, size = 0, _PUBLISH_CHUNK
        while start < len(claims):
            chunk = claims[start : start + size]
            if start + 3 * size >= len(claims) and self._refill is not None:
                # Redis claims the next pass while the last two chunks go out; not once this
                # pass's claims may be past their lease there: the claim would hand them
                # back to this beat (its own, run out) while it sends them, to send again
                if elapsed() - oldest < self.settings.claim_lease * SAFE_SHARE:
                    self._refill()
                self._refill = None
            try:
                self._publish_chunk(chunk, producer, settlements, sent)
            except _LeaseLostError as lost:
                logger.warning(
                    "periodiq: %d claimed ticks not sent: %s; they stay in flight, for this "
                    "beat's next pass if they are still its own, else for the beat that took "
                    "them over",
                    len(claims) - start,
                    lost,
                )
                return False
            start += size
            size = min(size * 2, _PUBLISH_CHUNK_MOST)  # the first few go out soonest
        return True

    def _publish_chunk(
        self,
        chunk: list[tuple[Claim, Claimed]],
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
        settle = self._settler.settle
        flushed: list[tuple[int, Settlement]] = []
        built: list[tuple[str, Tick]] = []
        """Ticks whose messages are buffered: sent once the flush went through."""
        try:
            with self._publisher.batch(producer) as flush:
                pending: list[tuple[int, Settlement]] = []

                def send_now() -> None:
                    self._check_lease(oldest)
                    flush()
                    self._link.advanced()
                    flushed.extend(pending)
                    pending.clear()
                    sent.extend(built)
                    built.clear()

                for claim, got in chunk:
                    if claim.due_ms > got.clock:  # claimed ahead: send it when it is due
                        send_now()
                        # from after the claim's reply: never sent before it is due
                        sleep_until(got.received_at + (claim.due_ms - got.clock) / 1000)
                    now = elapsed()
                    if now - oldest >= safe:  # past the claims' own lease: ask the heartbeat
                        self._check_lease(oldest)
                    # the Redis clock now, from the claim's reading of it (injected: its own)
                    sent_at = (
                        got.batch.now_ms
                        if injected
                        else int(got.clock + (now - got.received_at) * 1000)
                    )
                    settlement = settle(claim, producer, sent_at, built)
                    pending.append((got.batch.partition, settlement))
                send_now()
        finally:
            written: dict[int, list[Settlement]] = {}
            for index, settlement in flushed:
                settlements.setdefault(index, []).append(settlement)
                written.setdefault(index, []).append(settlement)
            if written:
                self._ledger.send(written)

    def _prefetch(self, parts: list[Partition], share: int, lease_ms: int) -> None:
        """Send the next pass's claims of ``parts``; the next pass reads them."""
        sent_at = elapsed()
        try:
            read = self.store.scripts.claim_later(parts, self.beat_id, share, lease_ms, HORIZON_MS)
        except redis.RedisError:  # the next pass claims them the usual way, or fails
            return
        self._prefetched = (read, sent_at)

    def _check_lease(self, claimed_at: float) -> None:
        """Raise :class:`_LeaseLostError` unless claims sent at ``claimed_at`` (:func:`elapsed`)
        are surely still this beat's: within their own lease, or within a heartbeat that
        held without a gap since before that lease ran out (other beats take a claim
        over only once both have run out)."""
        if self._link.cut_off_since is not None or claimed_at <= self._link.last_cut_off:
            raise _LeaseLostError("this beat gave its claims up: it could not reach its broker")
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

    def fire_events(self, event: str, done: set[str] | None = None) -> list[str]:
        """Publish the ``@reboot``/``@shutdown`` entries not in ``done`` (see
        :func:`celery_periodiq.beat.fire.fire_events`); returns the names sent."""
        return fire_events(self.app, self.store, event, done)


class _LeaseLostError(Exception):
    """Claims may have been taken over by another beat: they must not be sent."""
