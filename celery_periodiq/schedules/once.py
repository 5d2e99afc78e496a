"""One-off schedules (``at=``): a single instant, then nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import ClassVar

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.base import Schedule

__all__ = ["OnceSchedule", "at_spec", "parse_instant"]

_ALLOWED = "an aware datetime, or ISO 8601 with an offset such as '2026-12-01T09:00:00+00:00'"


def parse_instant(value: object, what: str = "at") -> datetime:
    """The aware instant an ``at=`` value means: an aware datetime, or an ISO 8601
    string with an offset (``Z`` or ``+01:00``).

    Raises:
        ScheduleError: not a datetime or ISO 8601 text, or naive (no offset).
    """
    if isinstance(value, str):
        try:
            instant = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ScheduleError(
                f"{what}={shown(value)}: not ISO 8601 (allowed: {_ALLOWED})"
            ) from None
    elif isinstance(value, datetime):
        instant = value
    else:
        raise ScheduleError(f"{what}={shown(value)}: not an instant (allowed: {_ALLOWED})")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ScheduleError(
            f"{what}={shown(instant.isoformat())}: has no time zone, so the instant is ambiguous "
            f"(allowed: {_ALLOWED})"
        )
    return instant


def at_spec(value: object, what: str = "at") -> str:
    """The stored spec of an ``at=`` value: the UTC instant in ISO 8601
    (``datetime.isoformat()``, microseconds kept when given).

    Raises:
        ScheduleError: as :func:`parse_instant`.
    """
    return parse_instant(value, what).astimezone(UTC).isoformat()


class OnceSchedule(Schedule):
    """Fires once, at ``instant``, and never again (``at=``)."""

    kind: ClassVar[str] = "once"
    form: ClassVar[str | None] = "at"

    def __init__(
        self,
        spec: object,
        *,
        timezone: str = "UTC",
        key: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> None:
        instant = parse_instant(spec)
        super().__init__(
            at_spec(instant), timezone=timezone, key=key, start_at=start_at, end_at=end_at
        )
        self.instant = instant.astimezone(UTC)

    def _next(self, dt: datetime) -> datetime | None:
        return self.instant.astimezone(self.zone) if self.instant > dt else None

    def interval_at(self, fire: datetime) -> timedelta | None:
        """None: a one-off tick has no next one."""
        return None

    def describe(self) -> str:
        """E.g. ``"once at 2026-12-01 10:00:00 CET"``."""
        local = self.instant.astimezone(self.zone)
        micros = f".{local.microsecond:06d}" if local.microsecond else ""
        return f"once at {local:%Y-%m-%d %H:%M:%S}{micros} {local.tzname() or self.timezone}"
