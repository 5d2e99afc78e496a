"""The top of the hour: 100,000 ticks due at one instant, two real beats staging them.

Asserts what must hold whatever the machine's speed: no message in the queue before
the instant, each tick's message once, none missing. How fast they arrive is measured
by ``bench/beat.py --scenario boundary``, not here.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.headers import HEADER_TICK
from tests.processes import api_for, cluster, wait_for

DUE = 100_000


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_100000_ticks_due_at_one_instant_are_queued_once_and_none_before_it(
    tmp_path: Path, redis_server: LocalRedis, redis_url: str, broker_url: str
) -> None:
    api = api_for(redis_url, broker_url)
    written = datetime.now(UTC)
    # a minute ahead: storing takes 5-15 s, and the beats claim a burst this size up to
    # periodiq_stage_horizon (60 s) ahead, so they stage from their start
    instant = written.replace(microsecond=0) + timedelta(seconds=60)
    api.add_many(
        {"name": f"b{n:06d}", "task": "proj.noop", "every": 3600, "start_at": instant}
        for n in range(DUE)
    )
    stored = datetime.now(UTC)
    assert stored < instant - timedelta(seconds=10), f"storing took until {stored}: too late"
    broker = redis.Redis.from_url(broker_url)
    instant_ms = int(instant.timestamp() * 1000)
    before: list[int] = []
    watching = threading.Event()

    def watch() -> None:  # the queue's length until the instant (this host's clock is Redis's)
        while time.time() * 1000 < instant_ms - 2 and not watching.is_set():
            before.append(int(broker.llen("celery")))
            watching.wait(0.002)

    with cluster(tmp_path, redis_url, broker_url) as running:
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        beats = [running.beat("a"), running.beat("b")]
        wait_for(lambda: broker.llen("celery") >= DUE, 240, "every tick's message")
        watching.set()
        watcher.join(5)
        logs = "".join(beat.output() for beat in beats)

    messages = []
    for start in range(0, int(broker.llen("celery")), 10_000):
        messages += [json.loads(raw) for raw in broker.lrange("celery", start, start + 9_999)]
    burst = [m for m in messages if m["headers"].get(HEADER_TICK) == instant_ms]
    ids = [m["headers"]["id"] for m in burst]

    assert before  # the queue was watched until the instant
    assert max(before) == 0  # nothing in the queue before the instant
    assert len(ids) == DUE
    assert len(set(ids)) == DUE  # each tick once
    assert "released" in logs  # they went through staging
