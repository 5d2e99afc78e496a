"""Entries and their state in Redis: the only module that talks to Redis directly.

The schedule is spread over partitions (:mod:`celery_periodiq.protocol.keys`); each read or
write goes to the partitions of the entries it is about, a pipeline or script call
per partition. Reads are per entry: one entry's damaged data (a state that is not
JSON, a key of another type) makes that entry quarantined in what is read, never the
whole read fail.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

import redis
import redis.sentinel

from celery_periodiq.config import Settings, sentinel_hosts
from celery_periodiq.errors import ConfigurationError, EntryError
from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import from_ms, next_tick, task_id_for, to_ms
from celery_periodiq.protocol.keys import LAYOUT, Partition
from celery_periodiq.protocol.records import HISTORY_FIELDS
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.cluster_client import ClusterOnDemand, is_cluster
from celery_periodiq.store.scripts import SCRIPT_NAMES, PutItem, Scripts, script_source

__all__ = ["BeatInfo", "DeclarationSet", "Event", "RunMemory", "Store", "StoredEntry", "connect",
           "wrong_type"]  # fmt: skip

logger = logging.getLogger("celery_periodiq.store")

# Calls whose owner index changed under them are made again, at most this often.
_RETRIES = 5
# State fields the flat view of :attr:`StoredEntry.state` leaves out (kept structured).
_STRUCTURED = ("n", "running", "queued", "seen", "top")


def connect(settings: Settings) -> Any:
    """A client for the configured Redis URL (TLS and ACL users come from the URL): a
    ``redis.Redis``, or a Redis Cluster client with ``periodiq_redis_cluster``."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 5.0,
        "socket_connect_timeout": 5.0,
    }
    if settings.redis_cluster:
        options.update(settings.redis_options)
        return ClusterOnDemand(settings.redis_url, options)
    options["health_check_interval"] = 15
    options.update(settings.redis_options)
    if settings.redis_url.startswith("sentinel://"):
        return _sentinel_client(settings.redis_url, options)
    return redis.Redis.from_url(settings.redis_url, **options)


def _sentinel_client(url: str, options: dict[str, Any]) -> Any:
    """A client of the primary the sentinels name; it finds the new one after a failover."""
    hosts, db, username, password = sentinel_hosts(url)
    master = options.pop("master_name")
    sentinel_kwargs = {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
        **(options.pop("sentinel_kwargs", None) or {}),
    }
    if username is not None:
        options.setdefault("username", username)
    if password is not None:
        options.setdefault("password", password)
    sentinel: Any = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        hosts, sentinel_kwargs=sentinel_kwargs, **options
    )
    return sentinel.master_for(master, db=db)


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
    flat = {key: str(value) for key, value in state.items() if key not in _STRUCTURED
            and value is not None and not isinstance(value, dict | list)}  # fmt: skip
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
        return [kind for kind, since in (("overdue", self.overdue_since),
                                        ("failing", self.failing_since)) if since]  # fmt: skip

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
            self, entry is not None and not entry.enabled,
            entry is not None and not isinstance(entry.parsed_schedule(), EventSchedule),
        )  # fmt: skip


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


