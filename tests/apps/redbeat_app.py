"""A Celery app run with RedBeat's own beat (``-S redbeat.RedBeatScheduler``) by
tests/test_import_redbeat.py: the entries that beat writes from this beat_schedule are
the static entries a team leaving RedBeat has in Redis.

RedBeat 2.4 cannot store a ``solar`` schedule (its JSON encoder refuses one and its beat
stops), so this schedule has none; the tests show that separately.
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab

app = Celery("redbeat_app", broker=os.environ["TEST_BROKER_URL"])
app.conf.redbeat_redis_url = os.environ["TEST_REDBEAT_URL"]
app.conf.timezone = "Europe/Berlin"
app.conf.result_expires = None  # no celery.backend_cleanup entry
app.conf.beat_schedule = {
    "nightly-report": {
        "task": "proj.report",
        "schedule": crontab(minute=30, hour=2, day_of_week="mon-fri"),
        "kwargs": {"full": True},
    },
    "poll-inbox": {
        "task": "proj.poll",
        "schedule": timedelta(seconds=45),
        "args": ["inbox"],
        "options": {"queue": "io"},
    },
}
