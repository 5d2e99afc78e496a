"""``@reboot`` and ``@shutdown``: schedules with no clock instants."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from celery_periodiq.schedules.base import Schedule

__all__ = ["EVENTS", "EventSchedule"]

EVENTS = {
    "@reboot": "when the beat cluster starts",
    "@shutdown": "when the last beat stops cleanly",
}


class EventSchedule(Schedule):
    """Fires on a cluster event, never by the clock: ``next_after`` is always None."""

    kind: ClassVar[str] = "event"

    @property
    def event(self) -> str:
        """``"reboot"`` or ``"shutdown"``."""
        return self.spec.strip().lower().lstrip("@")

    def _next(self, dt: datetime) -> datetime | None:
        return None

    def describe(self) -> str:
        """E.g. ``"when the beat cluster starts"``."""
        return EVENTS[self.spec.strip().lower()]
