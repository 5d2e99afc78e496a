"""What the store reads, as records: an entry as stored (:class:`StoredEntry`), its
history (:class:`Event`), the guard's memory of its runs, the live beats and the
declaration sets; and the decoding of stored values into them, defensive against
garbage written by someone else (one entry's damage never fails a whole read), and
of the error replies that say so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import redis

from celery_periodiq.errors import EntryError
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import from_ms
from celery_periodiq.schedules import EventSchedule

__all__ = [
    "BeatInfo",
    "DeclarationSet",
    "Event",
    "RunMemory",
    "StoredEntry",
    "wrong_type",
]

# State fields the flat view of :attr:`StoredEntry.state` leaves out (kept structured).
_STRUCTURED = ("n", "running", "queued", "seen", "top")


def wrong_type(error: BaseException) -> bool:
    """Whether Redis refused a command because a key holds another type (WRONGTYPE)."""
    return isinstance(error, redis.ResponseError) and "WRONGTYPE" in str(error)


def _ms(value: object) -> datetime | None:
    """An instant from a stored millisecond count; None when absent or unreadable."""
    try:
        return from_ms(int(str(value))) if value not in (None, "") else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _int(value: object) -> int:
    try:
        return int(str(value or 0))
    except (TypeError, ValueError):
        return 0


def _flat(state: dict[str, Any]) -> dict[str, str]:
    """The state as text fields, counters as ``n:<reason>``: what the CLI and API read."""
    flat = {
        key: str(value)
        for key, value in state.items()
        if key not in _STRUCTURED and value is not None and not isinstance(value, dict | list)
    }
    counters = state.get("n")
    if isinstance(counters, dict):
        flat.update({f"n:{reason}": str(count) for reason, count in counters.items()})
    return flat


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """An entry as stored: its definition (if readable) and its run state."""

    name: str
    definition: str
    entry: Entry | None
    """None when the stored definition is unreadable, invalid or gone."""
    invalid: str | None
    """Why the entry cannot run: its definition's problem, or its quarantine reason."""
    state: dict[str, str]
    """The run state as text: next, last_run, last_status, ..., counters as ``n:<reason>``."""
    running: str | None
    """Task id of the unfinished run, if any."""
    due: datetime | None = None
    """When the entry is next due in the due set (jitter applied); None when it is not."""
    glanced: str | None = None
    """The status, when the entry was read by :meth:`Store.glance` (no ``entry``)."""

    @property
    def next_run(self) -> datetime | None:
        """The nominal instant of the next tick, None when none is scheduled."""
        if self.paused or self.invalid:
            return None
        if not self.state.get("next") and self.due is not None:
            return self.due  # the beat rebuilds a missing state at its due instant
        return _ms(self.state.get("next"))

    @property
    def last_run(self) -> datetime | None:
        """When the last run really began (the worker's Redis clock)."""
        return _ms(self.state.get("last_run"))

    @property
    def paused(self) -> bool:
        return self.state.get("paused") == "1"

    @property
    def overdue_since(self) -> datetime | None:
        """Since when no run has succeeded for longer than ``alert_after``; None if not so."""
        return _ms(self.state.get("overdue"))

    @property
    def failing_since(self) -> datetime | None:
        """Since when ``failure_threshold`` runs in a row failed; None if not so."""
        return _ms(self.state.get("failing"))

    @property
    def last_success(self) -> datetime | None:
        """When a run last succeeded."""
        return _ms(self.state.get("last_ok"))

    @property
    def alerts(self) -> list[str]:
        """``overdue`` and/or ``failing``, or nothing."""
        return [
            kind
            for kind, since in (("overdue", self.overdue_since), ("failing", self.failing_since))
            if since
        ]

    @property
    def note(self) -> str | None:
        return self.state.get("note") or None

    @property
    def paused_until(self) -> datetime | None:
        """When a timed pause ends (a beat then resumes the entry); None when the entry is
        not paused, or paused until resumed."""
        return _ms(self.state.get("until")) if self.paused else None

    @property
    def counters(self) -> dict[str, int]:
        """Counts by reason: enqueued, started, succeeded, failed, dropped, skipped_overlap, ..."""
        return {key[2:]: _int(value) for key, value in self.state.items() if key.startswith("n:")}

    @property
    def version(self) -> int:
        return _int(self.state.get("version"))

    @property
    def runs(self) -> int:
        """Ticks the beat published for the entry: what ``max_runs`` counts (a run that
        stands for missed ticks once, a manual run not at all)."""
        return _int(self.state.get("runs"))

    @property
    def runs_left(self) -> int | None:
        """How many more ticks the beat may publish; None when the entry has no
        ``max_runs`` (or is unreadable)."""
        if self.entry is None or self.entry.max_runs is None:
            return None
        return max(self.entry.max_runs - self.runs, 0)

    @property
    def status(self) -> str:
        """``quarantined``, ``paused``, ``running``, ``disabled``, ``ended`` or ``active``."""
        if self.glanced is not None:
            return self.glanced
        entry = self.entry
        return _status(
            self,
            entry is not None and not entry.enabled,
            entry is not None and not isinstance(entry.parsed_schedule(), EventSchedule),
        )


