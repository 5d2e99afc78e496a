"""Seed 002's crontab: a report, a refresh in the first half of each hour, a weekday restart.

``@periodic`` on a plain function creates the Celery task itself, with
:class:`celery_periodiq.PeriodicTask` as its base; ``bind=True`` and any other
keyword it does not know are passed on to Celery.
"""

from __future__ import annotations

import time

from celery_periodiq import PeriodicTask, periodic
from example_project import audit
from example_project.settings import DEMO, when


# "make report every fifteen minutes (perhaps at :07, :22, :37, :52)": Jenkins H
# hashes the entry name, so each report entry gets its own stable minute.
@periodic(
    cron=when("H/15 * * * *", demo="H/15 * * * * *"),
    name="make-report",
    args=["foo", "bar", "zzzur"],
    tolerance=when(60, demo=1.5),
    bind=True,
)
def make_report(self: PeriodicTask, *sections: str) -> str:
    """Build the report for ``sections``."""
    audit.record(self)
    run = self.periodiq
    stamp = "now, on request" if run.scheduled_for is None else f"{run.scheduled_for:%H:%M:%S}"
    return f"report {'/'.join(sections)} for {stamp}"


# "refresh data every ten minutes in the first half of every hour (three times,
# perhaps at :04, :14, :24)". The first refresh of each hour rebuilds everything
# and may take longer than ten minutes: there is no timebox, and overlap="skip"
# (the default) skips the next tick rather than running two refreshes at once.
@periodic(
    cron=when("H(0-29)/10 * * * *", demo="H(0-29)/10 * * * * *"),
    name="refresh-data",
    timebox=None,
    overlap="skip",
    bind=True,
)
def refresh_data(self: PeriodicTask) -> str:
    """Refresh the cached data; the hour's first refresh is a full rebuild."""
    audit.record(self)
    scheduled = self.periodiq.scheduled_for
    slot = 0 if scheduled is None else (scheduled.second if DEMO else scheduled.minute)
    full = slot < 10  # H(0-29)/10 fires at h, h+10, h+20 with h < 10
    time.sleep(when(12 * 60, demo=12) if full else when(30, demo=0.2))
    return "full rebuild" if full else "incremental refresh"


# "once every two hours at 45 minutes past the hour starting at 9:45 AM and
# finishing at 3:45 PM every weekday".
@periodic(
    cron=when("45 9-16/2 * * 1-5", demo="45 * * * * *"),
    name="restart-services",
    bind=True,
)
def restart_services(self: PeriodicTask) -> str:
    """Restart the reporting services."""
    audit.record(self)
    return "restarted"
