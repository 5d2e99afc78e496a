"""A pass that outlasts its claims' lease sends each of its ticks once.

A beat alive, its heartbeat holding, but one pass slow: a reply from the schedule's
Redis (a chunk's settlements) comes 1.5 s late, longer than the claims' lease (1 s).
The claims are still the beat's own (its heartbeat held), so it goes on sending; but a
claim call it makes meanwhile (the next pass's claims, sent while the last chunk goes
out) must not hand it back its own claims whose lease ran out in Redis, to be sent a
second time in the next pass.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.store.scripts import script_source
from tests.processes import wait_for
from tests.proxy import Proxy

COUNT = 3000
LEASE = 1.0


def _queued(broker_url: str) -> Counter[str]:
    """Per task id, how many messages of it wait in the broker's default queue."""
    client = redis.Redis.from_url(broker_url)
    try:
        return Counter(json.loads(raw)["headers"]["id"] for raw in client.lrange("celery", 0, -1))
    finally:
        client.close()


def test_a_pass_that_outlasts_its_lease_sends_each_tick_once(
    redis_server: LocalRedis, broker_url: str
) -> None:
    with Proxy(redis_server.port) as proxy:
        app = Celery("slow", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = proxy.url
        app.conf.periodiq_claim_lease = LEASE
        app.conf.periodiq_batch_size = 2000  # a pass of 2,000 claims: 8 chunks
        app.conf.periodiq_stage_min = COUNT + 1  # the usual path: sent at the instant
        api = periodiq(app)
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        api.add_many(
            {"name": f"e-{n:04d}", "task": "proj.t", "every": 3600, "start_at": start}
            for n in range(COUNT)
        )
        # its heartbeat held throughout (a beat's own, in a thread, tells it so)
        beat = Dispatcher(app, api.store, "beat-a", covered=lambda since, now: True)
        ack = hashlib.sha1(script_source("ack").encode()).hexdigest().encode()
        wait_for(lambda: datetime.now(UTC) >= start, 10, "the instant")
        proxy.hold_next(ack, 1.5 * LEASE)  # the first chunk's settlements, late
        first = beat.dispatch()
        assert proxy.holding.is_set(), "no settlement was held"
        assert first.claimed == 2000
        assert first.full
        for _ in range(4):  # the rest, and whatever a claim handed back
            beat.dispatch()
        queued = _queued(broker_url)
    twice = {task_id: n for task_id, n in queued.items() if n > 1}
    assert not twice, f"{len(twice)} of {len(queued)} ticks sent more than once"
    assert len(queued) == COUNT
