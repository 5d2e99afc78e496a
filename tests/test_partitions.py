"""When a beat claims a partition again: after the ring moves, a partition waiting on
another beat's claim is polled, since that beat may have stopped claiming it.

Partitions is the beat's own bookkeeping (no Redis in it): its replies are built here as
claim.lua returns them, and its clock is injected.
"""

from __future__ import annotations

from celery import Celery

from celery_periodiq.beat.partitions import HORIZON_MS, POLL_MS, Claimed, Partitions
from celery_periodiq.config import Settings
from celery_periodiq.model import ring
from celery_periodiq.store.beat_scripts import ClaimBatch

LEASE = 2.0
NOW_MS = 1_800_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def partitions(clock: Clock) -> Partitions:
    app = Celery("partitions", set_as_current=False)
    app.conf.update(periodiq_redis_url="redis://127.0.0.1:1/0", periodiq_claim_lease=LEASE)
    settings = Settings.from_app(app)
    return Partitions(settings.keys, settings, "b", clock=clock)


def held_elsewhere(parts: Partitions, index: int, clock: Clock, now_ms: int) -> None:
    """``parts`` claimed partition ``index`` at ``now_ms``: nothing due, another beat's
    claim in flight until a lease from now."""
    batch = ClaimBatch(index, now_ms, 0, None, now_ms + int(LEASE * 1000), [])
    parts.claimed(Claimed(batch, clock.now, clock.now, float(now_ms)))


def due_now(parts: Partitions, now_ms: int) -> set[int]:
    return {part.index for part in parts.due(now_ms) if part.index in set(watched(parts))}


def watched(parts: Partitions) -> list[int]:
    return [part.index for part in parts.mine()]


def test_a_partition_held_by_another_beat_waits_for_its_claim_while_the_ring_stands() -> None:
    clock = Clock()
    parts = partitions(clock)
    parts.watch(["a", "b"])
    clock.now += 10 * LEASE  # the ring has stood for a while
    index = watched(parts)[0]
    held_elsewhere(parts, index, clock, NOW_MS)

    assert index not in due_now(parts, NOW_MS + 500)
    assert index in due_now(parts, NOW_MS + int(LEASE * 1000))


def test_after_a_ring_move_a_partition_held_elsewhere_is_claimed_and_polled_for_a_lease() -> None:
    # A beat joining moves partitions: the beat that held a partition's claims may have
    # left it, and nobody claims its next tick until the claim in flight runs out, a
    # lease late (seen in CI: a 1 s entry's second tick missed when a third beat joined).
    clock = Clock()
    parts = partitions(clock)
    parts.watch(["a", "b"])
    clock.now += 10 * LEASE
    keeps = sorted(ring.watched("b", ["a", "b", "c"], parts.keys.partitions))
    index = keeps[0]
    held_elsewhere(parts, index, clock, NOW_MS)
    assert index not in due_now(parts, NOW_MS + 100)

    parts.watch(["a", "b", "c"])

    assert index in due_now(parts, NOW_MS + 100), "claimed in the next pass"
    held_elsewhere(parts, index, clock, NOW_MS + 100)
    # (due() takes what is due within HORIZON_MS: claimed that much ahead)
    assert index not in due_now(parts, NOW_MS + 100 + POLL_MS - HORIZON_MS - 1)
    assert index in due_now(parts, NOW_MS + 100 + POLL_MS - HORIZON_MS), "polled"

    clock.now += LEASE  # a lease after the move: back to waiting for the claim
    held_elsewhere(parts, index, clock, NOW_MS + 2100)
    assert index not in due_now(parts, NOW_MS + 2100 + POLL_MS)
