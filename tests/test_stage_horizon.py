"""How far ahead a beat claims a burst to stage it: the whole burst, though the ticks it
claims leave the due sets it counts.

Real Redis (the schedule), the horizon's clock injected; ticks claimed with claim.lua as
a beat claims them.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import NamedTuple

from celery_periodiq.beat.stage_horizon import Horizon
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.store import Store
from tests.test_partitions import Clock
from tests.test_staging import burst, staging_app


class Burst(NamedTuple):
    store: Store
    horizon: Horizon
    clock: Clock
    parts: list[Partition]
    instant_ms: float
    now_ms: float
    first: int
    """The horizon counted at ``now_ms``."""


def counted(redis_url: str, broker_url: str, count: int) -> Burst:
    """``count`` ticks due 1 to 2 s ahead (within the least horizon, 2 s), 100 of them
    needed for staging to pay, and a beat's horizon counted once."""
    _, api = staging_app(redis_url, broker_url, periodiq_stage_min=100)
    start = burst(api, count, 2)
    clock, store = Clock(), api.store
    horizon = Horizon(store, store.settings, clock=clock)
    parts, now_ms = store.keys.all(), time.time() * 1000
    first = horizon.ms(parts, now_ms)
    return Burst(store, horizon, clock, parts, start.timestamp() * 1000, now_ms, first)


def test_a_burst_is_claimed_ahead_whole_though_its_claimed_ticks_leave_the_count(
    redis_url: str, broker_url: str
) -> None:
    # 150 ticks due at one instant: once a beat has claimed two thirds, fewer than 100
    # are left in the due sets. The horizon fell to 0 then, and the rest were sent the
    # usual way after the release (168 of 100,000 with two beats in bench/beat.py
    # --scenario boundary).
    store, horizon, clock, parts, instant_ms, now_ms, first = counted(redis_url, broker_url, 150)
    assert now_ms + first >= instant_ms, "the burst is within the horizon"

    claimed = store.scripts.claim_many(parts, "beat-a", 6, 10_000, horizon_ms=first)
    left = 150 - sum(len(batch.claims) for batch in claimed)
    assert 0 < left < 100, f"{left} left: the test needs fewer than stage_min left"

    clock.now += 1.5  # the due sets are counted again, 100 ms later on the Redis clock
    later_ms = now_ms + 100
    assert later_ms + horizon.ms(parts, later_ms) >= instant_ms, "the rest is claimed ahead too"


def test_with_no_burst_nothing_is_claimed_ahead(redis_url: str, broker_url: str) -> None:
    _, api = staging_app(redis_url, broker_url, periodiq_stage_min=100)
    burst(api, 50, 2)
    store = api.store
    horizon = Horizon(store, store.settings, clock=Clock())
    assert horizon.ms(store.keys.all(), datetime.now(UTC).timestamp() * 1000) == 0


def test_once_the_whole_burst_is_claimed_the_horizon_lets_go(
    redis_url: str, broker_url: str
) -> None:
    # claiming ahead costs passes (partitions with claims in flight are polled): a beat
    # that has claimed a whole burst goes back to what the count says until its instant
    store, horizon, clock, parts, _, now_ms, first = counted(redis_url, broker_url, 150)
    assert first > 0

    store.scripts.claim_many(parts, "beat-a", 500, 10_000, horizon_ms=first)
    assert store.due_by(parts, int(now_ms + first)) == 0

    clock.now += 1.5
    assert horizon.ms(parts, now_ms + 100) == 0
