"""One parser for every schedule form: :func:`parse_schedule`. Schedule maths is pure: it
takes "now" and returns instants.

Forms: cron (5, 6 or 7 fields, seconds first; ``L W # ?``; Jenkins ``H``), macros
(``@daily`` ...), systemd calendar events, ``@every`` intervals and ``every=`` seconds,
one-off instants, solar events and ``@reboot`` / ``@shutdown``; the exact rules are in
``docs/schedule-semantics.md`` and ``docs/schedules.md``.
Open first: this module (``parse_schedule``), then ``engine`` (croniter proposes, the
field rules decide) and ``base``.
May import: ``errors`` only (the bottom layer); croniter, ephem, and Celery's schedule base.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from celery_periodiq.errors import ScheduleError, shown
from celery_periodiq.schedules.base import Schedule
from celery_periodiq.schedules.calendar import SHORTHANDS, compile_calendar, looks_like_calendar
from celery_periodiq.schedules.cron import MACROS, compile_cron
from celery_periodiq.schedules.engine import CalendarSchedule, CronSchedule, FieldSchedule
from celery_periodiq.schedules.events import EVENTS, EventSchedule
from celery_periodiq.schedules.interval import IntervalSchedule, every_spec, parse_duration
from celery_periodiq.schedules.once import OnceSchedule
from celery_periodiq.schedules.solar import SolarSchedule

__all__ = [
    "CalendarSchedule",
    "CronSchedule",
    "EventSchedule",
    "FieldSchedule",
    "Form",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "SolarSchedule",
    "parse_schedule",
]

Form = Literal["auto", "cron", "calendar", "every", "at"]

_FORMS = (
    "a cron expression ('*/15 * * * *'), a macro (" + " ".join(MACROS) + "), "
    "'@every 30s', @reboot, @shutdown, or a calendar event ('Mon..Fri 09:00', 'daily')"
)


def parse_schedule(
    spec: str | float | timedelta,
    *,
    tz: str = "UTC",
    key: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> Schedule:
    """Parse any schedule form into a :class:`Schedule`.

    Args:
        spec: a cron expression, macro, ``@every`` interval, ``@reboot`` /
            ``@shutdown``, systemd calendar event, or an interval given as
            seconds or a ``timedelta``.
        tz: IANA time zone the schedule is read in (a calendar event may name
            its own zone last).
        key: what Jenkins ``H`` hashes; use the entry name so each entry
            gets its own stable minute.
        start_at: aware datetime; nothing fires before it. Intervals are
            anchored to it (else to the Unix epoch).
        end_at: aware datetime; nothing fires after it.

    Returns:
        The schedule; ``next_after``, ``upcoming`` and ``describe`` answer
        questions about it, and it works as a Celery ``beat_schedule`` schedule.

    Raises:
        ScheduleError: naming the field or token, the value, and what is allowed.
    """
    return parse_form(spec, "auto", tz=tz, key=key, start_at=start_at, end_at=end_at)


def parse_form(
    spec: str | float | timedelta,
    form: Form,
    *,
    tz: str = "UTC",
    key: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> Schedule:
    """Parse ``spec`` as one form (``cron``, ``calendar``, ``every``, ``at``) or detect it
    (``auto``; never ``at``: a one-off instant is only ever given as ``at=``).

    Raises:
        ScheduleError: as :func:`parse_schedule`, or when ``spec`` is not of ``form``.
    """
    if key is not None and not isinstance(key, str):
        raise ScheduleError(f"key={shown(key)}: not a string (allowed: the entry name)")
    if not isinstance(tz, str):
        raise ScheduleError(f"tz={shown(tz)}: not a string (allowed: an IANA name such as 'UTC')")
    timezone = tz
    if form == "at":
        return OnceSchedule(spec, timezone=tz, key=key, start_at=start_at, end_at=end_at)
    if isinstance(spec, timedelta | int | float) and not isinstance(spec, bool):
        if form not in ("auto", "every"):
            raise ScheduleError(
                f"{form}={shown(spec)}: a number of seconds is not a {form} expression"
            )
        text = every_spec(spec)
        period = parse_duration(text[len("@every") :], text)
        return IntervalSchedule(
            text, period, timezone=tz, key=key, start_at=start_at, end_at=end_at
        )
    if not isinstance(spec, str):
        raise ScheduleError(f"schedule {shown(spec)}: not a string (allowed: {_FORMS})")
    text = " ".join(spec.split())
    lowered = text.lower()
    if not text:
        raise ScheduleError(f"schedule {shown(spec)}: empty (allowed: {_FORMS})")
    if lowered.startswith("@every"):
        _expect(form, "every", spec)
        period = parse_duration(text[len("@every") :], spec)
        return IntervalSchedule(
            text, period, timezone=tz, key=key, start_at=start_at, end_at=end_at
        )
    if form == "every":
        raise ScheduleError(
            f"every={shown(spec)}: not an interval (allowed: seconds, a timedelta, '@every 30s')"
        )
    if lowered.startswith("@solar"):
        _expect(form, "cron", spec)
        return SolarSchedule(text, timezone=tz, key=key, start_at=start_at, end_at=end_at)
    if lowered in EVENTS:
        _expect(form, "cron", spec)
        return EventSchedule(lowered, timezone=tz, key=key, start_at=start_at, end_at=end_at)
    if lowered in MACROS:
        _expect(form, "cron", spec)
        fields = compile_cron(lowered, key)
        return CronSchedule(text, fields, timezone=tz, key=key, start_at=start_at, end_at=end_at)
    if text.startswith("@"):
        raise ScheduleError(
            f"schedule {shown(spec)}: unknown macro {shown(text.split()[0])} (allowed: "
            + ", ".join([*MACROS, "@every <duration>", "@solar EVENT LAT LON", *EVENTS])
            + ")"
        )
    if form == "calendar" or (form == "auto" and looks_like_calendar(text)):
        fields, named_zone = compile_calendar(text)
        if named_zone is not None:
            timezone = named_zone  # the zone written in the event wins over tz=
        return CalendarSchedule(
            text, fields, timezone=timezone, key=key, start_at=start_at, end_at=end_at
        )
    fields = compile_cron(text, key)
    return CronSchedule(text, fields, timezone=tz, key=key, start_at=start_at, end_at=end_at)


def _expect(form: Form, wanted: Form, spec: str) -> None:
    if form not in ("auto", wanted):
        raise ScheduleError(f"{form}={shown(spec)}: this is not a {form} expression")


# Re-exported for describe()/CLI use without reaching into submodules.
CALENDAR_SHORTHANDS = SHORTHANDS
