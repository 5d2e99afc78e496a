"""The Celery app the benchmark runs as ``celery beat`` with celery_periodiq's scheduler.

Configured from the environment by bench/beat.py: BENCH_BROKER_URL,
BENCH_REDIS_URL (the schedule's Redis), BENCH_LEASE (``periodiq_claim_lease``,
seconds), BENCH_MAX_INTERVAL (``beat_max_loop_interval``), BENCH_REDIS_CLUSTER=1 (the
schedule's Redis is a Redis Cluster), BENCH_REPLICA_ACKS (``periodiq_replica_acks``),
BENCH_QUEUE (``task_default_queue``, for a broker shared with others),
BENCH_STAGE_HORIZON (``periodiq_stage_horizon``: 0 sends every tick the usual way, the
lean per-tick path). Every setting not
named here keeps celery_periodiq's default (batch size 500, ...).
"""

from __future__ import annotations

import os

from celery import Celery

app = Celery("bench_periodiq", broker=os.environ["BENCH_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["BENCH_REDIS_URL"]
app.conf.periodiq_key_prefix = "periodiq"  # shared with the harness's loader app
app.conf.periodiq_claim_lease = float(os.environ.get("BENCH_LEASE", "10"))
app.conf.periodiq_redis_cluster = os.environ.get("BENCH_REDIS_CLUSTER") == "1"
app.conf.periodiq_replica_acks = int(os.environ.get("BENCH_REPLICA_ACKS", "0"))
app.conf.beat_max_loop_interval = float(os.environ.get("BENCH_MAX_INTERVAL", "5"))
app.conf.broker_connection_retry_on_startup = True
app.conf.result_expires = None  # no celery.backend_cleanup entry
if os.environ.get("BENCH_STAGE_HORIZON"):
    app.conf.periodiq_stage_horizon = float(os.environ["BENCH_STAGE_HORIZON"])
if os.environ.get("BENCH_QUEUE"):
    app.conf.task_default_queue = os.environ["BENCH_QUEUE"]
