"""celery_periodiq: periodic tasks for Celery, correct with many active beats."""

from __future__ import annotations

from celery_periodiq.errors import PeriodiqError, ScheduleError
from celery_periodiq.schedules import Schedule, parse_schedule

__version__ = "0.1.0"

__all__ = [
    "PeriodiqError",
    "Schedule",
    "ScheduleError",
    "__version__",
    "parse_schedule",
]
