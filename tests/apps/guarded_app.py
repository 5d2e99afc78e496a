"""Guarded tasks for the worker tests: real prefork workers run these.

Configured like periodiq_app (TEST_BROKER_URL, TEST_REDIS_URL, TEST_LEASE);
TEST_DECLARE=1 also declares two entries with @periodic, in both forms.
Every task records what it saw in the Redis list "runs".
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import redis
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded

from celery_periodiq import PeriodicTask, periodic

app = Celery("guarded_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
app.conf.periodiq_claim_lease = float(os.environ.get("TEST_LEASE", "2"))
app.conf.beat_max_loop_interval = 5
app.conf.worker_prefetch_multiplier = 1
app.conf.task_acks_late = False

_results = redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)


def record(task: Any, kind: str, **extra: Any) -> None:
    request = task.request
    _results.rpush(
        "runs",
        json.dumps(
            {
                "kind": kind,
                "task": task.name,
                "entry": getattr(request, "periodiq_entry", None),
                "tick": getattr(request, "periodiq_tick", None),
                "task_id": request.id,
                "retries": request.retries,
                "pid": os.getpid(),
                "at": time.time(),
                **extra,
            }
        ),
    )


@app.task(base=PeriodicTask, bind=True, name="slow")
def slow(self: Any, seconds: float) -> None:
    """Run for ``seconds``, longer than the interval."""
    record(self, "start")
    time.sleep(seconds)
    record(self, "end")


@app.task(base=PeriodicTask, bind=True, name="overrun")
def overrun(self: Any) -> None:
    """Run on past the soft limit; the hard limit kills it."""
    record(
        self,
        "start",
        deadline=self.periodiq.deadline.timestamp() if self.periodiq.deadline else None,
    )
    try:
        time.sleep(30)
    except SoftTimeLimitExceeded:
        record(self, "soft")
        time.sleep(30)
    record(self, "end")


@app.task(base=PeriodicTask, bind=True, name="crash_once")
def crash_once(self: Any) -> None:
    """The first run dies like a killed worker process; later runs end normally."""
    record(self, "start")
    if _results.set("crashed-once", "1", nx=True):
        os.kill(os.getpid(), signal.SIGKILL)
    record(self, "end")


@app.task(base=PeriodicTask, bind=True, name="flaky", max_retries=2)
def flaky(self: Any) -> None:
    """Fail twice with a retry, then succeed."""
    record(self, "attempt")
    if self.request.retries < 2:
        raise self.retry(countdown=1)
    record(self, "end")


@app.task(base=PeriodicTask, bind=True, name="resumable")
def resumable(self: Any) -> None:
    """Count up until the timebox is nearly spent, saving progress; the next run resumes."""
    run = self.periodiq
    count = run.checkpoint.load(0)
    record(self, "start", count=count, time_left=run.time_left())
    while run.time_left() > 0.3:
        count += 1
        time.sleep(0.05)
    run.checkpoint.save(count)
    record(self, "end", count=count)


@app.task(base=PeriodicTask, bind=True, name="plain")
def plain(self: Any) -> None:
    """Just record the run."""
    record(self, "start")


if os.environ.get("TEST_DECLARE") == "1":

    @periodic(every=1, name="declared-plain", timebox=None)
    def declared_plain() -> None:
        """Created by @periodic itself."""
        _results.rpush(
            "runs", json.dumps({"kind": "start", "entry": "declared-plain", "at": time.time()})
        )

    @periodic(every=1, timebox=None)
    @app.task(bind=True, name="declared-existing")
    def declared_existing(self: Any) -> None:
        """An existing task given the guards by @periodic."""
        record(self, "start", guarded=isinstance(self, PeriodicTask))
