"""Typed records that cross into the Lua scripts: what a run's guard sends and is told.

Plain dataclasses of primitives, shared by the worker (which fills them in) and the
store's script wrappers (which encode them as ARGV and decode the replies); nothing
here talks to Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Admission", "RunEnd", "RunStart"]


@dataclass(frozen=True, slots=True)
class RunStart:
    """What begin.lua needs to know about a run."""

    task_id: str
    tick_ms: int | None
    """The tick's nominal instant; None for a manual run."""
    min_gap_ms: int
    """interval - tolerance: the earliest a scheduled run may follow the last one."""
    overlap: str
    ttl_ms: int
    """Running marker TTL: the run's hard limit."""
    retries: int
    host: str
    history_length: int
    published: bool = True
    """True for messages from the beat or trigger(): their entry must still exist."""
    expires_ms: int | None = None
    """When the message stops being worth running, on the Redis clock."""
    attempt: str = ""
    """This delivery's own token: a begin sent again after its reply was lost (Redis
    failing over) is recognised as the same attempt, not taken for a duplicate."""
    backfill: bool = False
    """A past tick published by :meth:`Periodiq.backfill`: no tolerance drop, and not
    dropped for being older than the ticks the guard remembers."""
    catchup: bool = False
    """A run sent too late to keep its place: no tolerance drop, and the next run's
    counts from the last run that kept its place."""
    plain: bool = False
    """A plain task's run (no ``PeriodicTask``): the duplicate and expiry checks only,
    no running marker."""


@dataclass(frozen=True, slots=True)
class Admission:
    """begin.lua's verdict."""

    outcome: str
    """started, resumed, unguarded, duplicate, dropped_too_soon, skipped_overlap, expired,
    deleted or damaged."""
    now_ms: int
    last_run_ms: int | None
    note: str = ""
    """Why a run was refused (for damaged: which key holds the wrong type)."""

    @property
    def runs(self) -> bool:
        """Whether the body may run."""
        return self.outcome in ("started", "resumed", "unguarded")

    @property
    def guarded(self) -> bool:
        """Whether the run is tracked (its end is recorded)."""
        return self.outcome in ("started", "resumed")


@dataclass(frozen=True, slots=True)
class RunEnd:
    """What finish.lua records about a run's end."""

    task_id: str
    tick_ms: int | None
    outcome: str
    """succeeded, failed, timeboxed, revoked or retrying."""
    error: str
    duration_ms: int
    host: str
    history_length: int
    final: bool = True
    retry_ttl_ms: int = 0
    ran: bool = True
    """False for a message dropped before its run (revoked or expired in the queue)."""
