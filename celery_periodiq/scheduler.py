"""``celery_periodiq:Scheduler``: the Celery beat scheduler, active-active over Redis.

Run as many ``celery beat`` processes (or ``celery worker -B``) as you like
against one Redis; every one of them claims due ticks with claim.lua, so each
tick is published by exactly one. The beat sleeps until the next due tick
and wakes at once when an entry changes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Any

import redis
from celery import Celery
from celery import beat as celery_beat

from celery_periodiq import registry
from celery_periodiq.config import Settings, redacted
from celery_periodiq.dispatch import Dispatcher
from celery_periodiq.entry import Entry
from celery_periodiq.heartbeat import ChangeListener, Heartbeat
from celery_periodiq.store import Store

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)

_RECONCILE_CHUNK = 500
_MAX_BACKOFF = 5.0


class Scheduler(celery_beat.Scheduler):
    """A Celery beat scheduler whose schedule lives in Redis.

    Set ``app.conf.beat_scheduler = "celery_periodiq:Scheduler"`` (or run
    ``celery beat -S periodiq``). Constructed with ``lazy=True`` (Celery's
    introspection) it touches nothing.
    """

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        self._dispatcher: Dispatcher | None = None
        self._started = False
        self._wake = threading.Event()
        self._redis_down = False
        self._backoff = 0.5
        super().__init__(app, *args, **kwargs)

    # Celery's hooks

    def setup_schedule(self) -> None:
        """Connect, register this beat, reconcile declared entries, start the helper threads."""
        self.settings = Settings.from_app(self.app)
        self.store = Store(self.settings)
        self.beat_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._heartbeat = Heartbeat(
            self.store, self.beat_id, self.settings.claim_lease, self._beat_info
        )
        self._dispatcher = Dispatcher(
            self.app, self.store, self.beat_id, lambda: self._heartbeat.last_ok
        )
        self._listener = ChangeListener(self.store.client, self.store.keys.changes, self._wake)
        self._listener.start()
        try:
            self._start()
        except redis.RedisError as error:
            self._redis_failed(error)
        self._heartbeat.start()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass: publish every due tick, then wait for the next one or a change.

        Returns 0 after waiting (Celery calls again at once), or a back-off
        in seconds while Redis is unreachable.
        """
        dispatcher = self._dispatcher
        if dispatcher is None:
            return self._limit
        self._wake.clear()
        try:
            if not self._started:
                self._start()
            while True:
                done = dispatcher.dispatch()
                if len(done.batch.claims) < self.settings.batch_size or not done.complete:
                    break
        except redis.RedisError as error:
            return self._redis_failed(error)
        if self._redis_down:
            logger.info(
                "periodiq: Redis reachable again; missed ticks follow their catch-up policy"
            )
            self._redis_down = False
            self._backoff = 0.5
            self._reconcile()  # a Redis that lost its data gets the declared entries back
        wait = done.seconds_until_next()
        limit = self._limit
        wait = limit if wait is None else min(wait, limit)
        if not done.complete:
            wait = min(wait, self.settings.claim_lease)
        if wait > 0:
            self._wake.wait(wait)
        return 0.0

    def close(self) -> None:
        """Stop the threads and unregister; the last beat to stop fires ``@shutdown`` entries."""
        if self._dispatcher is not None:
            self._listener.stop()
            self._heartbeat.stop()
            try:
                _, last = self.store.scripts.beat(self.beat_id, "stop", 0, {})
                if last:
                    fired = self._dispatcher.fire_events("shutdown")
                    logger.info("periodiq: last beat stopping; @shutdown entries sent: %s", fired)
            except redis.RedisError as error:
                logger.warning("periodiq: could not unregister beat %s: %s", self.beat_id, error)
            self._dispatcher = None
        super().close()

    @property
    def info(self) -> str:
        """Shown in ``celery beat``'s banner."""
        if not hasattr(self, "settings"):
            return "    . periodiq (lazy)"
        url, prefix = redacted(self.settings.redis_url), self.settings.key_prefix
        return f"    . periodiq -> {url} prefix {prefix!r}"

    # Ours

    @property
    def _limit(self) -> float:
        return float(self.max_interval or 300)

    def _start(self) -> None:
        _, first = self.store.scripts.beat(
            self.beat_id, "start", int(self.settings.claim_lease * 1000), self._beat_info()
        )
        self._reconcile()
        self._started = True
        if first and self._dispatcher is not None:
            fired = self._dispatcher.fire_events("reboot")
            logger.info("periodiq: first beat of the cluster; @reboot entries sent: %s", fired)

    def _declared(self) -> list[Entry]:
        entries: dict[str, Entry] = {}
        for entry in registry.from_beat_schedule(self.app, self.settings) + registry.declared(
            self.settings
        ):
            if entry.name in entries:
                logger.warning(
                    "periodiq: entry %r is declared twice; the @periodic one wins", entry.name
                )
            entries[entry.name] = entry
        return list(entries.values())

    def _reconcile(self) -> None:
        declared = self._declared()
        statuses: dict[str, int] = {}
        for start in range(0, len(declared), _RECONCILE_CHUNK):
            chunk = declared[start : start + _RECONCILE_CHUNK]
            for entry, status in zip(chunk, self.store.put("reconcile", chunk), strict=True):
                statuses[status] = statuses.get(status, 0) + 1
                if status == "runtime":
                    logger.warning(
                        "periodiq: entry %r exists as a runtime entry; its declaration is ignored",
                        entry.name,
                    )
        names = {entry.name for entry in declared}
        vanished = sorted(self.store.declared_names() - names)
        removed = self.store.scripts.remove(vanished, "code,config") if vanished else []
        logger.info(
            "periodiq: reconciled %d declared entries %s; removed %s",
            len(declared),
            statuses,
            removed,
        )

    def _redis_failed(self, error: Exception) -> float:
        if not self._redis_down:
            logger.error("periodiq: Redis unreachable (%s); retrying, beat keeps running", error)
            self._redis_down = True
        backoff = min(self._backoff, _MAX_BACKOFF, self._limit)
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
        return backoff

    def _beat_info(self) -> dict[str, Any]:
        from celery_periodiq import __version__

        dispatcher = self._dispatcher
        info: dict[str, Any] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": __version__,
            "ticks_claimed": dispatcher.ticks_claimed if dispatcher else 0,
        }
        if dispatcher is not None and dispatcher.last_tick_ms is not None:
            info["last_tick"] = dispatcher.last_tick_ms
        return info
