"""An app whose @periodic has a mistake a person makes (TEST_MISTAKE: "cron", a typo in
the hour; "every", every=0; "included", the typo in a module of the app's ``include``):
its beat, worker and the CLI must say so in one line, first."""

from __future__ import annotations

import os

from celery import Celery

from celery_periodiq import periodic

MISTAKE = os.environ.get("TEST_MISTAKE", "cron")

app = Celery(
    "mistaken_app",
    broker=os.environ["TEST_BROKER_URL"],
    include=["mistaken_tasks"] if MISTAKE == "included" else [],
)
app.conf.beat_scheduler = "celery_periodiq:Scheduler"
app.conf.periodiq_redis_url = os.environ["TEST_REDIS_URL"]

MISTAKES = {"cron": {"cron": "0 25 * * *"}, "every": {"every": 0}}

if MISTAKE in MISTAKES:

    @periodic(name="nightly-report", app=app, **MISTAKES[MISTAKE])
    def build_report() -> None:
        """A report whose schedule has a mistake."""
