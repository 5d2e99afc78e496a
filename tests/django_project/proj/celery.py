"""The project's Celery app, configured from Django's settings (``CELERY_*``). Named like
tests/apps/periodiq_app.py, so both share one schedule (its key prefix)."""

from celery import Celery

app = Celery("periodiq_app")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.task(name="reports.send_daily")
def send_daily() -> None:
    """A task the form's picker offers (the test processes never run it)."""
