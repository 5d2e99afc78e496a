"""Typed records that cross into the Lua scripts, each with the one encoder the Lua reads.

A :class:`Settlement` is how the beat settles one claimed tick (an ARGV of ack.lua); an
:class:`EventRow` is one event it adds to the entry's history with it. The Lua files
are pinned (tests/test_surface.py), so each ``to_lua`` writes exactly what they read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["HISTORY_FIELDS", "EventRow", "Settlement"]

_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(value, separators=(",", ":"))`` without building an encoder per call."""

HISTORY_FIELDS = ("kind", "tick", "at", "task_id", "host", "note", "duration", "missed", "error")
"""A history row as stored: a JSON array in this order, empty fields at its end cut
(``record()`` in _common.lua writes it; ``at`` is the Redis clock when it was written)."""


@dataclass(frozen=True, slots=True)
class EventRow:
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

    def to_lua(self) -> list[Any]:
        """The array ack.lua reads: empty text for no tick and for a run of itself alone."""
        missed = self.missed
        return [
            self.kind,
            "" if self.tick_ms is None else self.tick_ms,
            self.task_id,
            "" if missed == 1 else missed,
            self.note,
        ]


@dataclass(frozen=True, slots=True)
class Settlement:
    """How the beat settles one claimed tick: what ack.lua writes for it (see its header).

    Only the beat that still owns the claim settles it; the next tick is written only
    if the entry did not change since the claim. Fields left None are not sent.
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
        """The JSON object ack.lua decodes (one ARGV)."""
        fields: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "next": self.next_ms,
            "due": self.due_ms,
        }
        if self.inc is not None:
            fields["inc"] = self.inc
        if self.quarantine is not None:
            fields["quarantine"] = self.quarantine
        if self.counts is not None:
            fields["counts"] = self.counts
        if self.events is not None:
            fields["events"] = [event.to_lua() for event in self.events]
        if self.owed is not None:
            fields["owed"] = self.owed
        if self.late is not None:
            fields["late"] = self.late
        if self.runs is not None:
            fields["runs"] = self.runs
        if self.prev_ms is not None:
            fields["prev"] = self.prev_ms
        if self.queued is not None:
            fields["queued"] = self.queued
        if self.last_tick is not None:
            fields["last"] = {"last_enqueued": self.last_enqueued, "last_tick": self.last_tick}
        return _COMPACT(fields)
