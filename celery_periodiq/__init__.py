"""celery_periodiq: periodic tasks for Celery, correct with many active beats."""

from __future__ import annotations

from celery_periodiq.errors import PeriodiqError, ScheduleError

__version__ = "0.1.0"

__all__ = [
    "PeriodiqError",
    "ScheduleError",
    "__version__",
]
