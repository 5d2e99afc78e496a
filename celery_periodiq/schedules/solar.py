"""``@solar EVENT LAT LON``: sunrise, sunset and the twilights, as Celery's ``solar`` computes them.

Needs the ``ephem`` package (the ``solar`` extra). The observer is set up as
Celery's :class:`celery.schedules.solar` sets it up (its event tables are
reused), so an entry moved from ``beat_schedule`` fires at the same instants.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from celery.schedules import solar as celery_solar

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.base import Schedule

__all__ = ["SOLAR_EVENTS", "SolarSchedule", "parse_solar"]

# Celery's own event tables, so both compute the same instants.
_CELERY: dict[str, Any] = dict(vars(celery_solar))
SOLAR_EVENTS: tuple[str, ...] = tuple(sorted(_CELERY["_all_events"]))
_SEARCH_DAYS = 366
_STEP = timedelta(seconds=1)


def parse_solar(spec: str) -> tuple[str, float, float]:
    """``"@solar sunrise 52.52 13.40"`` -> ``("sunrise", 52.52, 13.4)``.

    Raises:
        ScheduleError: a missing part, an unknown event, or a position off the globe.
    """
    parts = spec.split()
    allowed = f"@solar EVENT LATITUDE LONGITUDE, EVENT one of {', '.join(SOLAR_EVENTS)}"
    if len(parts) != 4 or parts[0].lower() != "@solar":
        raise ScheduleError(f"solar {shown(spec)}: not '@solar EVENT LAT LON' (allowed: {allowed})")
    event = parts[1].lower()
    if event not in SOLAR_EVENTS:
        raise ScheduleError(
            f"solar {shown(spec)}: event {shown(parts[1])} is unknown (allowed: {allowed})"
        )
    try:
        lat, lon = float(parts[2]), float(parts[3])
    except ValueError:
        raise ScheduleError(
            f"solar {shown(spec)}: latitude and longitude must be numbers (allowed: {allowed})"
        ) from None
    if not -90 <= lat <= 90:
        raise ScheduleError(
            f"solar {shown(spec)}: latitude {lat:g} is off the globe (allowed: -90 to 90)"
        )
    if not -180 <= lon <= 180:
        raise ScheduleError(
            f"solar {shown(spec)}: longitude {lon:g} is off the globe (allowed: -180 to 180)"
        )
    return event, lat, lon


class SolarSchedule(Schedule):
    """Fires at a solar event seen from a place; at high latitudes some days have none."""

    kind: ClassVar[str] = "solar"

    def __init__(
        self,
        spec: str,
        *,
        timezone: str = "UTC",
        key: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> None:
        super().__init__(spec, timezone=timezone, key=key, start_at=start_at, end_at=end_at)
        self.event, self.lat, self.lon = parse_solar(spec)
        try:
            import ephem
        except ImportError:
            raise ScheduleError(
                f"solar {shown(spec)}: needs the ephem package "
                "(allowed once installed: pip install 'celery-periodiq[solar]')"
            ) from None
        self._ephem: Any = ephem
        observer: Any = ephem.Observer()
        observer.lat, observer.lon = str(self.lat), str(self.lon)
        observer.elev = 0
        observer.pressure = 0
        observer.horizon = _CELERY["_horizons"][self.event]
        self._observer = observer
        self._method: str = _CELERY["_methods"][self.event]
        self._center: bool = _CELERY["_use_center_l"][self.event]
        self._lock = threading.Lock()  # an ephem Observer is stateful

    def _next(self, dt: datetime) -> datetime | None:
        ephem = self._ephem
        sun = ephem.Sun()
        options = {"use_center": True} if self._center else {}
        start = ephem.Date((dt + _STEP).astimezone(UTC).replace(tzinfo=None))
        with self._lock:
            for _ in range(_SEARCH_DAYS):
                try:
                    found = getattr(self._observer, self._method)(sun, start=start, **options)
                except ephem.CircumpolarError:  # no such event that day (polar day or night)
                    start = self._observer.next_antitransit(sun, start=start)
                    continue
                fire: datetime = found.datetime().replace(tzinfo=UTC)
                return fire.astimezone(self.zone)
        return None

    def describe(self) -> str:
        """E.g. ``"at sunrise seen from 52.52, 13.4"``."""
        return f"at {self.event.replace('_', ' ')} seen from {self.lat:g}, {self.lon:g}"
