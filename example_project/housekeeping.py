"""Seed 001: a housekeeping task that cleans up stale data, declared in ``beat_schedule``.

The entry lives in ``app.conf.beat_schedule`` (see main.py), as with
Celery's own beat; the beat reconciles it into Redis on start. Using
:class:`celery_periodiq.PeriodicTask` as ``base=`` gives the task the same run
guards as ``@periodic`` ones.
"""

from __future__ import annotations

from celery_periodiq import PeriodicTask
from example_project import audit
from example_project.main import app


@app.task(base=PeriodicTask, bind=True, name="example_project.housekeeping.purge_stale_sessions")
def purge_stale_sessions(self: PeriodicTask, older_than_days: int = 30) -> str:
    """Delete sessions unused for ``older_than_days`` days."""
    audit.record(self, older_than_days=older_than_days)
    return f"purged sessions older than {older_than_days} days"
