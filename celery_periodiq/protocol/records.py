"""Typed records that cross into the Lua scripts, one definition each.

What the beat sends when it settles claimed ticks: a :class:`Settlement` per tick (an
ARGV of ack.lua) with the :class:`EventRow` events it adds to the entry's history, each
written for Lua by its one ``to_lua``; what a run's guard sends and is told
(:class:`RunStart`, :class:`Admission`, :class:`RunEnd`), filled in by the worker and
encoded by the store's script wrappers. The Lua files are pinned (tests/test_surface.py),
so each encoder writes exactly what they read. Nothing here talks to Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quoted
from typing import NamedTuple

__all__ = ["HISTORY_FIELDS", "Admission", "EventRow", "RunEnd", "RunStart", "Settlement"]

HISTORY_FIELDS = ("kind", "tick", "at", "task_id", "host", "note", "duration", "missed", "error")
"""The positions of an event's values in its stored JSON array (``record()`` in
lua/_common.lua writes it, empty fields at its end cut); with a tick, "at" is
milliseconds after it, else the Redis clock when it was written."""


class EventRow(NamedTuple):
    """One event of an entry's history that the beat writes when it settles a claim.

    ack.lua takes it as ``[kind, tick, task_id, missed, note]`` (:meth:`to_lua`) and
    stores it in the order of :data:`HISTORY_FIELDS`, stamped with the Redis clock.
    """

    kind: str
    """``enqueued``, ``missed``, ``skipped_overlap`` or ``rebuilt``."""
    tick_ms: int | None
    """The tick it is about (ms since the epoch); None: no tick."""
    task_id: str = ""
    """The run's task id: "" for the one the tick derives, "-" when no task was sent."""
    missed: int = 1
    """How many ticks the run stands for (1: just itself)."""
    note: str = ""

    def to_lua(self) -> str:
        """The JSON array ack.lua reads: empty text for no tick and for a run of itself
        alone (written as :func:`json.dumps` with compact separators would)."""
        tick = '""' if self.tick_ms is None else self.tick_ms
        missed = '""' if self.missed == 1 else self.missed
        return (
            f"[{_quoted(self.kind)},{tick},{_quoted(self.task_id)},{missed},{_quoted(self.note)}]"
        )


class Settlement(NamedTuple):
    """How the beat settles one claimed tick: what ack.lua writes for it (see its header).

    Only the beat that still owns the claim settles it; the next tick is written only
    if the entry did not change since the claim. Fields left None are not sent.

    A named tuple, like :class:`EventRow`: the beat makes one per tick, and a frozen
    dataclass sets each of its fields through ``object.__setattr__``, which cost the
    beat about 2 % of its instructions per tick (``bench/tick_cost.py --instructions``).
    """

    id: str
    """The claim's tick id (claim.lua's)."""
    name: str
    version: int
    """The entry's version seen at the claim."""
    inc: str | None = None
    """The entry's incarnation when claimed: a settlement of one deleted since changes
    nothing but its claim."""
    next_ms: int | None = None
    """The next tick's nominal instant; None (with ``due_ms``) when the schedule ended."""
    due_ms: int | None = None
    """The next tick's due instant (jitter applied)."""
    quarantine: str | None = None
    """Why the entry is quarantined: flagged invalid, no longer scheduled."""
    counts: dict[str, int] | None = None
    """Added to the entry's counters, by reason."""
    events: tuple[EventRow, ...] | None = None
    """Appended to the entry's history."""
    owed: int | None = None
    """Ticks the entry's next run stands for besides its own (folded into it)."""
    late: tuple[int, ...] | None = None
    """For each tick published, ms from its due instant to its publishing."""
    runs: int | None = None
    """Ticks published, added to the entry's runs (what ``max_runs`` counts)."""
    prev_ms: int | None = None
    """The newest tick this claim handled: the next tick's tolerance counts from it."""
    queued: tuple[str, int] | None = None
    """A published run that has not started: its task id and for how long (ms)."""
    last_enqueued: int | None = None
    """With ``last_tick``: the claim's instant and the last tick published (ms)."""
    last_tick: int | None = None

    def to_lua(self) -> str:
        """The JSON object ack.lua decodes (one ARGV): what :func:`json.dumps` with compact
        separators writes for it, with the fields left None out but ``next`` and ``due``.

        Written out here rather than by the JSON encoder: the beat encodes one per tick,
        and the encoder's setup for each call cost more than the rest of the settlement.
        """
        text = (
            f'{{"id":{_quoted(self.id)},"name":{_quoted(self.name)},"version":{self.version},'
            f'"next":{_number(self.next_ms)},"due":{_number(self.due_ms)}'
        )
        if self.inc is not None:
            text += f',"inc":{_quoted(self.inc)}'
        if self.quarantine is not None:
            text += f',"quarantine":{_quoted(self.quarantine)}'
        if self.counts is not None:
            counts = ",".join(f"{_quoted(reason)}:{n}" for reason, n in self.counts.items())
            text += f',"counts":{{{counts}}}'
        if self.events is not None:
            text += f',"events":[{",".join(map(EventRow.to_lua, self.events))}]'
        if self.owed is not None:
            text += f',"owed":{self.owed}'
        if self.late is not None:
            text += f',"late":[{",".join(map(str, self.late))}]'
        if self.runs is not None:
            text += f',"runs":{self.runs}'
        if self.prev_ms is not None:
            text += f',"prev":{self.prev_ms}'
        if self.queued is not None:
            text += f',"queued":[{_quoted(self.queued[0])},{self.queued[1]}]'
        if self.last_tick is not None:
            last = f'"last_enqueued":{_number(self.last_enqueued)},"last_tick":{self.last_tick}'
            text += f',"last":{{{last}}}'
        return text + "}"


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
    """A plain task's run (no ``PeriodicTask``): the duplicate, expiry and floor checks
    only, no running marker."""
    floor_ms: int = 0
    """The least time between this run's start and the last run's (half an interval;
    0: none): a scheduled run, catch-up or not, that would start sooner is dropped."""
    group: str = ""
    """The entry's group when ``periodiq_group_limits`` limits it, else "" (no limit)."""
    group_limit: int = 0
    """At most this many runs of :attr:`group` at once (0: no limit)."""
    group_wait: bool = False
    """A run over the group limit is told "waiting_group" (its caller sends it again)
    instead of being refused ("dropped_group_limit")."""


@dataclass(frozen=True, slots=True)
class Admission:
    """begin.lua's verdict."""

    outcome: str
    """started, resumed, unguarded, duplicate, dropped_too_soon, skipped_overlap,
    dropped_group_limit, waiting_group (not recorded: the run waits for a slot of its
    group), expired, deleted or damaged."""
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
    """False for a message dropped before its run (revoked or expired in the queue, or
    refused after its begin)."""
    attempt: str = ""
    """The delivery's attempt token (:attr:`RunStart.attempt`) if it began: its start's
    token is forgotten (it sends no begin again), and a run refused after its begin ends
    its own start, no other delivery's."""
    group: str = ""
    """The run's group when a limit applies to it (:attr:`RunStart.group`), else "": a
    final end frees its slot."""


def _number(value: int | None) -> str:
    return "null" if value is None else str(value)
