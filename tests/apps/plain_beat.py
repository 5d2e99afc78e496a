"""A Celery app that uses our Schedule in a plain beat_schedule, with Celery's own beat."""

from __future__ import annotations

import os

from celery import Celery

from celery_periodiq import parse_schedule

app = Celery("plain_beat", broker=os.environ["TEST_BROKER_URL"])
app.conf.beat_schedule = {
    "tick-every-second": {
        "task": "plain_beat.tick",
        "schedule": parse_schedule("@every 1s"),
    },
    "six-field-cron": {
        "task": "plain_beat.cron_tick",
        "schedule": parse_schedule("*/2 * * * * *", tz="Europe/Berlin"),
    },
}
