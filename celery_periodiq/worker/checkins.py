"""Check-ins: tell Sentry Crons and Healthchecks/Cronitor when a run starts and how it ends.

The worker's guards call :func:`report` with the run's outcome; what a monitor is told
is decided once, in :func:`status_of`. Nothing is sent on the run's critical path: a
check-in is put on a bounded queue that one daemon thread per process empties, each
ping bounded by ``periodiq_checkin_timeout``; a full queue drops the check-in (logged),
never blocks the run. A prefork child that exits (``--max-tasks-per-child``, shutdown)
first waits, at most twice that timeout, for its queue to empty and Sentry's to flush.

Sentry's monitor config is built from the entry's definition, read by the sending
thread (off the run's path) and cached per entry for a minute.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import math
import os
import queue
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from celery.signals import worker_process_shutdown

from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.schedules.cron import MACROS, compile_cron
from celery_periodiq.schedules.interval import IntervalSchedule
from celery_periodiq.store.store import Store

__all__ = ["Checkin", "monitor_config", "monitor_slug", "ping_url", "report", "status_of"]

logger = logging.getLogger("celery_periodiq.checkins")

_QUEUE_SIZE = 1000
_DEFINITION_TTL = 60.0
"""Seconds a definition read for Sentry's monitor config is reused."""
_SLUG_LENGTH = 50
_RESTING = 30.0
"""Seconds a ping monitor that failed to answer is not asked again: a monitor that hangs
costs one timeout, then the other entries' check-ins go on."""
_STATUSES = {
    "started": "in_progress",
    "succeeded": "ok",
    "skipped_overlap": "ok",  # the tick was handled as its policy says: not missed
    "dropped_too_soon": "ok",
    "failed": "error",
    "timeboxed": "error",
    "revoked": "error",
    "expired": "error",
    "damaged": "error",
}
_PING_FORMS = {"in_progress": ("/start", "run"), "ok": ("", "complete"), "error": ("/fail", "fail")}
_UNITS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60))


@dataclass(frozen=True, slots=True)
class Checkin:
    """One check-in of one run: start and end share ``check_id`` (the task id)."""

    entry: str
    check_id: str
    status: str
    """in_progress, ok or error."""
    duration: float | None = None
    """Seconds the run took (an end only)."""


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


