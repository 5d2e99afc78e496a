"""Tasks whose runs the guard drops, on a worker with a result backend (tests of how a
dropped run ends for Celery's monitors).

TEST_BROKER_URL, TEST_REDIS_URL (the schedule), TEST_RESULT_URL (the result backend).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery
from celery.worker.request import Request

from celery_periodiq import PeriodicTask, periodic

app = Celery(
    "dropped_app", broker=os.environ["TEST_BROKER_URL"], backend=os.environ["TEST_RESULT_URL"]
)
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
app.conf.worker_prefetch_multiplier = 1
app.conf.task_track_started = True  # the backend shows STARTED while a run runs


@app.task(base=PeriodicTask, bind=True, name="work")
def work(self: Any, seconds: float = 0.0) -> str:
    """Work for ``seconds``."""
    time.sleep(seconds)
    return "done"


@app.task(base=PeriodicTask, bind=True, name="quiet", ignore_result=True)
def quiet(self: Any) -> str:
    """A task whose results are not stored."""
    return "done"


@app.task(base=PeriodicTask, bind=True, name="late", acks_late=True)
def late(self: Any) -> str:
    """A task whose message is acknowledged after the run."""
    return "done"


@app.task(name="plain")
def plain() -> str:
    """A task without PeriodicTask: the duplicate and expiry checks only."""
    return "done"


_results = redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)


class NotingRequest(Request):  # type: ignore[misc]
    """A worker request class of the task's own: it notes each run it starts."""

    def on_accepted(self, pid: Any, time_accepted: float) -> None:
        super().on_accepted(pid, time_accepted)
        _results.rpush("accepted", self.id)


@periodic(cron="@yearly", name="declared-custom", app=app)
@app.task(name="custom", Request=NotingRequest)
def custom() -> str:
    """An existing task with a Request of its own, given the guards by @periodic."""
    return "done"
