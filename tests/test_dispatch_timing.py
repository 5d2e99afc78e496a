"""A tick claimed ahead of its due instant is sent at that instant, never before.

The beat claims what is due within a few milliseconds and sends each tick when it is
due, by the Redis clock in the claim's reply. Real clock, real Redis, reached through
a proxy that holds each request 4 ms (so a claim runs well after it was sent): a
thread pops the broker's list as messages arrive and stamps each; no message may
arrive before the instant in its ``periodiq_tick`` header (the same host clock as
Redis's TIME).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.headers import HEADER_TICK
from tests.proxy import Proxy


def test_ticks_claimed_ahead_are_never_sent_before_they_are_due(
    redis_server: LocalRedis, broker_url: str
) -> None:
    with Proxy(redis_server.port, delay=0.004) as slow:
        sent_ahead(slow.url, broker_url)


def sent_ahead(redis_url: str, broker_url: str) -> None:
    app = Celery("timing", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    count = 300
    # one tick due every 0.2 ms over 60 ms: each pass claims some of them ahead
    api.add_many(
        {"name": f"e-{n}", "task": "proj.t", "every": 3600,
         "start_at": start + timedelta(microseconds=200 * n)}
        for n in range(count)
    )  # fmt: skip
    arrivals: list[tuple[float, dict[str, object]]] = []
    listener = redis.Redis.from_url(broker_url)

    def listen() -> None:
        while len(arrivals) < count:
            popped = listener.brpop(["celery"], timeout=5)
            if popped is None:
                return
            arrivals.append((time.time() * 1000, json.loads(popped[1])))

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    dispatcher = Dispatcher(app, api.store, "beat")
    deadline = time.monotonic() + 10
    while dispatcher.ticks_claimed < count and time.monotonic() < deadline:
        done = dispatcher.dispatch()
        wait = done.seconds_until_next()
        if not done.full and wait:
            threading.Event().wait(min(wait, 0.5))
    thread.join(10)

    assert len(arrivals) == count
    early = [
        (arrived, message["headers"][HEADER_TICK])
        for arrived, message in arrivals
        if arrived < message["headers"][HEADER_TICK]
    ]  # type: ignore[index,operator]
    listener.close()
    api.store.client.close()
    assert early == []
