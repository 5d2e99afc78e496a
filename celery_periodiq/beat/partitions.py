"""Which partitions a beat's pass claims, and when each of them next has something due.

A beat claims the partitions the ring gives it (:mod:`celery_periodiq.model.ring`, two
beats to each), and all of them in a sweep once per lease, so that claims of beats gone
are taken over whatever the ring says. A partition is claimed only once something in
it may be due (or within :data:`HORIZON_MS`), as its last claim and settlements said.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import NamedTuple

from celery_periodiq.clock import elapsed
from celery_periodiq.config import Settings
from celery_periodiq.model import ring
from celery_periodiq.protocol.keys import Keys, Partition
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.beat_scripts import ClaimBatch

__all__ = ["HORIZON_MS", "Claimed", "Partitions", "received"]

logger = logging.getLogger("celery_periodiq.dispatch")

# Ticks due this soon are claimed and planned ahead, then sent the moment they are
# due, so the claim's round trip is not part of their lateness.
HORIZON_MS = 25

# A beat claiming further ahead (to stage a burst) claims a partition whose next moment
# is a claim in flight running out (nothing there can be had before it) this often.
POLL_MS = 100


class Claimed(NamedTuple):
    """One partition's claims, when the claim was sent and when its reply was read."""

    batch: ClaimBatch
    claimed_at: float
    """``elapsed()`` before the claim was sent: its lease counts from here."""
    received_at: float
    """``elapsed()`` after its reply was read."""
    clock: float
    """The Redis clock (ms) when the last claim of its call ran, before ``received_at``:
    a due instant mapped from these two is never earlier than the real one."""


def received(batches: list[ClaimBatch], claimed_at: float) -> list[Claimed]:
    """The batches of one claim call, read just now."""
    received_at = elapsed()
    clock = max((batch.now_ms + batch.now_us / 1000 for batch in batches), default=0.0)
    return [Claimed(batch, claimed_at, received_at, clock) for batch in batches]


