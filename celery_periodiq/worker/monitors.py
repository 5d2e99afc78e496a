"""What each monitor is told of a run, as pure functions: the status of an outcome,
Sentry's monitor slug, check-in id and monitor config, and the Healthchecks/Cronitor
ping URLs. Sending them is :mod:`celery_periodiq.worker.checkins`'s job."""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.schedules.cron import MACROS, compile_cron
from celery_periodiq.schedules.interval import IntervalSchedule

__all__ = ["monitor_config", "monitor_slug", "ping_url", "status_of", "uuid_hex"]

_SLUG_LENGTH = 50
_STATUSES = {
    "started": "in_progress",
    "succeeded": "ok",
    "skipped_overlap": "ok",  # the tick was handled as its policy says: not missed
    "dropped_too_soon": "ok",
    "dropped_group_limit": "ok",  # its group's limit held it back, as configured
    "skipped_window": "ok",  # a maintenance window held it back (told by the beat)
    "deferred": "ok",  # a defer window holds it: its catch-up run is checked in itself
    "excluded": "ok",  # one of its excluded dates
    "failed": "error",
    "timeboxed": "error",
    "revoked": "error",
    "expired": "error",
    "damaged": "error",
}
_PING_FORMS = {"in_progress": ("/start", "run"), "ok": ("", "complete"), "error": ("/fail", "fail")}
_UNITS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60))


def status_of(outcome: str) -> str | None:
    """What a monitor is told of a run's outcome (begin's or finish's); None: nothing
    (a duplicate, a retry, an entry deleted or unguarded)."""
    return _STATUSES.get(outcome)


def monitor_slug(name: str) -> str:
    """Sentry's monitor slug of entry ``name``: lowercase letters, digits, ``-`` and
    ``_``, at most 50 characters; a name that had to be shortened keeps a hash of itself,
    so that two long names stay two monitors."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "entry"
    if len(slug) > _SLUG_LENGTH:
        digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:8]
        slug = f"{slug[: _SLUG_LENGTH - 9].rstrip('-')}-{digest}"
    return slug


def _crontab(entry: Entry) -> str | None:
    """The entry's cron as Sentry's five fields, or None when it has no such form
    (seconds other than 0, a year, L, W, #)."""
    parts = MACROS.get(entry.schedule.strip().lower(), entry.schedule).split()
    if len(parts) > 5:
        if parts[0] != "0" or (len(parts) == 7 and parts[6] != "*"):
            return None
        parts = parts[1:6]
    if len(parts) != 5:  # @reboot, @shutdown
        return None
    days = [re.sub(r"[A-Z]{3}", "", part.upper()) for part in parts[2:]]  # not JUL, WED
    if any(mark in part for part in days for mark in "LW#H"):
        return None
    if any("H" in part.upper() for part in parts[:2]):  # H as the numbers it hashed to
        fields = compile_cron(" ".join(parts), key=entry.name)
        parts[:2] = [",".join(map(str, fields.minutes)), ",".join(map(str, fields.hours))]
    return " ".join(part.replace("?", "*") for part in parts)


def monitor_config(
    entry: Entry, default_grace: float, now: datetime, plain: bool = False
) -> dict[str, Any] | None:
    """Sentry's ``monitor_config`` of ``entry``: its schedule (crontab or interval) and
    time zone, its grace as ``checkin_margin`` and its timebox as ``max_runtime`` (whole
    minutes, rounded up; none for a ``plain`` task's runs that keep their own limits),
    its failure threshold; None when Sentry cannot express the schedule (calendar events,
    one-offs, seconds), so the monitor must be made in Sentry.
    """
    schedule: dict[str, Any]
    if entry.form == "cron":
        crontab = _crontab(entry)
        if crontab is None:
            return None
        schedule = {"type": "crontab", "value": crontab}
    elif entry.form == "every":
        parsed = entry.parsed_schedule()
        seconds = parsed.period.total_seconds() if isinstance(parsed, IntervalSchedule) else 0
        unit = next(((unit, size) for unit, size in _UNITS if seconds % size == 0), None)
        if not seconds or unit is None:
            return None
        schedule = {"type": "interval", "value": int(seconds // unit[1]), "unit": unit[0]}
    else:
        return None
    config: dict[str, Any] = {
        "schedule": schedule,
        "timezone": entry.tz,
        "failure_issue_threshold": entry.failure_threshold,
    }
    limits = policy.now_limits(entry, now, default_grace, plain)
    if limits.timebox is not None and limits.time_limit is not None:
        config["checkin_margin"] = max(1, math.ceil((limits.time_limit - limits.timebox) / 60))
        config["max_runtime"] = max(1, math.ceil(limits.timebox / 60))
    return config


def ping_url(template: str, entry: str, status: str, check_id: str) -> str:
    """The URL to ping for ``status``: ``{entry}`` is the entry's name (quoted); with a
    ``{state}`` placeholder it is Cronitor's ``run``, ``complete`` or ``fail``, else the
    path gets Healthchecks' ``/start``, nothing or ``/fail`` and ``rid`` the check id."""
    suffix, state = _PING_FORMS[status]
    url = template.replace("{entry}", quote(entry, safe="")).replace("{state}", state)
    if "{state}" in template:
        return url
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, f"rid={check_id}"]))
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix, query=query))


def uuid_hex(task_id: str) -> str:
    """Sentry's check-in id of a task id: its 32 hex digits (a task id is a UUID)."""
    digits = task_id.replace("-", "").lower()
    if re.fullmatch(r"[0-9a-f]{32}", digits):
        return digits
    return hashlib.md5(task_id.encode(), usedforsecurity=False).hexdigest()
