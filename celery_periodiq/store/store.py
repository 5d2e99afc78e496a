"""The store: one key prefix's entries and their state in Redis; its writes are here,
its reads in :mod:`~celery_periodiq.store.reads`. The ``store`` package is the only code
that sends commands to the schedule's Redis (``tests/test_architecture.py`` checks it).

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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, cast

import redis

from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import from_ms, next_tick_ms
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.protocol.keys import LAYOUT, Partition
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.audit import AuditTrails
from celery_periodiq.store.beat_scripts import BeatScripts
from celery_periodiq.store.cluster_client import is_cluster
from celery_periodiq.store.connect import connect
from celery_periodiq.store.entry_scripts import EntryScripts, PutItem
from celery_periodiq.store.reads import Reads
from celery_periodiq.store.run_scripts import RunScripts
from celery_periodiq.store.scripts import SCRIPT_NAMES, script_source
from celery_periodiq.store.topology import replica_report, sentinel_report
from celery_periodiq.store.views import _int

__all__ = ["Scripts", "Store"]

logger = logging.getLogger("celery_periodiq.store")

# Calls whose owner index changed under them are made again, at most this often.
_RETRIES = 5


class Scripts(BeatScripts, RunScripts, EntryScripts):
    """Every Lua script, registered on one client (``decode_responses=True``), each
    called through its typed wrapper."""


class Store(Reads, AuditTrails):
    """Entries, state, history and beats of one key prefix."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        self.settings = settings
        self.keys = settings.keys
        self.client: Any = client if client is not None else connect(settings)
        self.scripts = Scripts(
            self.client, self.keys, settings.replica_acks, settings.replica_timeout
        )
        self.scripts.audit_limits = (settings.audit_length, int(settings.audit_window * 1000))
        self._layout_checked = False

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
        upcoming = next_tick_ms(entry, now)
        alert = policy.alert_after(entry, policy.interval_at(schedule, now))
        return (
            entry.name,
            entry.digest,
            entry.owner,
            entry.source,
            None if upcoming is None else upcoming[0],
            None if upcoming is None else upcoming[1],
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
        audit: Audit | None = None,
    ) -> list[str]:
        """Create or replace entries (put.lua modes: add, update, reconcile); a status
        per entry, in order. One script call per partition per ``periodiq_batch_size``
        entries. ``now_ms`` replaces the Redis clock for first ticks (tests);
        ``generation`` is the reconciling beat's (see :meth:`declare`); ``audit``: who
        writes, recorded with each entry created or replaced (None: nothing recorded)."""
        self.ensure_layout(record=True)
        how = (generation, self.audit_argument(audit))
        now = self.now_ms() if now_ms is None else now_ms
        statuses: dict[str, str] = {}
        size = self.settings.batch_size
        groups = [
            (part, group[start : start + size])
            for part, group in self._by_partition(entries, lambda entry: entry.name)
            for start in range(0, len(group), size)
        ]
        if is_cluster(self.client):
            return self._put_threaded(mode, entries, groups, now, how)
        # Each chunk is sent before the last one's reply is read: Redis runs a chunk
        # while the next is prepared here (one thread: no lock to wait for between them).
        waiting: tuple[Partition, dict[str, PutItem], Callable[[], list[str]]] | None = None
        try:
            for part, group in groups:
                items = self._items(group, now)
                owners = None if mode == "add" else self._owners(part, list(items))
                read = self.scripts.put_later(part, mode, list(items.values()), owners, *how)
                previous, waiting = waiting, (part, items, read)
                if previous is not None:
                    statuses.update(self._put_read(mode, how, *previous))
            last, waiting = waiting, None
            if last is not None:
                statuses.update(self._put_read(mode, how, *last))
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
        how: tuple[int | None, str],
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
                running = pool.submit(self._put_chunk, part, mode, items, how)
            if running is not None:
                statuses.update(running.result())
        return [statuses[entry.name] for entry in entries]

    def _put_read(
        self,
        mode: str,
        how: tuple[int | None, str],
        part: Partition,
        items: dict[str, PutItem],
        read: Callable[[], list[str]],
    ) -> dict[str, str]:
        """The statuses of a chunk sent with ``put_later``; those whose owner changed
        meanwhile are put again."""
        statuses = dict(zip(items, read(), strict=True))
        again = {name: items[name] for name, status in statuses.items() if status == "retry"}
        if again:
            statuses.update(self._put_chunk(part, mode, again, how))
        return statuses

    def _put_chunk(
        self,
        part: Partition,
        mode: str,
        items: dict[str, PutItem],
        how: tuple[int | None, str] = (None, ""),
    ) -> dict[str, str]:
        """One put.lua call for a chunk of one partition, again for those whose owner
        changed meanwhile; a status per name. ``how``: the generation and audit context."""
        statuses: dict[str, str] = {}
        for _ in range(_RETRIES):
            # "add" only creates: an entry found there is "exists", whatever its owner
            owners = None if mode == "add" else self._owners(part, list(items))
            done = self.scripts.put(part, mode, list(items.values()), owners, *how)
            statuses.update(zip(items, done, strict=True))
            items = {
                name: items[name]
                for name, status in zip(items, done, strict=True)
                if status == "retry"
            }
            if not items:
                break
        return statuses

    def remove(self, names: list[str], sources: str = "*", audit: Audit | None = None) -> list[str]:
        """Delete entries whose source is in ``sources``, and all their keys; returns the
        names removed (damaged ones and leftovers of vanished definitions included), each
        recorded as deleted by ``audit``. One script call per partition per
        ``periodiq_batch_size`` names."""
        return self._remove(names, sources, audit)[0]

    def remove_declared(
        self, names: list[str], audit: Audit | None = None
    ) -> tuple[list[str], list[str]]:
        """Delete entries declared in code or config that no live beat declares any more;
        returns the names removed, and those kept because a beat of the generation that
        wrote them still lives (told atomically by each partition's copy of the live
        generations, whatever the caller's view of the beats)."""
        return self._remove(names, "code,config", audit)

    def _remove(
        self, names: list[str], sources: str, audit: Audit | None
    ) -> tuple[list[str], list[str]]:
        self.ensure_layout()
        argument = self.audit_argument(audit)
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
                done = self.scripts.remove(part, self._owners(part, pending), sources, argument)
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

    def published(
        self,
        name: str,
        kind: str,
        task_id: str,
        tick_ms: int | None = None,
        note: str = "",
        audit: Audit | None = None,
    ) -> None:
        """Record a run published outside the beat's claims (``trigger()``, ``@reboot``):
        an event in its history, one more ``enqueued`` and, unless set, when its message
        started waiting; a trigger in its audit trail too, by ``audit``. A failure to
        record is logged, never raised: the run is sent."""
        try:
            length, argument = self.settings.history_length, self.audit_argument(audit)
            self.scripts.record(name, kind, task_id, tick_ms, note, length, argument)
        except redis.RedisError as error:
            logger.warning(
                "periodiq: entry %r run %s was sent but not recorded: %s", name, task_id, error
            )

    def published_many(
        self, runs: list[tuple[str, str]], kind: str, audit: Audit | None = None
    ) -> None:
        """:meth:`published` of many runs sent outside a tick (``(name, task_id)``),
        pipelined; a failure to record is logged, never raised."""
        try:
            argument = self.audit_argument(audit)
            self.scripts.record_each(runs, kind, "", self.settings.history_length, argument)
        except redis.RedisError as error:
            logger.warning("periodiq: %d runs were sent but not recorded: %s", len(runs), error)

    def alive(
        self,
        beat_id: str,
        until_ms: int,
        now_ms: int,
        generation: int | None = None,
        claims: bool = True,
    ) -> None:
        """Tell every partition that ``beat_id`` is alive until ``until_ms`` (its claims are
        not taken over before then; ``claims`` False: it keeps none, being cut off from
        its broker), and so is a beat of ``generation``, the generation of its
        declaration set (what put.lua and remove.lua go by); forget beats and
        generations whose heartbeats ran out."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            if claims:
                pipe.zadd(part.alive, {beat_id: until_ms})
            else:
                pipe.zrem(part.alive, beat_id)
            pipe.zremrangebyscore(part.alive, "-inf", now_ms)
            if generation is not None:
                pipe.zadd(part.generations, {str(generation): until_ms}, gt=True)
                pipe.zremrangebyscore(part.generations, "-inf", now_ms)
        pipe.execute()

    def release(self, beat_id: str) -> int:
        """Give up ``beat_id``'s claims in every partition and wake the other beats to
        take them over (release.lua); returns how many it gave up."""
        given = self.scripts.release(beat_id)
        self.wake_beats(given)
        return given

    def wake_beats(self, count: int) -> None:
        """Tell every beat that ``count`` entries may have changed ("<n> entries": a bulk
        change, for which its listener claims every partition in the next pass)."""
        self.client.publish(self.keys.changes, f"{count} entries")

    def gone(self, beat_id: str) -> None:
        """Tell every partition that ``beat_id`` stopped."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            pipe.zrem(part.alive, beat_id)
        pipe.execute()

    def changes(self) -> Any:
        """A pub/sub connection subscribed to the changes channel: each message names an
        entry created, changed, paused or deleted, or says ``"<n> entries"``. The caller
        reads it (``get_message``) and closes it.

        Raises:
            redis.RedisError: Redis is unreachable (nothing is left open).
        """
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.keys.changes)
        except BaseException:
            with contextlib.suppress(Exception):
                pubsub.close()
            raise
        return pubsub

    def replica_report(self) -> tuple[str, str] | None:
        """``(status, detail)`` of the replicas ``periodiq_replica_acks`` counts on, None
        when there is nothing to say (see
        :func:`~celery_periodiq.store.topology.replica_report`)."""
        return replica_report(self.settings, self.client)

    def sentinel_report(self) -> tuple[str, str]:
        """``(status, detail)`` of the Sentinel setup the client goes through (see
        :func:`~celery_periodiq.store.topology.sentinel_report`)."""
        return sentinel_report(self.settings, self.client)

    def due_by(self, parts: list[Partition], until_ms: int) -> int:
        """How many ticks of ``parts`` are due by ``until_ms`` (the beat's staging)."""
        pipe = self.client.pipeline(transaction=False)
        for part in parts:
            pipe.zcount(part.due, "-inf", until_ms)
        return sum(int(count) for count in pipe.execute())

    def changed_since(self, since_ms: int, redecided: bool = False) -> dict[str, int]:
        """Entry name -> when a writer last changed it (ms), of changes after ``since_ms``
        (the partitions' change logs, kept 11 minutes after a change); ``redecided``:
        when a window was added over it instead (:func:`.windows.redecide_held`)."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.keys.all():
            key = part.redecided if redecided else part.changed
            pipe.zrangebyscore(key, f"({since_ms}", "+inf", withscores=True)
        changed: dict[str, int] = {}
        for found in pipe.execute():
            for name, score in found or []:
                key = name.decode() if isinstance(name, bytes) else name
                changed[key] = max(changed.get(key, 0), int(score))
        return changed

    def hold(self, claims: dict[int, list[str]], until_ms: int) -> None:
        """Look at these claims (tick ids, by partition) again at ``until_ms`` at the
        earliest: a beat that staged them holds them until their instant."""
        pipe = self.client.pipeline(transaction=False)
        for index, ids in claims.items():
            pipe.zadd(self.keys.part(index).inflight, dict.fromkeys(ids, until_ms), xx=True)
        pipe.execute()
