"""What the two versions of one app in a rolling deploy share (``deploy_old``,
``deploy_new``): one Celery main name, "deploy", so that both keep one schedule (the
prefix ``periodiq:deploy``), and a task that records its runs.

Configured from the environment like ``periodiq_app``: TEST_BROKER_URL,
TEST_REDIS_URL, TEST_LEASE (claim lease, s). Every run records itself in the Redis
list "runs" of TEST_REDIS_URL.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
from celery import Celery


def make_app(beat_schedule: dict[str, Any]) -> Celery:
    """The app of one version: its ``beat_schedule`` and the ``record`` task."""
    app = Celery("deploy", broker=os.environ["TEST_BROKER_URL"])
    app.conf.beat_scheduler = "celery_periodiq:Scheduler"
    app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
    app.conf.periodiq_claim_lease = float(os.environ.get("TEST_LEASE", "2"))
    app.conf.beat_max_loop_interval = 5
    app.conf.broker_connection_retry_on_startup = True
    app.conf.worker_prefetch_multiplier = 1
    app.conf.beat_schedule = beat_schedule

    @app.task(bind=True, name="record")
    def record(self: Any, *args: Any) -> None:
        """Record that this run happened, with the arguments its definition gave."""
        save(self.request, list(args))

    return app


_results = redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)


def save(request: Any, args: list[Any]) -> None:
    """Record a run in the list "runs"."""
    run = {
        "entry": getattr(request, "periodiq_entry", None),
        "tick": getattr(request, "periodiq_tick", None),
        "args": args,
        "at": time.time(),
    }
    _results.rpush("runs", json.dumps(run))
