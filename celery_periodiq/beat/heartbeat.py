"""Background threads of a beat: its heartbeat, and the listener that wakes it on changes.

:class:`Heartbeat` is the one owner of a beat's heartbeat (beat.lua): registering it,
refreshing it, and unregistering it when the beat stops."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from celery_periodiq.beat.broker_link import BrokerLink
from celery_periodiq.beat.outage import Outage
from celery_periodiq.clock import SAFE_SHARE, elapsed
from celery_periodiq.store.beat_scripts import Pulse
from celery_periodiq.store.store import Store

__all__ = ["ChangeListener", "Heartbeat"]

logger = logging.getLogger("celery_periodiq.heartbeat")

_CHECK_SHARE = 1 / 12
"""How often (a share of a lease) the broker call under way is looked at; this thread
woken later than that again took the process for stopped (a thread merely slow to get
the GIL is late by milliseconds). The heartbeat is refreshed three times a lease."""
_LAST_REFRESH = 10.0
"""Seconds a stopping beat waits for a refresh under way: a Redis command's timeout (5 s,
store/connect.py) twice over."""


class Heartbeat(threading.Thread):
    """Refresh this beat's heartbeat three times per lease, and know since when it has
    held without a gap.

    Other beats take over this beat's claimed ticks only once both the claim's lease
    and the heartbeat have run out, so a slow publish never hands a tick to a second
    beat while this one lives. A beat that was stopped (SIGSTOP, a VM paused, a long
    GC) may find its heartbeat refreshed again by this thread and still have lost its
    claims while it was stopped: :meth:`covers` tells, from the gaps between refreshes.
    Liveness is progress, not this thread: a beat cut off from its broker (``link``: a
    publish failed, or made no progress for half a lease) is :meth:`withdraw`-n: its
    claims go to the other beats at once, its heartbeat keeps none until it rejoins,
    and it leaves the ring.
    Each heartbeat also says which declaration set the beat runs with (``declared``)
    and keeps its generation alive in every partition, so that no beat removes or
    overwrites what this one declares while it lives.
    """

    def __init__(
        self,
        store: Store,
        beat_id: str,
        lease: float,
        info: Callable[[], dict[str, Any]],
        on_beats: Callable[[Pulse], None] | None = None,
        outage: Outage | None = None,
        declared: str = "",
        link: BrokerLink | None = None,
    ) -> None:
        super().__init__(name="periodiq-heartbeat", daemon=True)
        self.store = store
        self.beat_id = beat_id
        self.lease = lease
        self.info = info
        self.on_beats = on_beats
        self._lock = threading.Lock()
        self._since = math.inf
        """:func:`elapsed` when the heartbeat began to hold without a gap."""
        self._until = -math.inf
        """:func:`elapsed` when it runs out, unless it is refreshed before."""
        self.lapses = 0
        """How often it ran out before it was refreshed again (the beat frozen, or cut
        off from Redis): meanwhile other beats took this one for gone, and may have
        removed what it declares."""
        self.declared = declared
        """The digest of this beat's declaration set."""
        self.generation: int | None = None
        """Its generation, once declared."""
        self.link = link
        """Whether the beat can publish; None: it always can (tests)."""
        self._writing = threading.Lock()
        """Held while the heartbeat is written, and while the beat withdraws: a refresh
        under way never brings back a beat that has just given its claims up."""
        self._stopped = threading.Event()
        self._outage = outage or Outage()
        """Told of every failure and recovery: the beat's, so that one outage of Redis is
        one ERROR in its log, however many of its parts meet it."""

    def beat_once(self, action: str = "alive") -> Pulse:
        """Refresh the heartbeat now (``"start"``: register the beat); returns the answer.
        A beat cut off from its broker says so, and keeps no claims with it."""
        with self._writing:
            publishing = self.link is None or self.link.publishing
            sent = elapsed()  # the heartbeat's TTL counts from after here
            ttl = int(self.lease * 1000)
            info = {**self.info(), "publishing": int(publishing)}
            pulse = self.store.scripts.heartbeat(self.beat_id, action, ttl, info, self.declared)
            self.store.alive(
                self.beat_id, pulse.now_ms + ttl, pulse.now_ms, self.generation, publishing
            )
            if publishing:
                self._refreshed(sent, elapsed())
        if self.on_beats is not None:
            self.on_beats(pulse)
        return pulse

    def withdraw(self, why: str) -> None:
        """The beat cannot reach its broker (``why``): once, until it rejoins, it stops
        counting on its claims (:meth:`covers` says no), gives them up for the other
        beats to take over now, and tells the others it is out of the ring. A failure of
        the schedule's Redis meanwhile only delays that: its heartbeat then keeps no
        claims, which are taken over when their lease runs out."""
        if self.link is None or not self.link.cut_off():
            return
        given: int | str = "its"
        with self._writing:
            with self._lock:
                self._since, self._until = math.inf, -math.inf
            try:
                given = self.store.release(self.beat_id)
            except Exception as error:  # Redis too: the claims run out with their lease
                logger.warning(
                    "periodiq: beat %s could not give its claims up: %s", self.beat_id, error
                )
        logger.error(
            "periodiq: beat %s cannot reach its broker (%s); it stops claiming and hands "
            "%s claimed ticks to the other beats until its broker answers",
            self.beat_id,
            why,
            given,
        )
        with contextlib.suppress(Exception):  # the next refresh says it otherwise
            self.beat_once()

    def _refreshed(self, sent: float, received: float) -> None:
        """A refresh sent at ``sent`` was written (everywhere claims look) by ``received``
        (both :func:`elapsed`): it holds until ``sent`` + TTL. Written before the last
        one ran out, it extends it; else there was a gap, in which other beats may have
        taken this beat's claims over."""
        with self._lock:
            if received > self._until:
                self._since = received  # written by then, at the latest
                self.lapses += self._until > -math.inf
            self._until = max(self._until, sent + self.lease)

    def covers(self, since: float, now: float) -> bool:
        """Whether the heartbeat held, without a gap, from ``since`` to ``now`` (both
        :func:`elapsed`), with :data:`SAFE_SHARE` of each refresh counted on."""
        with self._lock:
            safe_until = self._until - self.lease * (1 - SAFE_SHARE)
            return self._since <= since and now < safe_until

    def run(self) -> None:
        check = self.lease * _CHECK_SHARE
        due = refresh_at = elapsed() + check
        while not self._stopped.wait(max(due - elapsed(), 0.0)):
            # woken this late, the whole process did not run (SIGSTOP, a VM paused): nor
            # did its broker call, which is timed afresh, not taken for a broker gone
            frozen = elapsed() - due >= check
            due = elapsed() + check
            if frozen and self.link is not None:
                self.link.resumed()
            stalled = None if self.link is None else self.link.stalled()
            if stalled is not None:
                self.withdraw(f"broker unreachable (no answer for {stalled:.1f} s)")
            if elapsed() < refresh_at:
                continue
            refresh_at = elapsed() + self.lease / 3
            try:
                self.beat_once()
            except Exception as error:  # the thread must outlive any failure; logged once
                self._outage.failed(f"the heartbeat of beat {self.beat_id}", error)
            else:
                self._outage.worked(f"the heartbeat of beat {self.beat_id}")

    def stop(self) -> None:
        """Stop refreshing (the heartbeat then expires unless the beat unregisters)."""
        self._stopped.set()

    def unregister(self) -> bool:
        """Take this beat out of the registry and every partition now (its heartbeat's
        last word, after :meth:`stop`); returns whether it was the last live beat.

        A refresh the thread has under way ends first (for as long as a Redis command may
        take): landing after the stop, it would bring the beat back for a whole lease.

        Raises:
            redis.RedisError: the schedule's Redis failed.
        """
        if self.is_alive() and self is not threading.current_thread():
            self.join(_LAST_REFRESH)
        pulse = self.store.scripts.heartbeat(self.beat_id, "stop", 0, {})
        self.store.gone(self.beat_id)
        return pulse.flag


