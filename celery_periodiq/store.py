"""Entries and their state in Redis: the only module that talks to Redis directly.

Reads are per entry: a key of one entry that holds the wrong type (written by
something else) makes that entry quarantined in what is read, never the whole read
fail.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import redis

from celery_periodiq.config import Settings
from celery_periodiq.entry import Entry
from celery_periodiq.plan import from_ms, next_tick, to_ms
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.scripts import SCRIPT_NAMES, Scripts, script_source

__all__ = ["BeatInfo", "Event", "Store", "StoredEntry", "connect", "wrong_type"]

logger = logging.getLogger(__name__)


def connect(settings: Settings) -> redis.Redis:
    """A client for the configured Redis URL (TLS and ACL users come from the URL)."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 5.0,
        "socket_connect_timeout": 5.0,
        "health_check_interval": 15,
    }
    options.update(settings.redis_options)
    return redis.Redis.from_url(settings.redis_url, **options)


def wrong_type(error: BaseException) -> bool:
    """Whether Redis refused a command because a key holds another type (WRONGTYPE)."""
    return isinstance(error, redis.ResponseError) and str(error).startswith("WRONGTYPE")


def _ms(value: str | None) -> datetime | None:
    """An instant from a stored millisecond count; None when absent or unreadable."""
    try:
        return from_ms(int(value)) if value else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """An entry as stored: its definition (if readable) and its run state."""

    name: str
    definition: str
    entry: Entry | None
    """None when the stored definition is unreadable or invalid."""
    invalid: str | None
    """Why the definition could not be read, or the beat's quarantine reason."""
    state: dict[str, str]
    running: str | None
    """Task id of the unfinished run, if any."""
    due: datetime | None = None
    """When the entry is next due in the due set (jitter applied); None when it is not."""

    @property
    def next_run(self) -> datetime | None:
        """The nominal instant of the next tick, None when none is scheduled."""
        if self.paused or self.invalid:
            return None
        if not self.state:  # the beat rebuilds a missing state at its due instant
            return self.due
        return _ms(self.state.get("next"))

    @property
    def last_run(self) -> datetime | None:
        """When the last run really began (the worker's Redis clock)."""
        return _ms(self.state.get("last_run"))

    @property
    def paused(self) -> bool:
        return self.state.get("paused") == "1"

    @property
    def note(self) -> str | None:
        return self.state.get("note") or None

    @property
    def counters(self) -> dict[str, int]:
        """Counts by reason: enqueued, started, succeeded, failed, dropped, skipped_overlap, ..."""
        return {key[2:]: _int(value) for key, value in self.state.items() if key.startswith("n:")}

    @property
    def version(self) -> int:
        return _int(self.state.get("version"))

    @property
    def status(self) -> str:
        """``quarantined``, ``paused``, ``running``, ``disabled``, ``ended`` or ``active``."""
        if self.invalid:
            return "quarantined"
        if self.paused:
            return "paused"
        if self.running:
            return "running"
        if self.entry is not None and not self.entry.enabled:
            return "disabled"
        clock_driven = self.entry is not None and not isinstance(
            self.entry.parsed_schedule(), EventSchedule
        )
        # A missing state is not an end: the beat rebuilds it from the definition.
        if clock_driven and self.state and not self.state.get("next"):
            return "ended"
        return "active"


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


