"""The tasks module of ``mistaken_app`` (its ``include``), with a typo in a cron hour."""

from __future__ import annotations

from mistaken_app import app

from celery_periodiq import periodic


@periodic(cron="0 25 * * *", name="nightly-report", app=app)
def build_report() -> None:
    """A report at hour 25."""
