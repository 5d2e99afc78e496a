"""The Celery app the process tests run as real beats and workers.

Configured from the environment: TEST_BROKER_URL, TEST_REDIS_URL,
TEST_LEASE (claim lease, s), TEST_BEAT_SCHEDULE (JSON: name -> {"task", "every"}),
TEST_REDIS_CLUSTER=1 (TEST_REDIS_URL names Redis Cluster nodes), TEST_REPLICA_ACKS,
TEST_HISTORY_LENGTH (``periodiq_history_length``), TEST_CONF (JSON: more settings,
``app.conf.update``), TEST_DECLARE_CRON (declares the entry "declared-cron" of the task
``declared_cron`` with ``@periodic(cron=...)``, no ``tz=``),
TEST_ALERT_TASK (``periodiq_alert_task``; the task ``alert`` records each payload in
the list "alerts"), TEST_STAGE_HORIZON and TEST_STAGE_MIN (``periodiq_stage_horizon``,
``periodiq_stage_min``: staged release; the defaults unless given).
Every run records itself in the Redis list "runs" of TEST_RUNS_URL, else of
TEST_REDIS_URL.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import redis
from celery import Celery
from redis.cluster import RedisCluster

from celery_periodiq import PeriodicTask, periodic

app = Celery("periodiq_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]
app.conf.periodiq_claim_lease = float(os.environ.get("TEST_LEASE", "2"))
app.conf.periodiq_redis_options = json.loads(os.environ.get("TEST_REDIS_OPTIONS", "{}"))
app.conf.periodiq_redis_cluster = os.environ.get("TEST_REDIS_CLUSTER") == "1"
app.conf.periodiq_replica_acks = int(os.environ.get("TEST_REPLICA_ACKS", "0"))
app.conf.periodiq_alert_task = os.environ.get("TEST_ALERT_TASK") or None
app.conf.periodiq_history_length = int(os.environ.get("TEST_HISTORY_LENGTH", "40"))
if os.environ.get("TEST_STAGE_HORIZON"):
    app.conf.periodiq_stage_horizon = float(os.environ["TEST_STAGE_HORIZON"])
if os.environ.get("TEST_STAGE_MIN"):
    app.conf.periodiq_stage_min = int(os.environ["TEST_STAGE_MIN"])
app.conf.beat_max_loop_interval = 5
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_prefetch_multiplier = 1
app.conf.beat_schedule = {
    name: {"task": spec["task"], "schedule": float(spec["every"])}
    for name, spec in json.loads(os.environ.get("TEST_BEAT_SCHEDULE", "{}")).items()
}
app.conf.update(json.loads(os.environ.get("TEST_CONF", "{}")))

_results: Any = (
    redis.Redis.from_url(os.environ["TEST_RUNS_URL"], decode_responses=True)
    if os.environ.get("TEST_RUNS_URL")
    else RedisCluster.from_url(os.environ["TEST_REDIS_URL"].split(";")[0], decode_responses=True)
    if app.conf.periodiq_redis_cluster
    else redis.Redis.from_url(os.environ["TEST_REDIS_URL"], decode_responses=True)
)


def _record(request: Any, **extra: Any) -> None:
    run = {
        "entry": getattr(request, "periodiq_entry", None),
        "tick": getattr(request, "periodiq_tick", None),
        "missed": getattr(request, "periodiq_missed", None),
        "task_id": request.id,
        "periodic_task_name": getattr(request, "periodic_task_name", None),
        "timelimit": getattr(request, "timelimit", None),
        "host": socket.gethostname(),
        "at": time.time(),
        **extra,
    }
    _results.rpush("runs", json.dumps(run))


@app.task(bind=True, name="record")
def record(self: Any, *args: Any, **kwargs: Any) -> None:
    """Record that this run happened."""
    _record(self.request, args=list(args), kwargs=kwargs)


@app.task(bind=True, name="record_own_limits", soft_time_limit=100, time_limit=120)
def record_own_limits(self: Any) -> None:
    """A plain task with time limits of its own: record that this run happened."""
    _record(self.request)


@app.task(bind=True, base=PeriodicTask, name="guarded_record")
def guarded_record(self: Any, *args: Any, **kwargs: Any) -> None:
    """Record that this run happened, behind the worker's guards."""
    _record(self.request, args=list(args), kwargs=kwargs)


@app.task(bind=True, base=PeriodicTask, name="guarded_hold")
def guarded_hold(self: Any, seconds: float = 1.0) -> None:
    """A guarded run that holds its slot for ``seconds``: it says so in the list "holding"
    when it begins, and records itself with when it began when it ends."""
    began = time.time()
    _results.rpush(
        "holding", json.dumps({"entry": getattr(self.request, "periodiq_entry", None), "at": began})
    )
    time.sleep(seconds)
    _record(self.request, began=began)


@app.task(bind=True, base=PeriodicTask, name="guarded_fail")
def guarded_fail(self: Any) -> None:
    """A guarded task that always raises."""
    _record(self.request)
    raise RuntimeError("this task always fails")


@app.task(name="alert")
def alert(payload: dict[str, Any]) -> None:
    """Record an alert transition, as a user's task would send it to a pager."""
    _results.rpush("alerts", json.dumps(payload))


if os.environ.get("TEST_DECLARE_CRON"):

    @periodic(cron=os.environ["TEST_DECLARE_CRON"], name="declared-cron")
    @app.task(bind=True, name="declared_cron")
    def declared_cron(self: Any) -> None:
        """Declared in code, with no zone of its own."""
        _record(self.request)