def monitor_config(entry: Entry, default_grace: float, now: datetime) -> dict[str, Any] | None:
    """Sentry's ``monitor_config`` of ``entry``: its schedule (crontab or interval) and
    time zone, its grace as ``checkin_margin`` and its timebox as ``max_runtime`` (whole
    minutes, rounded up), its failure threshold; None when Sentry cannot express the
    schedule (calendar events, one-offs, seconds), so the monitor must be made in Sentry.
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
    limits = policy.now_limits(entry, now, default_grace)
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


class _Sender:
    """One process's check-in queue for one app, and the daemon thread that empties it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.settings = store.settings
        self.queue: queue.Queue[Checkin | threading.Event] = queue.Queue(_QUEUE_SIZE)
        self.configs: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self.resting: dict[str, float] = {}
        self.told: set[str] = set()
        """What was logged once: sentry_sdk missing or not initialised."""
        """Host of a ping monitor that failed -> until when (monotonic) it is left alone."""
        self.thread = threading.Thread(target=self._loop, name="periodiq-checkins", daemon=True)
        self.thread.start()

    def put(self, checkin: Checkin) -> None:
        try:
            self.queue.put_nowait(checkin)
        except queue.Full:
            logger.warning(
                "periodiq: entry %r run %s: check-in %s not sent, %d are waiting",
                checkin.entry,
                checkin.check_id,
                checkin.status,
                _QUEUE_SIZE,
            )

    def flush(self, timeout: float) -> bool:
        """Wait until what is queued now is sent (at most ``timeout`` seconds)."""
        done = threading.Event()
        try:
            self.queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._send(item)
            except Exception as error:  # a monitor's trouble is never the worker's
                logger.warning(
                    "periodiq: entry %r run %s: check-in %s not sent: %s",
                    item.entry,
                    item.check_id,
                    item.status,
                    error,
                )

    def _send(self, checkin: Checkin) -> None:
        if "sentry" in self.settings.checkins:
            self._to_sentry(checkin)
        template = self.settings.checkin_urls.get(checkin.entry) or self.settings.checkin_url
        if template:
            self._ping(ping_url(template, checkin.entry, checkin.status, checkin.check_id))

    def _ping(self, url: str) -> None:
        host = urlsplit(url).netloc
        if time.monotonic() < self.resting.get(host, -math.inf):
            logger.debug("periodiq: ping %s not sent: %s failed lately", url, host)
            return
        try:
            with urllib.request.urlopen(url, timeout=self.settings.checkin_timeout) as reply:
                reply.read(1024)
        except urllib.error.HTTPError:
            raise  # it answered: the next ping goes to it as usual
        except OSError:
            self.resting[host] = time.monotonic() + _RESTING
            raise

    def _to_sentry(self, checkin: Checkin) -> None:
        try:
            import sentry_sdk
            from sentry_sdk.crons import capture_checkin
        except ImportError:
            self._tell_once("periodiq_checkins names 'sentry' but sentry_sdk is missing")
            return
        if not sentry_sdk.get_client().is_active():
            self._tell_once(
                "periodiq_checkins names 'sentry' but sentry_sdk.init() was not called in this "
                "process: no check-ins go to Sentry"
            )
            return
        capture_checkin(
            monitor_slug=monitor_slug(checkin.entry),
            check_in_id=uuid_hex(checkin.check_id),
            status=checkin.status,
            duration=checkin.duration,
            monitor_config=self._config(checkin.entry),  # type: ignore[arg-type]
        )

    def _tell_once(self, problem: str) -> None:
        if problem not in self.told:
            self.told.add(problem)
            logger.warning("periodiq: %s", problem)

    def _config(self, name: str) -> dict[str, Any] | None:
        read_at, config = self.configs.get(name, (-math.inf, None))
        if time.monotonic() - read_at < _DEFINITION_TTL:
            return config
        stored = self.store.load([name])
        entry = stored[0].entry if stored else None
        config = (
            None
            if entry is None
            else monitor_config(entry, self.settings.default_grace, datetime.now(UTC))
        )
        self.configs[name] = (time.monotonic(), config)
        return config


def uuid_hex(task_id: str) -> str:
    """Sentry's check-in id of a task id: its 32 hex digits (a task id is a UUID)."""
    digits = task_id.replace("-", "").lower()
    if re.fullmatch(r"[0-9a-f]{32}", digits):
        return digits
    return hashlib.md5(task_id.encode(), usedforsecurity=False).hexdigest()


_senders: dict[int, _Sender] = {}
_lock = threading.Lock()


def _sender(store: Store) -> _Sender:
    with _lock:
        sender = _senders.get(id(store))
        if sender is None or sender.store is not store:
            sender = _senders[id(store)] = _Sender(store)
        return sender


def report(
    store: Store, entry: str, task_id: str, outcome: str, duration: float | None = None
) -> None:
    """Queue the check-in of a run's ``outcome`` for the app's monitors, if it has any
    and the outcome is one they are told of; returns at once."""
    status = status_of(outcome)
    if status is None or not store.settings.checkins:
        return
    _sender(store).put(Checkin(entry, task_id, status, duration))


def flush(timeout: float | None = None) -> None:
    """Send what this process has queued, at most twice the longest check-in timeout
    (or ``timeout``) in all, then flush Sentry's queue with what is left of it."""
    with _lock:
        senders = list(_senders.values())
    if not senders:
        return
    longest = max(sender.settings.checkin_timeout for sender in senders)
    deadline = time.monotonic() + (2 * longest if timeout is None else timeout)
    for sender in senders:
        sender.flush(max(deadline - time.monotonic(), 0.0))
    if any("sentry" in sender.settings.checkins for sender in senders):
        with contextlib.suppress(ImportError):
            import sentry_sdk

            sentry_sdk.flush(timeout=max(deadline - time.monotonic(), 0.1))


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it starts its own senders."""
    global _lock
    _lock = threading.Lock()
    _senders.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


@worker_process_shutdown.connect
def _on_child_exit(**_: Any) -> None:
    flush()


atexit.register(flush)
