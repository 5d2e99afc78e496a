"""What a beat says while something fails: one ERROR when an outage begins, one INFO
when it ends.

A beat meets one outage of its Redis in several places at once: its heartbeat thread,
the reconciliation of the declared entries, its passes. Each reports to one
:class:`Outage` under its own name. The outage begins with the first failure, logged at
ERROR saying what kind it is (Redis unreachable, Redis refusing a command, replicas
behind, anything else); a failure of another kind during it is logged too, one of a
kind already told is not. It ends, logged at INFO, once every part that failed has
worked again, each having had an answer from Redis.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from celery_periodiq.errors import ReplicasBehindError
from celery_periodiq.store.views import wrong_type

__all__ = ["Outage"]

logger = logging.getLogger("celery_periodiq.outage")


class Outage:
    """The parts of a beat failing now (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: set[str] = set()
        self._told: set[str] = set()
        """The kinds of failure logged since the outage began."""
        self._since = 0.0
        self._redis_back: float | None = None
        """When Redis answered again after it last failed a part (monotonic); None while
        it fails, and before it first answered: a beat that starts cannot tell a live
        peer from a heartbeat that ran out while no beat could reach Redis (an outage
        it never saw) any better than one that lost Redis."""

    def answered(self) -> None:
        """Redis answered a part (after failing, it is back from now)."""
        with self._lock:
            if self._redis_back is None:
                self._redis_back = time.monotonic()

    def redis_answered_for(self) -> float:
        """Seconds since Redis first answered, or answered again after it last failed a
        part (0 until then, and while it fails). Until a heartbeat's lease has passed, the
        beats seen live are not all that live: theirs may have run out while no beat
        reached Redis."""
        with self._lock:
            if self._redis_back is None:
                return 0.0
            return time.monotonic() - self._redis_back

    def failing(self, part: str) -> bool:
        """Whether ``part`` failed and has not worked since."""
        with self._lock:
            return part in self._failing

    def failed(self, part: str, error: Exception) -> None:
        """``part`` (e.g. "a beat pass") failed with ``error``: logged at ERROR if it
        begins an outage or is of a kind not told yet in it, else at DEBUG."""
        kind = _kind(error)
        with self._lock:
            if not self._failing:
                self._since = time.monotonic()
            self._failing.add(part)
            if isinstance(error, redis.RedisError):
                self._redis_back = None
            if kind in self._told:
                logger.debug("periodiq: %s failed again: %s", part, error)
            else:
                self._told.add(kind)
                _log_failure(part, error)

    def worked(self, part: str) -> None:
        """``part`` worked, Redis answering it: if it was the last part failing, the outage
        is over (logged at INFO)."""
        self.answered()
        with self._lock:
            if part not in self._failing:
                return
            self._failing.discard(part)
            if not self._failing:
                self._told.clear()
                logger.info(
                    "periodiq: usable again after %.1f s; missed ticks follow their catch-up "
                    "policy",
                    time.monotonic() - self._since,
                )


def _kind(error: Exception) -> str:
    if isinstance(error, ReplicasBehindError):
        return "replicas behind"
    if isinstance(error, redis.ResponseError):
        return "refused"
    if isinstance(error, redis.RedisError):
        return "unreachable"
    return type(error).__name__


def _log_failure(what: str, error: Exception) -> None:
    """Log a failure, saying what kind it is: Redis unreachable, Redis refusing a command
    (WRONGTYPE: data written by something else), or anything else."""
    if isinstance(error, ReplicasBehindError):
        logger.error("periodiq: %s failed: %s; retrying, beat keeps running", what, error)
    elif isinstance(error, redis.ResponseError):
        hint = " (a key of the schedule holds data written by something else)"
        logger.error(
            "periodiq: %s failed: Redis refused a command: %s%s; retrying, beat keeps running",
            what,
            error,
            hint if wrong_type(error) else "",
        )
    elif isinstance(error, redis.RedisError):
        logger.error(
            "periodiq: %s failed: the schedule's Redis unreachable (%s); retrying, beat "
            "keeps running",
            what,
            error,
        )
    else:
        logger.error("periodiq: %s failed; retrying, beat keeps running", what, exc_info=error)
