"""The example project's Celery app, configured for celery_periodiq.

Run it as any Celery project, with as many beats as you like::

    celery -A example_project worker -Q celery,sensors
    celery -A example_project beat     # once per host, or twice on one host
    celery -A example_project periodiq list
"""

from __future__ import annotations

from celery import Celery

from celery_periodiq import parse_schedule
from example_project.settings import KEY_PREFIX, REDIS_URL, when

__all__ = ["app"]

app = Celery("example_project")
app.conf.update(
    broker_url=REDIS_URL,
    broker_connection_retry_on_startup=True,
    timezone="UTC",
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    # The schedule lives in Redis; every `celery beat` of this app is active.
    beat_scheduler="celery_periodiq:Scheduler",
    beat_max_loop_interval=5,
    periodiq_redis_url=REDIS_URL,
    periodiq_key_prefix=KEY_PREFIX,
    # A beat killed mid-publish hands its claimed ticks over after this lease.
    periodiq_claim_lease=when(10.0, demo=2.0),
    periodiq_history_length=when(100, demo=1000),
    # Entries declared in settings rather than with @periodic are reconciled too
    # (housekeeping that cleans up stale data, on a systemd calendar event).
    beat_schedule={
        "housekeeping": {
            "task": "example_project.housekeeping.purge_stale_sessions",
            "schedule": parse_schedule(when("*-*-* 03:00:00", demo="*:*:0/10"), tz="Europe/Berlin"),
            "kwargs": {"older_than_days": 30},
        },
    },
)
