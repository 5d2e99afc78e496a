"""Check-ins: tell Sentry Crons and Healthchecks/Cronitor when a run starts and how it ends.

The worker's guards call :func:`report` with the run's outcome; what a monitor is told
is decided in :mod:`~celery_periodiq.worker.monitors`. Nothing is sent on the run's
critical path: a check-in is put on a bounded queue that one daemon thread per process
empties, each ping bounded by ``periodiq_checkin_timeout``; a full queue drops the
check-in (logged), never blocks the run. A prefork child that exits
(``--max-tasks-per-child``, shutdown) first waits, at most twice that timeout, for its
queue to empty and Sentry's to flush.

Sentry's monitor config is built from the entry's definition, read by the sending
thread (off the run's path) and cached per entry for a minute; while Redis cannot be
read, the check-in goes with the last config known (or none).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import redis
from celery.signals import worker_process_shutdown

from celery_periodiq.store.store import Store
from celery_periodiq.worker.monitors import (
    monitor_config,
    monitor_slug,
    ping_url,
    status_of,
    uuid_hex,
)

__all__ = ["Checkin", "flush", "report"]

logger = logging.getLogger("celery_periodiq.checkins")

_QUEUE_SIZE = 1000
_DEFINITION_TTL = 60.0
"""Seconds a definition read for Sentry's monitor config is reused."""
_RESTING = 30.0
"""Seconds a ping monitor that failed to answer is not asked again: a monitor that hangs
costs one timeout, then the other entries' check-ins go on."""


@dataclass(frozen=True, slots=True)
class Checkin:
    """One check-in of one run: start and end share ``check_id`` (the task id)."""

    entry: str
    check_id: str
    status: str
    """in_progress, ok or error."""
    duration: float | None = None
    """Seconds the run took (an end only)."""
    plain: bool = False
    """The run is a plain task's (not a ``PeriodicTask``): no timebox unless its entry
    sets one, so Sentry's ``max_runtime`` is not the automatic one."""


class _Sender:
    """One process's check-in queue for one app, and the daemon thread that empties it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.settings = store.settings
        self.queue: queue.Queue[Checkin | threading.Event] = queue.Queue(_QUEUE_SIZE)
        self.configs: dict[tuple[str, bool], tuple[float, dict[str, Any] | None]] = {}
        self.resting: dict[str, float] = {}
        """Host of a ping monitor that failed -> until when (monotonic) it is left alone."""
        self.told: set[str] = set()
        """What was logged once: sentry_sdk missing or not initialised."""
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
            monitor_config=self._config(checkin.entry, checkin.plain),  # type: ignore[arg-type]
        )

    def _tell_once(self, problem: str) -> None:
        if problem not in self.told:
            self.told.add(problem)
            logger.warning("periodiq: %s", problem)

    def _config(self, name: str, plain: bool) -> dict[str, Any] | None:
        read_at, config = self.configs.get((name, plain), (-math.inf, None))
        if time.monotonic() - read_at < _DEFINITION_TTL:
            return config
        try:
            stored = self.store.load([name])
        except redis.RedisError:  # failing over: the check-in goes, with what was known
            return config
        entry = stored[0].entry if stored else None
        config = (
            None
            if entry is None
            else monitor_config(entry, self.settings.default_grace, datetime.now(UTC), plain)
        )
        self.configs[name, plain] = (time.monotonic(), config)
        return config


_senders: dict[int, _Sender] = {}
_lock = threading.Lock()


def _sender(store: Store) -> _Sender:
    with _lock:
        sender = _senders.get(id(store))
        if sender is None or sender.store is not store:
            sender = _senders[id(store)] = _Sender(store)
        return sender


def report(
    store: Store,
    entry: str,
    task_id: str,
    outcome: str,
    duration: float | None = None,
    plain: bool = False,
) -> None:
    """Queue the check-in of a run's ``outcome`` for the app's monitors, if it has any
    and the outcome is one they are told of; returns at once. ``plain``: a plain task's
    run (see :attr:`Checkin.plain`)."""
    status = status_of(outcome)
    if status is None or not store.settings.checkins:
        return
    _sender(store).put(Checkin(entry, task_id, status, duration, plain))


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
