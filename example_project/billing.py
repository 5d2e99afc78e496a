"""Seed 003: monthly billing, on a fixed day and time of the month, in the company's time zone.

At 06:00 Berlin time on the 1st, whatever the UTC offset that day. If every
beat was down at that moment the run still happens once when one comes back
(``catchup="last"``), unless it is more than three days late.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from celery_periodiq import PeriodicTask, periodic
from example_project import audit
from example_project.settings import when

BERLIN = ZoneInfo("Europe/Berlin")


@periodic(
    cron=when("0 6 1 * *", demo="*/20 * * * * *"),
    tz="Europe/Berlin",
    name="monthly-billing",
    catchup="last",
    catchup_window=when(3 * 86400, demo=60),
    bind=True,
)
def run_billing(self: PeriodicTask) -> str:
    """Invoice every customer for the month that just ended."""
    run = self.periodiq
    scheduled = (run.scheduled_for or datetime.now(BERLIN)).astimezone(BERLIN)
    period = (scheduled.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    audit.record(self, period=period)
    return f"invoiced {period}"
