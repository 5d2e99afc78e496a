"""An app that declares one entry name twice, for two tasks: its beat must not start."""

from __future__ import annotations

import os

from celery import Celery

from celery_periodiq import periodic

app = Celery("duplicate_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]


@periodic(every=60, name="nightly-report", app=app)
def build_report() -> None:
    """One task."""


@periodic(cron="0 3 * * *", name="nightly-report", app=app)
def send_report() -> None:
    """Another task, given the same entry name by mistake."""
