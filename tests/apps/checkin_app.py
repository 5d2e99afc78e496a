"""The app of the check-in process tests: its runs are reported to Sentry Crons and pings.

Configured like periodiq_app (TEST_BROKER_URL, TEST_REDIS_URL, TEST_LEASE), plus
TEST_SENTRY_DSN (``sentry_sdk.init`` with it), TEST_CHECKINS (JSON; default: Sentry's when
it has a DSN), TEST_CHECKIN_URL, TEST_CHECKIN_URLS (JSON) and TEST_CHECKIN_TIMEOUT.
Every run records itself in the Redis list "runs".
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
import sentry_sdk
from celery import Celery

from celery_periodiq import PeriodicTask

if os.environ.get("TEST_SENTRY_DSN"):
    sentry_sdk.init(dsn=os.environ["TEST_SENTRY_DSN"], default_integrations=False)

app = Celery("checkin_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
app.conf.periodiq_claim_lease = float(os.environ.get("TEST_LEASE", "2"))
app.conf.periodiq_checkins = json.loads(
    os.environ.get("TEST_CHECKINS") or ('["sentry"]' if os.environ.get("TEST_SENTRY_DSN") else "[]")
)
app.conf.periodiq_checkin_url = os.environ.get("TEST_CHECKIN_URL") or None
app.conf.periodiq_checkin_urls = json.loads(os.environ.get("TEST_CHECKIN_URLS", "{}"))
app.conf.periodiq_checkin_timeout = float(os.environ.get("TEST_CHECKIN_TIMEOUT", "2"))
app.conf.beat_max_loop_interval = 5
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_prefetch_multiplier = 1

_results = redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)


def _record(task: Any, kind: str) -> None:
    request = task.request
    _results.rpush(
        "runs",
        json.dumps(
            {
                "kind": kind,
                "entry": getattr(request, "periodiq_entry", None),
                "task_id": request.id,
                "pid": os.getpid(),
                "at": time.time(),
            }
        ),
    )


@app.task(base=PeriodicTask, bind=True, name="fine")
def fine(self: Any, seconds: float = 0.0) -> None:
    """Record the run, taking ``seconds``."""
    _record(self, "start")
    time.sleep(seconds)
    _record(self, "end")


@app.task(base=PeriodicTask, bind=True, name="broken")
def broken(self: Any) -> None:
    """Record the run, then fail."""
    _record(self, "start")
    raise RuntimeError("broken on purpose")


@app.task(bind=True, name="plain_fine")
def plain_fine(self: Any) -> None:
    """A task without PeriodicTask: an entry runs it with the plain duplicate check."""
    _record(self, "start")