class Partitions:
    """One beat's share of the partitions and each one's next wake-up (thread-safe: the
    heartbeat and the change listener call :meth:`watch` and :meth:`touch`)."""

    def __init__(
        self, keys: Keys, settings: Settings, beat_id: str, clock: Callable[[], float] = elapsed
    ) -> None:
        self.keys = keys
        self.settings = settings
        self.beat_id = beat_id
        self._clock = clock
        """``elapsed()``, or a test's clock."""
        self._wake: dict[int, float] = {}
        """Per partition, the Redis clock (ms) when it next has something due; a partition
        not in it (never claimed, or changed since) is claimed in the next pass."""
        self._rechecking: set[int] = set()
        """The partitions whose next moment is a claim in flight running out (a recheck):
        a beat claiming further ahead than :data:`HORIZON_MS` claims them (all at once)
        at ``_poll_at``, or at their recheck if sooner; it claimed them pass after pass."""
        self._poll_at = -math.inf
        """The Redis clock (ms) of the next claim of the partitions rechecking."""
        self._lock = threading.Lock()
        self.clock = (0.0, 0.0)
        """The last Redis clock reading (ms) and ``elapsed()`` when it was taken."""
        self._watched: frozenset[int] | None = None
        """The partitions the ring gives this beat (None: all, until the ring is known)."""
        self._sweep_at = 0.0
        """``elapsed()`` of the next pass over every partition, watched or not."""
        self._touched: dict[int, float] = {}
        """Per partition, ``elapsed()`` when a change last touched it."""
        self._moved_until = -math.inf
        """``elapsed()`` until which the ring's last move is fresh: a partition waiting on
        a claim in flight is then polled, not left until the claim runs out."""

    def touch(self, name: str | None = None) -> None:
        """Something changed: claim ``name``'s partition (every partition when None) in the
        next pass, whatever it was known to have due."""
        with self._lock:
            now = self._clock()
            if name is None:
                self._wake.clear()
                self._rechecking.clear()
                self._touched = dict.fromkeys(range(self.keys.partitions), now)
            else:
                index = self.keys.partition_of(name)
                self._wake.pop(index, None)
                self._rechecking.discard(index)
                self._touched[index] = now

    def watch(self, beats: list[str]) -> None:
        """The live beats changed (or were read again): take this beat's share of the
        partitions, two beats to each (:mod:`celery_periodiq.model.ring`)."""
        watched = ring.watched(self.beat_id, beats, self.keys.partitions)
        with self._lock:
            if watched != self._watched:
                logger.info(
                    "periodiq: beat %s watches %d of %d partitions (%d live beats)",
                    self.beat_id,
                    len(watched),
                    self.keys.partitions,
                    len(beats),
                )
                # A beat the move took a partition from stops claiming it, and the
                # others watching it wait for a claim in flight to run out: the next
                # tick would go out up to a lease late. So for a lease every partition
                # waiting on a claim in flight is claimed in the next pass and polled.
                self._wake = {
                    index: moment
                    for index, moment in self._wake.items()
                    if (self._watched is None or index in self._watched)
                    and index not in self._rechecking
                }
                self._rechecking.clear()
                self._moved_until = self._clock() + self.settings.claim_lease
            self._watched = watched

    @property
    def watched(self) -> int:
        """How many partitions this beat watches."""
        watched = self._watched
        return self.keys.partitions if watched is None else len(watched)

    def mine(self) -> list[Partition]:
        """The partitions the ring gives this beat (all of them until it is known)."""
        with self._lock:
            return [part for part in self.keys.all() if self._mine(part.index, False)]

    def _mine(self, index: int, sweeping: bool) -> bool:
        watched = self._watched
        return sweeping or watched is None or index in watched

    def due(self, now_ms: int | None, ahead_ms: int = HORIZON_MS) -> list[Partition]:
        """The partitions that may have something due now (or within ``ahead_ms``): of
        those the ring gives this beat, or of all of them in a sweep, which comes once
        per lease so that claims of beats gone are taken over whatever the ring says."""
        clock, measured = self.clock
        if now_ms is not None:
            estimate = float(now_ms)
        else:
            estimate = clock + (self._clock() - measured) * 1000 if measured else math.inf
        sweeping = self._clock() >= self._sweep_at
        if sweeping:
            self._sweep_at = self._clock() + self.settings.claim_lease
        with self._lock:
            return [
                part
                for part in self.keys.all()
                if self._mine(part.index, sweeping)
                and self._wake.get(part.index, -math.inf) <= estimate + ahead_ms
                and (ahead_ms <= HORIZON_MS or self._quiet(part.index) <= estimate + HORIZON_MS)
            ]

    def estimate(self) -> float:
        """The Redis clock now (ms), from the last reading (inf: none yet)."""
        clock, measured = self.clock
        return clock + (self._clock() - measured) * 1000 if measured else math.inf

    def claimed(self, got: Claimed) -> None:
        """A partition's claims came back: its clock reading and when it is next due."""
        batch = got.batch
        self.clock = (batch.now_ms + batch.now_us / 1000, got.claimed_at)
        due, recheck = batch.next_due_ms, batch.next_recheck_ms
        moments = [m for m in (due, recheck) if m is not None]
        with self._lock:
            if self._touched.get(batch.partition, -math.inf) >= got.claimed_at:
                return  # changed after the claim was sent: its reply is out of date
            wake = min(moments, default=math.inf)
            if recheck is not None and (due is None or recheck < due):
                if self._clock() < self._moved_until:
                    wake = min(wake, batch.now_ms + POLL_MS)
                self._rechecking.add(batch.partition)
                self._poll_at = batch.now_ms + POLL_MS
            else:
                self._rechecking.discard(batch.partition)
            self._wake[batch.partition] = wake

    def settled(self, settlements: dict[int, list[Settlement]]) -> None:
        """Settlements were made: their entries' next ticks are due then, at the latest."""
        with self._lock:
            for items in settlements.values():
                for item in items:
                    if item.due_ms is not None:
                        index = self.keys.partition_of(item.name)
                        self._wake[index] = min(self._wake.get(index, math.inf), item.due_ms)
                        self._rechecking.discard(index)

    def _quiet(self, index: int) -> float:
        """The Redis clock (ms) before which a beat claiming ahead does not claim the
        partition (-inf: not rechecking); called with the lock held."""
        if index not in self._rechecking:
            return -math.inf
        return min(self._poll_at, self._wake.get(index, -math.inf) + HORIZON_MS)

    def next_wake(self, ahead_ms: float = 0) -> float:
        """The Redis clock (ms) of the next due tick or claim recheck of this beat's
        partitions (less ``ahead_ms``: claimed that much more ahead), or of the next sweep
        (inf: none known). A partition known quiet until later wakes nobody before then."""
        clock, measured = self.clock
        with self._lock:
            mine = [
                max(moment - ahead_ms, self._quiet(index)) if ahead_ms else moment
                for index, moment in self._wake.items()
                if self._mine(index, False)
            ]
        # wake for the next sweep too (on the Redis clock, from the last reading); a beat
        # claiming ahead wakes for it at its moment, not the horizon early that claims
        # due ticks ahead (it woke pass after pass in that horizon, sweeping at its end)
        sweep = clock + (self._sweep_at - measured) * 1000 if measured else math.inf
        return min([*mine, sweep + (HORIZON_MS if ahead_ms else 0)], default=math.inf)
