"""A beat's link to its broker: its own connection, and whether it can publish.

A beat that reaches the schedule's Redis but not its broker (connections refused, or
a partition that answers nothing) must not hold ticks it cannot send. Liveness is
progress, not a heartbeat thread: every broker call of a pass is timed here, on a
connection whose connect and socket timeouts are well under a lease, and a call that
fails, or makes no progress for half a lease, cuts the beat off. A beat cut off stops
claiming and gives up what it holds, so that the other beats take it over at once
(:meth:`celery_periodiq.beat.scheduler.Scheduler`); it probes its broker and rejoins
when it answers. When every beat is cut off, the claims wait in flight, as before.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from celery import Celery

from celery_periodiq.clock import elapsed

__all__ = ["BrokerLink"]

logger = logging.getLogger("celery_periodiq.dispatch")

_TIMEOUT_SHARE = 0.25
"""A broker connect or socket operation may take this share of a lease."""
_MIN_TIMEOUT = 1.0
_STALL_SHARE = 0.5
"""A broker call that makes no progress for this share of a lease cuts the beat off."""


class BrokerLink:
    """The beat's connection to its broker, and whether it can publish (thread-safe:
    the heartbeat thread asks :meth:`stalled` while the beat publishes)."""

    def __init__(self, app: Celery, lease: float) -> None:
        self.app = app
        self.lease = lease
        self.timeout = max(lease * _TIMEOUT_SHARE, _MIN_TIMEOUT)
        """Seconds a broker connect or socket operation may take."""
        self._lock = threading.Lock()
        self._held: list[Any] = []
        """The connection, when there is one: released when the link is (a Dispatcher
        made and dropped without closing it leaves no socket open)."""
        weakref.finalize(self, _release, self._held)
        self._busy_since: float | None = None
        """:func:`elapsed` of the last progress of the broker call under way (None: none)."""
        self.cut_off_since: float | None = None
        """:func:`elapsed` when the beat was cut off from its broker (None: it is not)."""
        self.last_cut_off = -math.inf
        """:func:`elapsed` when the beat was last cut off: it gave up every claim it had
        then, so none made before is its own any more."""

    @property
    def publishing(self) -> bool:
        """Whether the beat can publish (it is not cut off)."""
        return self.cut_off_since is None

    @contextlib.contextmanager
    def producer(self) -> Iterator[Any]:
        """A producer on the beat's own connection (made, with its timeouts, on first use
        and after a failure), timed: the calls inside count as one broker call, whose
        progress :meth:`advanced` marks.

        Raises:
            Exception: what connecting raised (the caller tells the broker's failures).
        """
        self._started()
        try:
            if not self._held:
                self._held.append(self._connect())
            yield self.app.amqp.Producer(self._held[0])
        except BaseException:
            self._close()
            raise
        finally:
            with self._lock:
                self._busy_since = None

    def advanced(self) -> None:
        """The broker call under way made progress (a flush went through)."""
        with self._lock:
            if self._busy_since is not None:
                self._busy_since = elapsed()

    def resumed(self) -> None:
        """The process was stopped and runs again: the broker call under way, which did
        not run meanwhile either, is timed from now."""
        self.advanced()

    def stalled(self) -> float | None:
        """Seconds the broker call under way has made no progress, once that is past the
        deadline (half a lease); else None."""
        with self._lock:
            since = self._busy_since
        if since is None:
            return None
        waited = elapsed() - since
        return waited if waited >= self.lease * _STALL_SHARE else None

    def cut_off(self) -> bool:
        """Mark the beat cut off from its broker; True the first time (since it last
        rejoined), when its claims must be given up."""
        with self._lock:
            if self.cut_off_since is not None:
                return False
            self.cut_off_since = self.last_cut_off = elapsed()
            return True

    def probe(self) -> None:
        """One round trip to the broker on a fresh connection (a Redis broker is pinged,
        an AMQP one is connected to), with the link's timeouts.

        Raises:
            Exception: what the broker's client raised.
        """
        self._close()
        connection = self._connect()
        try:
            if connection.transport.driver_type == "redis":
                connection.default_channel.client.ping()
            else:
                connection.connect()
        except BaseException:
            with contextlib.suppress(Exception):
                connection.release()
            raise
        self._held.append(connection)

    def rejoined(self) -> float:
        """The broker answers again; returns how long the beat was cut off (s)."""
        with self._lock:
            since, self.cut_off_since = self.cut_off_since, None
        return 0.0 if since is None else elapsed() - since

    def close(self) -> None:
        """Release the connection (the beat stops)."""
        self._close()

    def _started(self) -> None:
        with self._lock:
            self._busy_since = elapsed()

    def _connect(self) -> Any:
        """A connection to the broker whose connects and socket operations time out
        after :attr:`timeout` (the user's own, where shorter, stand)."""
        connection = self.app.connection_for_write()
        options = dict(connection.transport_options or {})
        driver = connection.transport.driver_type
        timeouts: tuple[str, ...] = ()
        if driver == "redis":
            timeouts = ("socket_timeout", "socket_connect_timeout")
        elif driver == "amqp":
            timeouts = ("read_timeout", "write_timeout")
        for name in timeouts:
            given = options.get(name)
            options[name] = self.timeout if given is None else min(float(given), self.timeout)
        given = connection.connect_timeout
        timeout = self.timeout if not given else min(float(given), self.timeout)
        connection.release()
        return self.app.connection_for_write(connect_timeout=timeout, transport_options=options)

    def _close(self) -> None:
        _release(self._held)


def _release(held: list[Any]) -> None:
    """Release the connection in ``held``, if any, and forget it."""
    while held:
        with contextlib.suppress(Exception):
            held.pop().release()