class ChangeListener(threading.Thread):
    """Call ``on_change`` whenever an entry is created, changed, paused or deleted.

    Blocks on a pub/sub subscription; each message is the entry's name, or
    ``"<n> entries"`` for a bulk change (``on_change(None)``). After a lost
    connection it subscribes again and calls ``on_change(None)`` once, since
    changes may have been missed.
    """

    def __init__(
        self, subscribe: Callable[[], Any], on_change: Callable[[str | None], None]
    ) -> None:
        super().__init__(name="periodiq-changes", daemon=True)
        self.subscribe = subscribe
        """Subscribes to the changes channel: :meth:`Store.changes`."""
        self.on_change = on_change
        self._stopped = threading.Event()
        self.subscribed = threading.Event()

    def run(self) -> None:
        backoff = 0.5
        while not self._stopped.is_set():
            pubsub: Any = None
            try:
                pubsub = self.subscribe()
                self.subscribed.set()
                self.on_change(None)
                backoff = 0.5
                while not self._stopped.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None:
                        data = str(message.get("data") or "")
                        self.on_change(None if data.endswith(" entries") else data)
            except Exception as error:  # lost connection, or anything else: subscribe again
                if self.subscribed.is_set():
                    logger.warning("periodiq: change listener lost Redis (%s); retrying", error)
                self.subscribed.clear()
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                with contextlib.suppress(Exception):
                    if pubsub is not None:
                        pubsub.close()

    def stop(self) -> None:
        """Stop listening (within a second)."""
        self._stopped.set()