class Store:
    """Entries, state, history and beats of one key prefix."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.keys = settings.keys
        self.client = client if client is not None else connect(settings)
        self.scripts = Scripts(self.client, self.keys)

    def now_ms(self) -> int:
        """The Redis server clock, in milliseconds since the epoch."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def server_version(self) -> str:
        """The Redis server's version, e.g. ``"7.2.4"`` (``INFO server``)."""
        return str(self.client.info("server")["redis_version"])

    def load_scripts(self) -> list[str]:
        """Load every Lua script of the package into Redis (``SCRIPT LOAD``).

        Returns:
            The names of the scripts loaded.

        Raises:
            redis.RedisError: Redis is unreachable or a script does not compile.
        """
        for name in SCRIPT_NAMES:
            self.client.script_load(script_source(name))
        return list(SCRIPT_NAMES)

    # writing

    def put_item(self, entry: Entry, now_ms: int) -> dict[str, Any]:
        """The put.lua item for ``entry``, its first tick computed from ``now_ms``."""
        schedule = entry.parsed_schedule()
        upcoming = next_tick(entry, schedule, from_ms(now_ms))
        if not entry.enabled:
            upcoming = None
        item: dict[str, Any] = {
            "name": entry.name,
            "definition": entry.to_json(),
            "digest": entry.digest,
            "owner": entry.owner,
            "source": entry.source,
            "next": None if upcoming is None else to_ms(upcoming[0]),
            "due": None if upcoming is None else to_ms(upcoming[1]),
            "schedule": upcoming is not None,
            "event": schedule.event if isinstance(schedule, EventSchedule) else None,
        }
        return item

    def put(self, mode: str, entries: list[Entry], now_ms: int | None = None) -> list[str]:
        """Create or replace entries (put.lua modes: add, update, reconcile).

        ``now_ms`` replaces the Redis clock for computing first ticks (tests).
        """
        now = self.now_ms() if now_ms is None else now_ms
        return self.scripts.put(mode, [self.put_item(entry, now) for entry in entries])

    # reading

    def definitions(self) -> dict[str, str]:
        """Every entry's stored JSON, by name."""
        return cast("dict[str, str]", self.client.hgetall(self.keys.entries))

    def quarantined(self) -> dict[str, str]:
        """Why each quarantined entry is quarantined, by name."""
        return cast("dict[str, str]", self.client.hgetall(self.keys.quarantine))

    def load(self, names: list[str] | None = None) -> list[StoredEntry]:
        """Stored entries with their state, all or by name (unknown names are left out).

        An entry whose definition is gone but that is quarantined (its leftovers
        were noticed by a beat) is included, with no definition.
        """
        keys = self.keys
        if names is None:
            definitions = self.definitions()
            flagged = self.quarantined()
            names = sorted(set(definitions) | set(flagged))
        elif names:
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(keys.entries, names)
            pipe.hmget(keys.quarantine, names)
            values, reasons = pipe.execute()
            definitions = {n: v for n, v in zip(names, values, strict=True) if v is not None}
            flagged = {n: r for n, r in zip(names, reasons, strict=True) if r is not None}
            names = [name for name in names if name in definitions or name in flagged]
        if not names:
            return []
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            for key, _ in keys.entry_keys(name):
                pipe.type(key)
            pipe.hgetall(keys.state(name))
            pipe.get(keys.running(name))
            pipe.zscore(keys.due, name)
        replies = pipe.execute(raise_on_error=False)
        width = len(keys.entry_keys("")) + 3
        stored = []
        for index, name in enumerate(names):
            row = replies[index * width : (index + 1) * width]
            state, running, due = row[-3:]
            definition = definitions.get(name, "")
            entry, invalid = _read(definition) if definition else (None, None)
            stored.append(
                StoredEntry(
                    name=name,
                    definition=definition,
                    entry=entry,
                    invalid=invalid
                    or flagged.get(name)
                    or _damage(keys.entry_keys(name), row[:-3]),
                    state=state if isinstance(state, dict) else {},
                    running=running if isinstance(running, str) else None,
                    due=from_ms(int(due)) if isinstance(due, float) else None,
                )
            )
        return stored

    def event_entries(self, event: str) -> list[str]:
        """Names of the entries that fire on a cluster event (``reboot``/``shutdown``)."""
        kinds = cast("dict[str, str]", self.client.hgetall(self.keys.events))
        return sorted(name for name, kind in kinds.items() if kind == event)

    def declared_names(self) -> set[str]:
        """Names of the stored entries that were declared in code or in beat_schedule."""
        return cast("set[str]", self.client.smembers(self.keys.declared))

    def owned_by(self, owner: str) -> list[str]:
        """Names of the entries tagged with ``owner``."""
        return sorted(cast("set[str]", self.client.smembers(self.keys.owner(owner))))

    def history(self, name: str, limit: int) -> list[Event]:
        """The newest ``limit`` events of an entry, newest first (none when its history
        key holds the wrong type: the entry is reported as quarantined instead)."""
        events = []
        try:
            rows = cast(
                "list[tuple[str, dict[str, str]]]",
                self.client.xrevrange(self.keys.history(name), count=limit),
            )
        except redis.ResponseError as error:
            if not wrong_type(error):
                raise
            return []
        for event_id, raw in rows:
            values = dict(raw)
            kind = values.pop("kind", "?")
            at = _ms(values.pop("at", None)) or from_ms(int(event_id.split("-")[0]))
            tick = _ms(values.pop("tick", None) or None)
            task_id = values.pop("task_id", None) or None
            extra = {key: value for key, value in values.items() if value not in ("", None)}
            events.append(Event(event_id, kind, at, tick, task_id, extra))
        return events

    def published(
        self, name: str, kind: str, task_id: str, tick_ms: int | None = None, note: str = ""
    ) -> None:
        """Record a run published outside the beat's claims (``trigger()``, ``@reboot``):
        an event in its history, one more ``enqueued`` and, unless set, when its message
        started waiting. A failure to record is logged, never raised: the run is sent."""
        keys = self.keys
        failed: list[Any]
        try:
            now = self.now_ms()
            pipe = self.client.pipeline(transaction=True)
            pipe.xadd(
                keys.history(name),
                {"kind": kind, "at": now, "tick": "" if tick_ms is None else tick_ms,
                 "task_id": task_id, "note": note},
                maxlen=self.settings.history_length,
                approximate=False,
            )  # fmt: skip
            pipe.hincrby(keys.state(name), "n:enqueued", 1)
            pipe.hsetnx(keys.state(name), "waiting_since", now)
            failed = [reply for reply in pipe.execute(raise_on_error=False) if _failed(reply)]
        except redis.RedisError as error:
            failed = [error]
        if failed:
            logger.warning(
                "periodiq: entry %r run %s was sent but not recorded: %s", name, task_id, failed[0]
            )

    def is_declared(self, name: str) -> bool:
        """Whether ``name`` was declared in code or in beat_schedule (the declared set)."""
        return bool(self.client.sismember(self.keys.declared, name))

    def beats(self) -> list[BeatInfo]:
        """Beats whose heartbeat has not expired."""
        now = self.now_ms()
        ids = cast("list[str]", self.client.zrangebyscore(self.keys.beats, now, "+inf"))
        pipe = self.client.pipeline(transaction=False)
        for beat_id in ids:
            pipe.hgetall(self.keys.beat(beat_id))
        beats = []
        for beat_id, info in zip(ids, pipe.execute(), strict=True):
            if not info:
                continue
            beats.append(
                BeatInfo(
                    id=beat_id,
                    host=info.get("host", "?"),
                    pid=_int(info.get("pid")),
                    version=info.get("version", "?"),
                    started=_ms(info.get("started")),
                    seen=_ms(info.get("seen")),
                    last_tick=_ms(info.get("last_tick")),
                    ticks_claimed=_int(info.get("ticks_claimed")),
                )
            )
        return beats


def _failed(reply: object) -> bool:
    return isinstance(reply, Exception)


def _damage(expected: list[tuple[str, str]], found: list[Any]) -> str | None:
    """Why an entry's keys cannot be used (as lua/_common.lua's damaged()), or None."""
    for (key, kind), actual in zip(expected, found, strict=True):
        if isinstance(actual, str) and actual not in ("none", kind):
            return f"key {key} holds a {actual}, not a {kind}"
    return None


def _read(definition: str) -> tuple[Entry | None, str | None]:
    from celery_periodiq.errors import EntryError

    try:
        return Entry.from_json(definition), None
    except EntryError as error:
        return None, str(error)
