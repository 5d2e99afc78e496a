"""One of several Celery apps sharing one Redis, with no periodiq settings at all.

Its main name comes from TEST_APP_NAME; its broker is TEST_BROKER_URL, which is
also where periodiq keeps the schedule (the default). Each app sends to its own
queue (Celery's task_default_queue: apps sharing a broker need that anyway) and
declares an entry named "heartbeat" in beat_schedule, the same name in every app.
Runs are recorded in the Redis list "runs:<app name>".
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
from celery import Celery

NAME = os.environ["TEST_APP_NAME"]

app = Celery(NAME, broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.beat_max_loop_interval = 5
app.conf.broker_connection_retry_on_startup = True
app.conf.task_default_queue = NAME
app.conf.beat_schedule = {"heartbeat": {"task": f"{NAME}.record", "schedule": 1.0}}

_results = redis.Redis.from_url(os.environ["TEST_BROKER_URL"], decode_responses=True)


@app.task(bind=True, name=f"{NAME}.record")
def record(self: Any) -> None:
    """Record that this app's worker ran this app's task."""
    entry = getattr(self.request, "periodiq_entry", None)
    _results.rpush(f"runs:{NAME}", json.dumps({"entry": entry, "at": time.time()}))
