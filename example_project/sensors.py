"""Seed 003: read a sensor every 30 seconds, skipping missed ticks.

A reading costs money and only the latest value matters, so a tick that was
missed (beats down, Redis away) is never run late: ``catchup="skip"``.
Seconds-first cron (six fields, as in Quartz and Spring) gives sub-minute
precision. ``@periodic`` goes over an existing ``@app.task`` here and keeps its
options (the ``sensors`` queue); the task gets the same guards.
"""

from __future__ import annotations

import math
import time

from celery_periodiq import PeriodicTask, periodic
from example_project import audit
from example_project.main import app
from example_project.settings import when


@periodic(
    cron=when("*/30 * * * * *", demo="*/3 * * * * *"),
    name="read-sensor",
    catchup="skip",
)
# @periodic makes the task's class a PeriodicTask: that is what `self` is at run time.
@app.task(bind=True, queue="sensors", name="example_project.sensors.read_sensor")  # type: ignore[arg-type]
def read_sensor(self: PeriodicTask) -> float:
    """Read the boiler temperature (a stand-in value that follows the clock)."""
    audit.record(self)
    return round(60 + 5 * math.sin(time.time() / 60), 2)
