"""``celery_periodiq:Scheduler``: the Celery beat scheduler, active-active over Redis.

Run as many ``celery beat`` processes (or ``celery worker -B``) as you like
against one Redis; every one of them claims due ticks with claim.lua, so each
tick is published by exactly one. The beat sleeps until the next due tick
and wakes at once when an entry changes. No error of Redis, the broker or one
entry's data ends the beat: each is logged once, backed off and retried.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery
from celery import beat as celery_beat

from celery_periodiq.beat.alerts import Alerts
from celery_periodiq.beat.broker_link import BrokerLink
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.heartbeat import ChangeListener, Heartbeat
from celery_periodiq.beat.index_watch import IndexWatch
from celery_periodiq.beat.outage import Outage
from celery_periodiq.beat.reconcile import Declarations
from celery_periodiq.config import Settings, redacted
from celery_periodiq.declare import registry
from celery_periodiq.errors import BrokerUnavailableError, ConfigurationError, ReplicasBehindError
from celery_periodiq.model.entry import Entry
from celery_periodiq.store.beat_scripts import Pulse
from celery_periodiq.store.entry_scripts import INDEX_VERSION
from celery_periodiq.store.store import Store

__all__ = ["Scheduler"]

logger = logging.getLogger("celery_periodiq.scheduler")

_PASS = "a beat pass"
_RECONCILING = "reconciling the declared entries"
_MAX_BACKOFF = 5.0
_ALERT_EVERY = 1.0  # seconds between two rounds of sending alert transitions
_INDEX_WATCH_EVERY = 30.0  # seconds between two looks for beats of older indexes
_LEGACY_PREFIX = "periodiq"
"""The prefix every app shared before each app got its own."""


class Scheduler(celery_beat.Scheduler):
    """A Celery beat scheduler whose schedule lives in Redis.

    Set ``app.conf.beat_scheduler = "celery_periodiq:Scheduler"`` (or run
    ``celery beat -S periodiq``). Constructed with ``lazy=True`` (Celery's
    introspection) it touches nothing.
    """

    lock_key: str | None = None
    """No lock: every beat is active. Said because celery-redbeat, once imported (Sentry's
    Celery integration imports it where installed), asks every beat for it at start."""

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        self._dispatcher: Dispatcher | None = None
        self._started = False
        self._wake = threading.Event()
        self._outage = Outage()
        """What fails now (passes, reconciling, the heartbeat): one ERROR, one INFO."""
        self._backoff = 0.5
        self._needs_reconcile = True
        """Write the declared entries (on start, and after Redis failed: it may have lost them)."""
        self._reconcile_after = 0.0
        self._lapses = 0
        """The heartbeat's lapses reconciled for."""
        self._pending_events: dict[str, set[str]] = {}
        self._alerts_at = 0.0
        self._index_watch_at = 0.0
        """When to send the pending alert transitions next (monotonic)."""
        """@reboot/@shutdown events still to send, with the entries already sent."""
        self._events_failing = False
        super().__init__(app, *args, **kwargs)

    # Celery's hooks

    def setup_schedule(self) -> None:
        """Read the settings and declarations, connect, start the helper threads; the first
        tick registers this beat and reconciles the declared entries."""
        try:
            self.settings = Settings.from_app(self.app)
            self._declared_entries = self._declared()
        except ConfigurationError as error:
            # One clear line and a non-zero exit, before anything is written; not a
            # traceback logged by Celery and printed again by its command line.
            logger.critical("periodiq: %s; the beat cannot start", error)
            raise SystemExit(1) from None
        self.store = Store(self.settings)
        self.beat_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._declarations = Declarations(self.store, self._declared_entries, self.beat_id)
        self._index_watch = IndexWatch(self.store)
        self._link = BrokerLink(self.app, self.settings.claim_lease)
        self._heartbeat = Heartbeat(
            self.store,
            self.beat_id,
            self.settings.claim_lease,
            self._beat_info,
            on_beats=self._on_pulse,
            outage=self._outage,
            declared=self._declarations.digest,
            link=self._link,
        )
        self._dispatcher = Dispatcher(
            self.app,
            self.store,
            self.beat_id,
            on_vanished=self._restore_declared,
            covered=self._heartbeat.covers,
            link=self._link,
            on_cut_off=self._heartbeat.withdraw,
        )
        self._alerts = Alerts(self.app, self.store, self.settings.alert_task)
        self._listener = ChangeListener(self.store.changes, self._changed)
        self._listener.start()
        self._log_settings()
        self._heartbeat.start()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass: publish every due tick, then wait for the next one or a change.

        Returns 0 after waiting (Celery calls again at once), or a back-off in
        seconds while Redis (or anything else) keeps failing. Never raises.
        """
        if self._dispatcher is None:
            return self._limit
        self._wake.clear()
        wait = self._guarded(self._pass)
        if wait is None:
            return self._backoff_seconds()
        if wait > 0:
            self._wake.wait(wait)
        return 0.0

    def close(self) -> None:
        """Stop the threads and unregister; the last beat to stop fires ``@shutdown`` entries."""
        if self._dispatcher is not None:
            self._listener.stop()
            self._heartbeat.stop()
            try:  # a burst's last settlements, left to the next pass
                self._dispatcher.settle_sent()
            except redis.RedisError as error:
                logger.warning(
                    "periodiq: beat %s stops with settlements unwritten (%s): their ticks "
                    "were sent; another beat takes their claims over after the lease and "
                    "sends them again, and the worker drops the second copy",
                    self.beat_id,
                    error,
                )
            try:
                if self._heartbeat.unregister():
                    fired = self._dispatcher.fire_events("shutdown")
                    logger.info("periodiq: last beat stopping; @shutdown entries sent: %s", fired)
            except (BrokerUnavailableError, ConfigurationError, redis.RedisError) as error:
                logger.warning("periodiq: beat %s could not stop cleanly: %s", self.beat_id, error)
            self._dispatcher = None
            self._link.close()
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

    def _pass(self) -> float:
        """Everything a tick does, in order; returns how long to wait for the next one."""
        dispatcher = self._dispatcher
        assert dispatcher is not None
        recovering = self._outage.failing(_PASS)
        if recovering:
            # A pass with nothing due asks Redis nothing: it must answer before the beat
            # says it is usable again. Then the declared entries are written at once.
            self.store.now_ms()
            self._outage.answered()
            self._reconcile_after = 0.0
        if not self._started:
            self._start()
        if self._declarations.due():  # a beat of other code came or went: rolling deploys
            self._needs_reconcile = True
        if self._heartbeat.lapses != self._lapses:  # taken for gone: declare all again
            self._lapses = self._heartbeat.lapses
            self._needs_reconcile = True
        if self._needs_reconcile and time.monotonic() >= self._reconcile_after:
            self._try_reconcile()
        if not self._link.publishing and not self._rejoined():
            self._outage.worked(_PASS)
            return self._link.timeout
        if self._pending_events and not self._needs_reconcile:
            self._fire_pending_events(dispatcher)
        while True:
            done = dispatcher.dispatch()
            if not done.full or not done.complete:
                break
        if not self._link.publishing:  # cut off in this pass: its broker is probed next
            self._outage.worked(_PASS)
            return 0.0
        if time.monotonic() >= self._alerts_at:
            self._alerts_at = time.monotonic() + _ALERT_EVERY
            self._alerts.send(dispatcher.mine())
        if time.monotonic() >= self._index_watch_at:
            self._index_watch_at = time.monotonic() + _INDEX_WATCH_EVERY
            self._index_watch.look()
        if recovering:
            self._backoff = 0.5
        self._outage.worked(_PASS)
        wait = done.seconds_until_next()
        limit = self._limit
        wait = limit if wait is None else min(wait, limit)
        if not done.complete:
            wait = min(wait, self.settings.claim_lease)
        if self._pending_events or self._needs_reconcile:
            wait = min(wait, _MAX_BACKOFF)
        return wait

    def _rejoined(self) -> bool:
        """A beat cut off from its broker asks it again (a round trip, within the link's
        timeouts); when it answers, the beat rejoins: its heartbeat keeps claims again,
        it is back in the ring, and it claims in this pass."""
        try:
            self._link.probe()
        except Exception as error:
            logger.debug(
                "periodiq: beat %s: its broker still does not answer: %s", self.beat_id, error
            )
            return False
        cut_off = self._link.rejoined()
        self._heartbeat.beat_once()
        logger.info(
            "periodiq: beat %s reaches its broker again after %.1f s; it rejoins",
            self.beat_id,
            cut_off,
        )
        return True

    def _guarded(self, step: Callable[[], float]) -> float | None:
        """Run ``step``; a failure is told to the outage (logged once in it) and gives None."""
        try:
            return step()
        except ConfigurationError as error:  # Redis holds another layout: nothing to retry
            logger.critical("periodiq: %s; the beat stops", error)
            raise SystemExit(1) from None
        except Exception as error:  # the beat must outlive anything one pass meets
            if isinstance(error, redis.RedisError) and not isinstance(error, ReplicasBehindError):
                self._needs_reconcile = True  # a Redis that restarted may have lost entries
            self._outage.failed(_PASS, error)
        return None

    def _changed(self, name: str | None) -> None:
        """An entry changed (None: some, or maybe some): look at it now."""
        if self._dispatcher is not None:
            self._dispatcher.touch(name)
        self._wake.set()

    def _backoff_seconds(self) -> float:
        backoff = min(self._backoff, _MAX_BACKOFF, self._limit)
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
        return backoff

    def _start(self) -> None:
        self.store.ensure_layout(record=True)
        pulse = self._heartbeat.beat_once("start")
        self._started = True
        if pulse.flag:
            logger.info("periodiq: first beat of the cluster: @reboot entries fire")
            self._pending_events.setdefault("reboot", set())

    def _try_reconcile(self) -> None:
        """Reconcile; a failure is told to the outage and retried a few seconds later, and
        never stops this pass from publishing the ticks that are due."""
        try:
            self._reconcile()
        except Exception as error:
            self._reconcile_after = time.monotonic() + _MAX_BACKOFF
            self._outage.failed(_RECONCILING, error)
            return
        self._needs_reconcile = False
        self._outage.worked(_RECONCILING)
        logger.info(
            "periodiq: beat %s ready; %d entries under prefix %r",
            self.beat_id,
            self.store.count(),
            self.settings.key_prefix,
        )

    def _fire_pending_events(self, dispatcher: Dispatcher) -> None:
        """Send the @reboot entries this beat owes; a broker failure keeps them owed."""
        for event, done in list(self._pending_events.items()):
            try:
                fired = dispatcher.fire_events(event, done)
            except BrokerUnavailableError as error:
                if not self._events_failing:
                    logger.error("periodiq: %s; @%s entries are sent when it returns", error, event)
                self._events_failing = True
                continue
            self._events_failing = False
            del self._pending_events[event]
            logger.info("periodiq: @%s entries sent: %s", event, sorted(done) or fired)

    def _log_settings(self) -> None:
        settings = self.settings
        origin = {
            "periodiq_redis_url": "periodiq_redis_url",
            "broker_url": "the broker URL",
            "default": "a default",
        }[settings.url_origin]
        logger.info(
            "periodiq: app %r keeps its schedule in Redis at %s (from %s) under prefix %r",
            settings.namespace,
            redacted(settings.redis_url),
            origin,
            settings.key_prefix,
        )
        if settings.url_origin == "default":
            logger.warning(
                "periodiq: neither periodiq_redis_url nor a redis:// broker_url is set; using %s",
                settings.redis_url,
            )
        explicit = self.app.conf.get("periodiq_key_prefix") is not None
        if not explicit:
            self._warn_of_legacy_prefix()

    def _warn_of_legacy_prefix(self) -> None:
        try:
            found = self.store.holds_schedule_of(_LEGACY_PREFIX)
        except redis.RedisError:
            return  # Redis is not there yet: the first pass says so
        if found:
            logger.warning(
                "periodiq: Redis holds a schedule under the shared prefix %r, from before each "
                "app got its own (this app uses %r); set periodiq_key_prefix = %r to keep "
                "using it",
                _LEGACY_PREFIX,
                self.settings.key_prefix,
                _LEGACY_PREFIX,
            )

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
        """Write the declared entries, remove those no live beat declares (see
        :mod:`celery_periodiq.beat.reconcile`)."""
        lease = self.settings.claim_lease
        unsure = lease - self._outage.redis_answered_for()
        again = self._declarations.reconcile(self._publish_generation, unsure)
        if again is not None:
            self._reconcile_after = time.monotonic() + again

    def _publish_generation(self, generation: int) -> None:
        """Tell every partition that a beat of ``generation`` lives (a heartbeat now, and
        with every heartbeat after), before anything is written with it."""
        self._heartbeat.generation = generation
        self._heartbeat.beat_once()

    def _on_pulse(self, pulse: Pulse) -> None:
        """A heartbeat's answer (the heartbeat thread's, or the start's): the live beats
        make the ring; when their declaration sets changed, wake up to reconcile."""
        if self._dispatcher is not None:
            self._dispatcher.watch(pulse.publishing)
        if self._declarations.heard(pulse):
            self._wake.set()

    def _restore_declared(self, names: list[str]) -> None:
        """Write back the declarations of entries whose definitions vanished from Redis."""
        wanted = set(names)
        lost = [entry for entry in self._declared_entries if entry.name in wanted]
        if lost:
            generation, audit = self._declarations.generation, self._declarations.audit()
            self.store.put("reconcile", lost, generation=generation, audit=audit)
            logger.warning(
                "periodiq: declared entries %s were missing from Redis; written again",
                [entry.name for entry in lost],
            )

    def _beat_info(self) -> dict[str, Any]:
        from celery_periodiq._version import __version__

        dispatcher = self._dispatcher
        info: dict[str, Any] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": __version__,
            "ticks_claimed": dispatcher.ticks_claimed if dispatcher else 0,
            "partitions": dispatcher.watched if dispatcher else 0,
            "indexes": INDEX_VERSION,
        }
        if dispatcher is not None and dispatcher.last_tick_ms is not None:
            info["last_tick"] = dispatcher.last_tick_ms
        return info
