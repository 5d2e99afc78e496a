"""Every exception celery_periodiq raises descends from :class:`PeriodiqError`."""

from __future__ import annotations


class PeriodiqError(Exception):
    """Root of every error raised by celery_periodiq."""


class ScheduleError(PeriodiqError, ValueError):
    """A schedule spec, time zone or bound is invalid; the message names the part and the rule."""


class RedisServerError(PeriodiqError):
    """A local ``redis-server`` could not be found, started or stopped."""