@dataclass(frozen=True, slots=True)
class Event:
    """One history event of an entry."""

    id: str
    kind: str
    at: datetime
    tick: datetime | None
    task_id: str | None
    fields: dict[str, str] = field(default_factory=dict)
    """Everything else recorded: host, duration, error, missed, note."""


@dataclass(frozen=True, slots=True)
class RunMemory:
    """What :meth:`Store.run_memory` read."""

    began: set[int]
    """Ticks (ms) known to have begun: the newest ones the guard keeps, the backfilled
    ones, and those in the history."""
    running: str | None
    """The task id of the unfinished run, if any."""
    events: list[Event]
    """The whole history, newest first."""


@dataclass(frozen=True, slots=True)
class BeatInfo:
    """A live beat instance, from its heartbeat."""

    id: str
    host: str
    pid: int
    version: str
    started: datetime | None
    seen: datetime | None
    last_tick: datetime | None
    ticks_claimed: int
    partitions: int = 0
    """How many partitions the beat watches (its share of the ring)."""
    declared: str = ""
    """The digest of the declaration set it runs with ("" when it says none)."""
    indexes: str = ""
    """The version of the read side's indexes its scripts keep ("": an older beat, whose
    scripts keep none)."""
    publishing: bool = True
    """False while it cannot reach its broker: it claims nothing, the others have its
    share (a beat of an older version always says True)."""


@dataclass(frozen=True, slots=True)
class DeclarationSet:
    """What one version of the code declares, as stored by the first beat running it."""

    digest: str
    generation: int | None
    """When it was first declared (ms); None when unreadable."""
    names: dict[str, str] | None
    """Each declared entry's name, with its definition's digest; None when unreadable."""
    problem: str | None = None
    """Why it cannot be read (another type, garbage), or None."""


def _decoded(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _declaration_set(key: str, digest: str, reply: object) -> DeclarationSet:
    """A declaration set from its HMGET reply (or the error Redis gave instead)."""
    if isinstance(reply, Exception):
        problem = f"key {key} holds another type, not a hash" if wrong_type(reply) else str(reply)
        return DeclarationSet(digest, None, None, problem)
    generation, text = reply if isinstance(reply, list) else (None, None)
    try:
        names = json.loads(text or "")
    except ValueError:
        names = None
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        return DeclarationSet(digest, None, None, f"key {key}: its names are not JSON")
    gen = _int(generation)
    return DeclarationSet(digest, gen or None, names, None if gen else f"key {key}: no generation")


def _decoded_list(text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return ["?", "", 0]
    return value if isinstance(value, list) else ["?", "", 0]


def _state(raw: object) -> dict[str, Any]:
    """A stored state; an empty one when there is none or it is not JSON (the beat
    rebuilds such a state from the definition at the entry's next tick)."""
    if raw is None or isinstance(raw, Exception):
        return {}
    return _decoded(str(raw))


def _damage(expected: list[tuple[str, str]], found: list[Any]) -> str | None:
    """Why an entry's keys cannot be used (as lua/_common.lua's wrong_type()), or None."""
    for (key, kind), actual in zip(expected, found, strict=True):
        if isinstance(actual, str) and actual not in ("none", kind):
            return f"key {key} holds a {actual}, not a {kind}"
    return None


def _status(item: StoredEntry, disabled: bool, clock_driven: bool) -> str:
    if item.invalid:
        return "quarantined"
    if item.paused:
        return "paused"
    if item.running:
        return "running"
    if disabled:
        return "disabled"
    # A missing state is not an end: the beat rebuilds it from the definition.
    if clock_driven and "next" in item.state and not item.state["next"] and not item.due:
        return "ended"
    return "active"


def _glance(item: StoredEntry) -> StoredEntry:
    """``item`` with its status read from its stored JSON, not from a validated entry."""
    try:
        data = json.loads(item.definition) if item.definition else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("schedule"), str):
        return replace(
            item, invalid=item.invalid or "its definition is unreadable", glanced="quarantined"
        )
    event = data["schedule"].startswith(("@reboot", "@shutdown"))
    return replace(item, glanced=_status(item, data.get("enabled") is False, not event))


def _read(definition: str) -> tuple[Entry | None, str | None]:
    try:
        return Entry.from_json(definition), None
    except EntryError as error:
        return None, str(error)
