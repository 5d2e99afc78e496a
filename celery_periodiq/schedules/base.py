"""The :class:`Schedule` every form parses to, and its Celery integration."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, ClassVar

from celery.schedules import BaseSchedule, schedstate

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.zones import zone

__all__ = ["Schedule", "require_aware"]

_TINY = timedelta(microseconds=1)
# How long Celery's beat may sleep before asking a schedule with no next fire again.
_IDLE_CHECK = 3600.0


def require_aware(value: datetime, what: str) -> datetime:
    """Return ``value`` if it is an aware datetime.

    Raises:
        ScheduleError: it is not a datetime, or it is naive.
    """
    if not isinstance(value, datetime):
        raise ScheduleError(
            f"{what}: {shown(value)} is not a datetime (allowed: an aware datetime)"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(
            f"{what}: {value.isoformat()} has no time zone "
            "(allowed: an aware datetime, e.g. datetime.now(timezone.utc))"
        )
    return value


class Schedule(BaseSchedule, ABC):
    """When an entry fires: a parsed cron, calendar, interval or event spec.

    Create one with :func:`celery_periodiq.parse_schedule`. A ``Schedule`` is
    also a Celery schedule, so it can stand in a plain ``beat_schedule``.

    Attributes:
        spec: the schedule as written (intervals given as seconds are written
            back as ``@every ...``).
        timezone: the IANA zone name the schedule is read in.
        key: what Jenkins ``H`` fields hash (usually the entry name).
        start_at: no fire before this instant.
        end_at: no fire after this instant.
    """

    kind: ClassVar[str]

    def __init__(
        self,
        spec: str,
        *,
        timezone: str = "UTC",
        key: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.timezone = timezone
        self.zone: tzinfo = zone(timezone)
        self.key = key
        self._bound(start_at, end_at)

    def _bound(self, start_at: datetime | None, end_at: datetime | None) -> None:
        """Set and check ``start_at`` and ``end_at`` (what depends on them, too)."""
        self.start_at = None if start_at is None else require_aware(start_at, "start_at")
        self.end_at = None if end_at is None else require_aware(end_at, "end_at")
        self._start_utc = None if self.start_at is None else self.start_at.astimezone(UTC)
        self._end_utc = None if self.end_at is None else self.end_at.astimezone(UTC)
        if self._start_utc and self._end_utc and self._end_utc < self._start_utc:
            end, start = self._end_utc.isoformat(), self._start_utc.isoformat()
            raise ScheduleError(f"end_at {end} is before start_at {start}")

    def bounded(self, start_at: datetime | None, end_at: datetime | None) -> Schedule:
        """This schedule with ``start_at`` and ``end_at`` instead of its own: a copy, the
        spec not parsed again (what many entries of one spec but their own bounds share).

        Raises:
            ScheduleError: as :func:`celery_periodiq.parse_schedule` for these bounds.
        """
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied._bound(start_at, end_at)
        return copied

    def next_after(self, dt: datetime) -> datetime | None:
        """The first fire instant strictly after ``dt``.

        Args:
            dt: an aware datetime.

        Returns:
            An aware datetime in the schedule's zone (subtract or compare
            such values after ``.astimezone(UTC)``: within one zone Python
            ignores ``fold``), or None when nothing
            fires any more (past ``end_at``, or an event schedule).

        Raises:
            ScheduleError: ``dt`` is naive.
        """
        # Compare in UTC only: Python compares two datetimes of one zone by
        # their wall time and ignores ``fold``, which is wrong inside a DST fold.
        dt = require_aware(dt, "next_after").astimezone(UTC)
        if self._start_utc is not None and dt < self._start_utc:
            dt = self._start_utc - _TINY
        fire = self._next(dt)
        if fire is None or (self._end_utc is not None and fire.astimezone(UTC) > self._end_utc):
            return None
        return fire

    def upcoming(self, start: datetime, n: int) -> list[datetime]:
        """The next ``n`` fire instants after ``start`` (fewer if the schedule ends)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ScheduleError(f"upcoming: n={shown(n)} is not a whole number >= 0")
        fires: list[datetime] = []
        current = start
        while len(fires) < n:
            fire = self.next_after(current)
            if fire is None:
                break
            fires.append(fire)
            current = fire
        return fires

    def interval_at(self, fire: datetime) -> timedelta | None:
        """The time from the tick at ``fire`` to the next one, or None if it is the last."""
        following = self.next_after(fire)
        return None if following is None else following - fire

    @abstractmethod
    def _next(self, dt: datetime) -> datetime | None: ...

    @abstractmethod
    def describe(self) -> str:
        """A short sentence, e.g. ``"at 02:30 every day, Europe/Berlin"``."""

    def _identity(self) -> tuple[Any, ...]:
        return (self.kind, self.spec, self.timezone, self.key, self.start_at, self.end_at)

    # Celery's BaseSchedule interface, so a Schedule works in a plain beat_schedule.

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        """Time from now until the first fire after ``last_run_at``."""
        fire = self.next_after(self.maybe_make_aware(last_run_at))
        if fire is None:
            return timedelta(seconds=_IDLE_CHECK)
        return fire - self.now().astimezone(UTC)

    def is_due(self, last_run_at: datetime) -> schedstate:
        """Celery's question: is a run due, and how long until asking again."""
        now = self.maybe_make_aware(self.now())
        fire = self.next_after(self.maybe_make_aware(last_run_at))
        if fire is None:
            return schedstate(False, _IDLE_CHECK)
        if fire <= now:
            following = self.next_after(now)
            wait = _IDLE_CHECK if following is None else (following - now).total_seconds()
            return schedstate(True, wait)
        return schedstate(False, (fire - now).total_seconds())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Schedule):
            return self._identity() == other._identity()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec!r} {self.timezone}>"

    form: ClassVar[str | None] = None
    """The form ``spec`` is parsed as when the schedule is rebuilt (unpickled); None:
    ``parse_schedule`` tells it from the spec."""

    def __reduce__(self) -> tuple[Any, ...]:
        options = {
            "tz": self.timezone,
            "key": self.key,
            "start_at": self.start_at,
            "end_at": self.end_at,
        }
        return (_rebuild, (self.spec, self.form, options))


def _rebuild(spec: str, form: str | None, options: dict[str, Any]) -> Schedule:
    from celery_periodiq.schedules import parse_form, parse_schedule

    if form is None:
        return parse_schedule(spec, **options)
    return parse_form(spec, form, **options)  # type: ignore[arg-type]
