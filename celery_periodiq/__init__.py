"""celery_periodiq: periodic tasks for Celery, correct with many active beats."""

from __future__ import annotations

from celery_periodiq._version import __version__
from celery_periodiq.api import Periodiq, periodiq
from celery_periodiq.beat.scheduler import Scheduler
from celery_periodiq.declare.decorators import periodic
from celery_periodiq.errors import (
    BrokerUnavailableError,
    ConfigurationError,
    DeclaredEntryError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    MessageError,
    PageError,
    PeriodiqError,
    ScheduleError,
    SimulationError,
    StoreRefusedError,
    StoreUnavailableError,
    WindowError,
)
from celery_periodiq.model.simulation import Dropped, EntrySimulation, Fire, Simulation
from celery_periodiq.model.windows import Window
from celery_periodiq.ops.many import BulkResult
from celery_periodiq.protocol.audit import AuditRecord
from celery_periodiq.schedules import Schedule, parse_schedule
from celery_periodiq.store.pages import EntryPage
from celery_periodiq.store.views import BeatInfo, Event, StoredEntry
from celery_periodiq.worker.task import PeriodicTask, RunContext

# Connects the worker's start handlers: the settings checked, plain tasks given the
# duplicate check.
from celery_periodiq.worker import startup as _startup  # noqa: F401  isort: skip

__all__ = [
    "AuditRecord",
    "BeatInfo",
    "BrokerUnavailableError",
    "BulkResult",
    "ConfigurationError",
    "DeclaredEntryError",
    "Dropped",
    "EntryError",
    "EntryExistsError",
    "EntryNotFoundError",
    "EntryPage",
    "EntrySimulation",
    "Event",
    "Fire",
    "MessageError",
    "PageError",
    "PeriodicTask",
    "Periodiq",
    "PeriodiqError",
    "RunContext",
    "Schedule",
    "ScheduleError",
    "Scheduler",
    "Simulation",
    "SimulationError",
    "StoreRefusedError",
    "StoreUnavailableError",
    "StoredEntry",
    "Window",
    "WindowError",
    "__version__",
    "parse_schedule",
    "periodic",
    "periodiq",
]