class Store:
    """Entries, state, history and beats of one key prefix."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        self.settings = settings
        self.keys = settings.keys
        self.client: Any = client if client is not None else connect(settings)
        self.scripts = Scripts(
            self.client, self.keys, settings.replica_acks, settings.replica_timeout
        )
        self._layout_checked = False

    def now_ms(self) -> int:
        """The Redis server clock, in milliseconds since the epoch."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def server_version(self) -> str:
        """The Redis server's version, e.g. ``"7.2.4"`` (``INFO server``)."""
        info = self.client.info("server")
        if "redis_version" not in info:  # a cluster client answers per node
            info = next(iter(info.values()))
        return str(info["redis_version"])

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

    def ensure_layout(self, *, record: bool = False) -> None:
        """Check that Redis keeps this prefix's schedule as this version does (the key
        layout and the number of partitions); with ``record``, note it when nothing is
        stored yet (writers do). Once it is found right, it is not read again.

        Raises:
            ConfigurationError: the schedule under this prefix has another number of
                partitions, or another layout; changing either on a live schedule is
                not supported.
        """
        if self._layout_checked:
            return
        keys, settings = self.keys, self.settings
        if record:
            self.client.hsetnx(keys.meta, "layout", LAYOUT)
            self.client.hsetnx(keys.meta, "partitions", settings.partitions)
        stored = cast("dict[str, str]", self.client.hgetall(keys.meta))
        if not stored or "partitions" not in stored:
            return  # nothing stored under this prefix yet, or a beat is writing it now
        if stored.get("layout") != LAYOUT:
            raise ConfigurationError(
                f"the schedule under prefix {settings.key_prefix!r} has key layout "
                f"{stored.get('layout')!r}; this version reads layout {LAYOUT!r}"
            )
        if _int(stored.get("partitions")) != settings.partitions:
            raise ConfigurationError(
                f"setting periodiq_partitions={settings.partitions}, but the schedule under "
                f"prefix {settings.key_prefix!r} is stored in {stored.get('partitions')} "
                "partitions; changing the number of a live schedule is not supported (set it "
                "back, or delete the entries, clear the prefix and add them again)"
            )
        self._layout_checked = True

    # writing

    def put_item(self, entry: Entry, now: datetime) -> PutItem:
        """The put.lua item for ``entry`` (see :class:`~celery_periodiq.store.scripts.PutItem`),
        its first tick computed from ``now``."""
        schedule = entry.parsed_schedule()
        upcoming = next_tick(entry, schedule, now) if entry.enabled else None
        alert = policy.alert_after(entry, policy.interval_at(schedule, now))
        return (
            entry.name,
            entry.digest,
            entry.owner,
            entry.source,
            None if upcoming is None else to_ms(upcoming[0]),
            None if upcoming is None else to_ms(upcoming[1]),
            upcoming is not None,
            schedule.event if isinstance(schedule, EventSchedule) else None,
            None if alert is None else int(alert * 1000),
            entry.max_runs,
            entry.to_json(),
        )

    def put(
        self,
        mode: str,
        entries: list[Entry],
        now_ms: int | None = None,
        generation: int | None = None,
    ) -> list[str]:
        """Create or replace entries (put.lua modes: add, update, reconcile); a status
        per entry, in order. One script call per partition per ``periodiq_batch_size``
        entries. ``now_ms`` replaces the Redis clock for first ticks (tests);
        ``generation`` is the reconciling beat's (see :meth:`declare`)."""
        self.ensure_layout(record=True)
        now = self.now_ms() if now_ms is None else now_ms
        statuses: dict[str, str] = {}
        size = self.settings.batch_size
        groups = [
            (part, group[start : start + size])
            for part, group in self._by_partition(entries, lambda entry: entry.name)
            for start in range(0, len(group), size)
        ]
        if is_cluster(self.client):
            return self._put_threaded(mode, entries, groups, now, generation)
        # Each chunk is sent before the last one's reply is read: Redis runs a chunk
        # while the next is prepared here (one thread: no lock to wait for between them).
        waiting: tuple[Partition, dict[str, PutItem], Callable[[], list[str]]] | None = None
        try:
            for part, group in groups:
                items = self._items(group, now)
                owners = None if mode == "add" else self._owners(part, list(items))
                read = self.scripts.put_later(part, mode, list(items.values()), owners, generation)
                previous, waiting = waiting, (part, items, read)
                if previous is not None:
                    statuses.update(self._put_read(mode, generation, *previous))
            last, waiting = waiting, None
            if last is not None:
                statuses.update(self._put_read(mode, generation, *last))
        finally:
            if waiting is not None:  # failed meanwhile: read its reply, freeing its connection
                with contextlib.suppress(Exception):
                    waiting[2]()
        return [statuses[entry.name] for entry in entries]

    def _items(self, group: list[Entry], now: int) -> dict[str, PutItem]:
        instant = from_ms(now)
        return {entry.name: self.put_item(entry, instant) for entry in group}

    def _put_threaded(
        self,
        mode: str,
        entries: list[Entry],
        groups: list[tuple[Partition, list[Entry]]],
        now: int,
        generation: int | None,
    ) -> list[str]:
        """:meth:`put` on Redis Cluster, whose client cannot send without reading: the
        next chunk is prepared here while a thread waits for the last one."""
        statuses: dict[str, str] = {}
        with ThreadPoolExecutor(max_workers=1) as pool:
            running: Future[dict[str, str]] | None = None
            for part, group in groups:
                items = self._items(group, now)
                if running is not None:
                    statuses.update(running.result())
                running = pool.submit(self._put_chunk, part, mode, items, generation)
            if running is not None:
                statuses.update(running.result())
        return [statuses[entry.name] for entry in entries]

    def _put_read(
        self,
        mode: str,
        generation: int | None,
        part: Partition,
        items: dict[str, PutItem],
        read: Callable[[], list[str]],
    ) -> dict[str, str]:
        """The statuses of a chunk sent with ``put_later``; those whose owner changed
        meanwhile are put again."""
        statuses = dict(zip(items, read(), strict=True))
        again = {name: items[name] for name, status in statuses.items() if status == "retry"}
        if again:
            statuses.update(self._put_chunk(part, mode, again, generation))
        return statuses

    def _put_chunk(
        self,
        part: Partition,
        mode: str,
        items: dict[str, PutItem],
        generation: int | None = None,
    ) -> dict[str, str]:
        """One put.lua call for a chunk of one partition, again for those whose owner
        changed meanwhile; a status per name."""
        statuses: dict[str, str] = {}
        for _ in range(_RETRIES):
            # "add" only creates: an entry found there is "exists", whatever its owner
            owners = None if mode == "add" else self._owners(part, list(items))
            done = self.scripts.put(part, mode, list(items.values()), owners, generation)
            statuses.update(zip(items, done, strict=True))
            items = {name: items[name] for name, status in zip(items, done, strict=True)
                     if status == "retry"}  # fmt: skip
            if not items:
                break
        return statuses

    def remove(self, names: list[str], sources: str = "*") -> list[str]:
        """Delete entries whose source is in ``sources``, and all their keys; returns the
        names removed (damaged ones and leftovers of vanished definitions included).
        One script call per partition per ``periodiq_batch_size`` names."""
        return self._remove(names, sources)[0]

    def remove_declared(self, names: list[str]) -> tuple[list[str], list[str]]:
        """Delete entries declared in code or config that no live beat declares any more;
        returns the names removed, and those kept because a beat of the generation that
        wrote them still lives (told atomically by each partition's copy of the live
        generations, whatever the caller's view of the beats)."""
        return self._remove(names, "code,config")

    def _remove(self, names: list[str], sources: str) -> tuple[list[str], list[str]]:
        self.ensure_layout()
        removed: list[str] = []
        kept: list[str] = []
        size = self.settings.batch_size
        groups = [
            (part, group[start : start + size])
            for part, group in self._by_partition(list(dict.fromkeys(names)), lambda n: n)
            for start in range(0, len(group), size)
        ]
        for part, pending in groups:
            for _ in range(_RETRIES):
                done = self.scripts.remove(part, self._owners(part, pending), sources)
                removed += [name for name in done if not name.startswith(("retry:", "kept:"))]
                kept += [name[len("kept:") :] for name in done if name.startswith("kept:")]
                pending = [name[len("retry:") :] for name in done if name.startswith("retry:")]
                if not pending:
                    break
        return removed, kept

    def declare(self, digest: str, names: dict[str, str], hint: int | None = None) -> int:
        """Store a beat's declaration set (see :func:`registry.declaration_of`) unless it
        is, and return its generation: when it was first declared (ms), or ``hint``, the
        generation this beat had, when the set was lost meanwhile."""
        text = json.dumps(names, separators=(",", ":"), sort_keys=True)
        return self.scripts.declare(digest, text, hint)

    def declaration_sets(self, digests: Iterable[str]) -> dict[str, DeclarationSet]:
        """Stored declaration sets by digest (those not stored are left out); one that is
        unreadable (another type, garbage written by someone else) is returned with its
        problem, not raised."""
        wanted = sorted(set(digests))
        pipe = self.client.pipeline(transaction=False)
        for digest in wanted:
            pipe.hmget(self.keys.declaration(digest), ["gen", "names"])
        found = {}
        for digest, reply in zip(wanted, pipe.execute(raise_on_error=False) if wanted else [],
                                 strict=True):  # fmt: skip
            if reply != [None, None]:
                found[digest] = _declaration_set(self.keys.declaration(digest), digest, reply)
        return found

    def published(self, name: str, kind: str, task_id: str, tick_ms: int | None = None,
                  note: str = "") -> None:  # fmt: skip
        """Record a run published outside the beat's claims (``trigger()``, ``@reboot``):
        an event in its history, one more ``enqueued`` and, unless set, when its message
        started waiting. A failure to record is logged, never raised: the run is sent."""
        try:
            self.scripts.record(name, kind, task_id, tick_ms, note, self.settings.history_length)
        except redis.RedisError as error:
            logger.warning(
                "periodiq: entry %r run %s was sent but not recorded: %s", name, task_id, error
            )

    # reading

    def _by_partition(
        self, items: Iterable[Any], name_of: Any
    ) -> list[tuple[Partition, list[Any]]]:
        groups: dict[int, list[Any]] = {}
        for item in items:
            groups.setdefault(self.keys.partition_of(name_of(item)), []).append(item)
        return [(self.keys.part(index), group) for index, group in sorted(groups.items())]

    def _owners(self, part: Partition, names: list[str]) -> dict[str, str | None]:
        """The owner each entry has now (None: none, or no entry)."""
        values = cast("list[str | None]", self.client.hmget(part.entries, names))
        owners: dict[str, str | None] = {}
        for name, definition in zip(names, values, strict=True):
            owner = _decoded(definition).get("owner") if definition else None
            owners[name] = owner if isinstance(owner, str) else None
        return owners

    def _each(self, command: str, key_of: Any) -> list[Any]:
        """One read command on every partition (a pipeline), in partition order."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            getattr(pipe, command)(key_of(part))
        return cast("list[Any]", pipe.execute())

    def definitions(self) -> dict[str, str]:
        """Every entry's stored JSON, by name."""
        found: dict[str, str] = {}
        for definitions in self._each("hgetall", lambda part: part.entries):
            found.update(definitions)
        return found

    def quarantined(self) -> dict[str, str]:
        """Why each quarantined entry is quarantined, by name."""
        found: dict[str, str] = {}
        for reasons in self._each("hgetall", lambda part: part.quarantine):
            found.update(reasons)
        return found

    def load(self, names: list[str] | None = None) -> list[StoredEntry]:
        """Stored entries with their state, all or by name (unknown names are left out).

        An entry whose definition is gone but that is quarantined (its leftovers were
        noticed by a beat) is included, with no definition.
        """
        if names is None:
            names = sorted(set(self.definitions()) | set(self.quarantined()))
        stored: dict[str, StoredEntry] = {}
        now = self.now_ms() if names else 0
        for part, group in self._by_partition(names, lambda name: name):
            stored.update(self._load_partition(part, list(dict.fromkeys(group)), now))
        return [stored[name] for name in names if name in stored]

    def glance(self, batch: int = 2000) -> Iterator[list[StoredEntry]]:
        """Every entry with its state, a page at a time, for counting (metrics): the
        definitions are not validated and the keys' types not checked, so ``entry`` is
        None and the status comes from the stored JSON; several times faster than
        :meth:`load`."""
        now = self.now_ms()
        for names in self.scan(batch):
            for part, group in self._by_partition(names, lambda name: name):
                loaded = self._load_partition(part, group, now, checked=False)
                yield [_glance(item) for item in loaded.values()]

    def _load_partition(
        self, part: Partition, names: list[str], now: int, checked: bool = True
    ) -> dict[str, StoredEntry]:
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(part.entries, names)
        pipe.hmget(part.quarantine, names)
        pipe.hmget(part.state, names)
        pipe.zmscore(part.due, names)
        for name in names if checked else ():
            for key, _ in part.entry_keys(name):
                pipe.type(key)
        replies = pipe.execute(raise_on_error=False)
        definitions, reasons, states, dues = replies[:4]
        types = replies[4:]
        width = len(part.entry_keys("")) if checked else 0
        loaded = {}
        for index, name in enumerate(names):
            definition, reason = definitions[index], reasons[index]
            if definition is None and reason is None:
                continue
            entry, invalid = _read(definition) if definition and checked else (None, None)
            state = _state(states[index])
            damage = (
                _damage(part.entry_keys(name), types[index * width : (index + 1) * width])
                if checked
                else None
            )
            running = state.get("running")
            holds = isinstance(running, list) and len(running) >= 2 and _int(running[1]) > now
            due = dues[index]
            loaded[name] = StoredEntry(
                name=name,
                definition=definition or "",
                entry=entry,
                invalid=invalid or reason or damage,
                state=_flat(state),
                running=str(running[0]) if holds and isinstance(running, list) else None,
                due=from_ms(int(due)) if isinstance(due, float) else None,
            )
        return loaded

    def event_entries(self, event: str) -> list[str]:
        """Names of the entries that fire on a cluster event (``reboot``/``shutdown``)."""
        names = []
        for kinds in self._each("hgetall", lambda part: part.events):
            names += [name for name, kind in kinds.items() if kind == event]
        return sorted(names)

    def declared_names(self) -> set[str]:
        """Names of the stored entries that were declared in code or in beat_schedule."""
        found: set[str] = set()
        for names in self._each("smembers", lambda part: part.declared):
            found |= set(names)
        return found

    def count(self) -> int:
        """How many entries are stored."""
        return sum(self._each("hlen", lambda part: part.entries))

    def existing(self, names: list[str]) -> list[str]:
        """Which of ``names`` are stored entries."""
        found = []
        for part, group in self._by_partition(names, lambda name: name):
            values = self.client.hmget(part.entries, group)
            found += [name for name, value in zip(group, values, strict=True) if value is not None]
        return found

    def soonest(self, limit: int, names: list[str] | None = None) -> list[str]:
        """The ``limit`` entries due soonest (of ``names``, when given), soonest first;
        entries not in a due set (paused, ended, quarantined) are left out."""
        ranked: list[tuple[float, str]] = []
        if names is None:
            pipe = self.client.pipeline(transaction=False)
            for part in self.keys.all():
                pipe.zrange(part.due, 0, limit - 1, withscores=True)
            for rows in pipe.execute():
                ranked += [(score, name) for name, score in rows]
        else:
            for part, group in self._by_partition(names, lambda name: name):
                scores = self.client.zmscore(part.due, group)
                ranked += [(score, name) for name, score in zip(group, scores, strict=True)
                           if score is not None]  # fmt: skip
        return [name for _, name in sorted(ranked)[:limit]]

    def scan(self, batch: int = 500) -> Iterator[list[str]]:
        """Every entry's name (and every quarantined name), ``batch`` or so at a time,
        partition after partition, without reading the whole schedule at once."""
        for part in self.keys.all():
            for key in (part.entries, part.quarantine):
                names: list[str] = []
                for name, _ in self.client.hscan_iter(key, count=batch):
                    if key == part.quarantine and self.client.hexists(part.entries, name):
                        continue  # listed with the entries already
                    names.append(name)
                    if len(names) >= batch:
                        yield names
                        names = []
                if names:
                    yield names

    def is_declared(self, name: str) -> bool:
        """Whether ``name`` was declared in code or in beat_schedule."""
        return bool(self.client.sismember(self.keys.of(name).declared, name))

    def owned_by(self, owner: str) -> list[str]:
        """Names of the entries tagged with ``owner``."""
        found: set[str] = set()
        for names in self._each("smembers", lambda part: part.owner(owner)):
            found |= set(names)
        return sorted(found)

    def history(self, name: str, limit: int, *, failures: bool = False) -> list[Event]:
        """The newest ``limit`` events of an entry, newest first (``failures``: its newest
        failed or timeboxed runs, kept apart). None when the key holds another type: the
        entry is reported as quarantined instead."""
        part = self.keys.of(name)
        key = part.failures(name) if failures else part.history(name)
        try:
            rows = cast("list[str]", self.client.lrange(key, 0, limit - 1))
        except redis.ResponseError as error:
            if not wrong_type(error):
                raise
            return []
        return self._events(name, rows)

    def _events(self, name: str, rows: list[str]) -> list[Event]:
        events: list[Event] = []
        seen: dict[int, int] = {}
        for raw in reversed(rows):  # oldest first, so that ids count up within a millisecond
            values = _decoded_list(raw)
            fields = dict(zip(HISTORY_FIELDS, values, strict=False))
            tick_ms = fields.pop("tick", "")
            tick = _ms(tick_ms)
            at_ms = _int(fields.pop("at", 0)) + (_int(tick_ms) if tick is not None else 0)
            sequence = seen.get(at_ms, 0)
            seen[at_ms] = sequence + 1
            task_id = str(fields.pop("task_id", "") or "")
            if not task_id and tick is not None:  # "" is the id the tick derives; "-" none
                task_id = task_id_for(self.keys.prefix, name, to_ms(tick))
            task_id = "" if task_id == "-" else task_id
            kind = str(fields.pop("kind", "?"))
            extra = {key: str(value) for key, value in fields.items() if value not in ("", None)}
            events.append(Event(f"{at_ms}-{sequence}", kind, from_ms(at_ms), tick,
                                task_id or None, extra))  # fmt: skip
        events.reverse()
        return events

    def run_memory(self, name: str, tick_ms: int | None = None) -> RunMemory:
        """What the worker's guard remembers of an entry's runs (two round trips: the
        clock, then the rest): the ticks it knows began, its unfinished run, its whole
        history. With ``tick_ms`` only that one of the backfilled ticks is looked up,
        not the whole set (what someone waiting for one run needs)."""
        part = self.keys.of(name)
        now = self.now_ms()
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(part.state, name)
        if tick_ms is None:
            pipe.smembers(part.backfilled(name))
        else:
            pipe.sismember(part.backfilled(name), tick_ms)
        pipe.lrange(part.history(name), 0, -1)
        raw, backfilled, rows = pipe.execute(raise_on_error=False)
        state = _state(raw)
        if isinstance(backfilled, set):
            began = {_int(tick) for tick in backfilled}
        else:  # one tick looked up (an error reply: a key of another type, none began)
            began = {tick_ms} if tick_ms is not None and backfilled == 1 else set()
        top, seen = _int(state.get("top")), state.get("seen")
        if top:  # "seen" holds how far before "top" each other recent tick was
            began.add(top)
            began.update(top - _int(back) for back in (seen if isinstance(seen, list) else ()))
        events = self._events(name, rows) if isinstance(rows, list) else []
        began.update(to_ms(event.tick) for event in events
                      if event.kind in ("started", "retry") and event.tick)  # fmt: skip
        running = state.get("running")
        unfinished = (
            str(running[0])
            if isinstance(running, list) and len(running) >= 2 and _int(running[1]) > now
            else None
        )
        return RunMemory(began, unfinished, events)

    def beats(self) -> list[BeatInfo]:
        """Beats whose heartbeat has not expired."""
        now = self.now_ms()
        ids = cast("list[str]", self.client.zrangebyscore(self.keys.beats, now, "+inf"))
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.declarers)
        for beat_id in ids:
            pipe.hgetall(self.keys.beat(beat_id))
        declarers, *infos = pipe.execute(raise_on_error=False)
        beats = []
        for beat_id, info in zip(ids, infos, strict=True):
            if not info or isinstance(info, Exception):
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
                    partitions=_int(info.get("partitions")),
                    declared=declarers.get(beat_id, "") if isinstance(declarers, dict) else "",
                )
            )
        return beats

    def alive(
        self, beat_id: str, until_ms: int, now_ms: int, generation: int | None = None
    ) -> None:
        """Tell every partition that ``beat_id`` is alive until ``until_ms`` (its claims are
        not taken over before then), and so is a beat of ``generation``, the generation
        of its declaration set (what put.lua and remove.lua go by); forget beats and
        generations whose heartbeats ran out."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            pipe.zadd(part.alive, {beat_id: until_ms})
            pipe.zremrangebyscore(part.alive, "-inf", now_ms)
            if generation is not None:
                pipe.zadd(part.generations, {str(generation): until_ms}, gt=True)
                pipe.zremrangebyscore(part.generations, "-inf", now_ms)
        pipe.execute()

    def gone(self, beat_id: str) -> None:
        """Tell every partition that ``beat_id`` stopped."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            pipe.zrem(part.alive, beat_id)
        pipe.execute()


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
        return replace(item, invalid=item.invalid or "its definition is unreadable",
                       glanced="quarantined")  # fmt: skip
    event = data["schedule"].startswith(("@reboot", "@shutdown"))
    return replace(item, glanced=_status(item, data.get("enabled") is False, not event))


def _read(definition: str) -> tuple[Entry | None, str | None]:
    try:
        return Entry.from_json(definition), None
    except EntryError as error:
        return None, str(error)
