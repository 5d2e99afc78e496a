"""A beat's pass runs with Python's cyclic garbage collector paused, and leaves it as it
found it: on after a pass (also one that failed), off in a process that turned it off.

Real Redis servers (schedule and broker), a real Dispatcher; the clock injected.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis
from tests.test_staging import staging_app

START = datetime(2031, 3, 3, 9, 0, tzinfo=UTC)  # ahead of the Redis clock: first due then


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations the collector runs on from this thread's allocations (the
    threshold lowered so that it would run every 10; another thread's, a test's left
    behind, may start one too); the collector's settings restored after."""
    seen: list[int] = []
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    this = threading.get_ident()

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.get_ident() == this:
            seen.append(info["generation"])

    gc.set_threshold(10, 10, 10)
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*threshold)
        (gc.enable if enabled else gc.disable)()


def burst(redis_url: str, broker_url: str, count: int) -> Dispatcher:
    app, api = staging_app(
        redis_url, broker_url, periodiq_stage_horizon=0, periodiq_batch_size=5000
    )  # one pass claims them all
    api.add_many(
        {"name": f"e-{n:04d}", "task": "proj.t", "every": 3600, "start_at": START}
        for n in range(count)
    )
    return Dispatcher(app, api.store, "beat-a")


def test_a_pass_publishing_a_burst_runs_without_the_collector_and_turns_it_back_on(
    redis_url: str, broker_url: str, collections: list[int]
) -> None:
    dispatcher = burst(redis_url, broker_url, 500)
    due_ms = int(START.timestamp() * 1000)
    collections.clear()

    published = dispatcher.dispatch(now_ms=due_ms).claimed
    during = list(collections)
    [] if gc.isenabled() else pytest.fail("the collector was left off after the pass")
    gc.collect(0)

    assert published == 500
    assert redis.Redis.from_url(broker_url).llen("celery") == 500
    # at most at the pause's two edges (the generator it is, made, then ending before
    # the pass returns); 1,899 times without the pause
    assert len(during) <= 2, f"the collector ran {len(during)} times inside the pass"
    assert collections, "the collector runs again after the pass"


def test_a_process_that_turned_the_collector_off_keeps_it_off(
    redis_url: str, broker_url: str, collections: list[int]
) -> None:
    dispatcher = burst(redis_url, broker_url, 20)
    gc.disable()

    published = dispatcher.dispatch(now_ms=int(START.timestamp() * 1000)).claimed

    assert published == 20
    assert not gc.isenabled()


def test_a_pass_that_fails_on_redis_turns_the_collector_back_on(
    redis_server: LocalRedis, broker_url: str, collections: list[int]
) -> None:
    dispatcher = burst(redis_server.url, broker_url, 20)
    redis_server.stop()

    with pytest.raises(redis.RedisError):
        dispatcher.dispatch(now_ms=int(START.timestamp() * 1000))

    assert gc.isenabled()
