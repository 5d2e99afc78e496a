"""The store's read paths: entries with their state, names, history, the guard's
memory of runs, live beats and declaration sets, each read per partition (a pipeline
per partition, or one for all), decoded by :mod:`~celery_periodiq.store.views`."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, cast

import redis

from celery_periodiq.config import Settings
from celery_periodiq.model.plan import from_ms, to_ms
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.protocol.keys import Keys, Partition
from celery_periodiq.protocol.records import HISTORY_FIELDS
from celery_periodiq.store.views import (
    BeatInfo,
    DeclarationSet,
    Event,
    RunMemory,
    StoredEntry,
    _damage,
    _declaration_set,
    _decoded,
    _decoded_list,
    _flat,
    _glance,
    _int,
    _ms,
    _read,
    _state,
    wrong_type,
)

__all__ = ["Reads", "in_batches"]

_LIKE_WHOLE = 20_000
"""Up to this many entries, the names a "did you mean" compares with are all of them;
beyond, those that contain the name (Redis matches them: nothing large crosses the wire)."""
_LIKE_MOST = 200


def in_batches(names: Iterable[str], size: int) -> Iterator[list[str]]:
    """``names`` in lists of ``size`` (the last one shorter, none empty)."""
    batch: list[str] = []
    for name in names:
        batch.append(name)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class Reads:
    """The read side of :class:`~celery_periodiq.store.store.Store`."""

    settings: Settings
    keys: Keys
    client: Any

    def now_ms(self) -> int:
        """The Redis server clock, in milliseconds since the epoch."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def declaration_sets(self, digests: Iterable[str]) -> dict[str, DeclarationSet]:
        """Stored declaration sets by digest (those not stored are left out); one that is
        unreadable (another type, garbage written by someone else) is returned with its
        problem, not raised."""
        wanted = sorted(set(digests))
        pipe = self.client.pipeline(transaction=False)
        for digest in wanted:
            pipe.hmget(self.keys.declaration(digest), ["gen", "names"])
        found = {}
        for digest, reply in zip(
            wanted, pipe.execute(raise_on_error=False) if wanted else [], strict=True
        ):
            if reply != [None, None]:
                found[digest] = _declaration_set(self.keys.declaration(digest), digest, reply)
        return found

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

    def glance_at(self, names: Iterable[str]) -> list[StoredEntry]:
        """The entries of ``names`` (those that exist), read as :meth:`glance` reads them."""
        now = self.now_ms()
        found = []
        for part, group in self._by_partition(names, lambda name: name):
            loaded = self._load_partition(part, group, now, checked=False)
            found += [_glance(item) for item in loaded.values()]
        return found

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
        if not isinstance(dues, list):  # a due set of another type: doctor's due check names it
            dues = [None] * len(names)
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

    def names_like(self, name: str) -> list[str]:
        """Stored names that may be what ``name`` meant, for a "did you mean": every one
        in a schedule of up to 20,000 entries; in a larger one, up to 200 that contain
        ``name`` (``make_report``: ``proj.make_report``)."""
        if self.count() <= _LIKE_WHOLE:
            return [
                found for names in self._each("hkeys", lambda part: part.entries) for found in names
            ]
        pattern = "*" + re.sub(r"([*?\[\]\\])", r"\\\1", name) + "*"
        like: list[str] = []
        for part in self.keys.all():
            for found, _ in self.client.zscan_iter(part.names, match=pattern, count=1000):
                like.append(found)
                if len(like) >= _LIKE_MOST:
                    return like
        return like

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
                ranked += [
                    (score, name)
                    for name, score in zip(group, scores, strict=True)
                    if score is not None
                ]
        return [name for _, name in sorted(ranked)[:limit]]

    def scan(self, batch: int = 500) -> Iterator[list[str]]:
        """Every entry's name (and every quarantined name), ``batch`` or so at a time,
        partition after partition, without reading the whole schedule at once."""
        for part in self.keys.all():
            for key in (part.entries, part.quarantine):
                names = (
                    name
                    for name, _ in self.client.hscan_iter(key, count=batch)
                    # a quarantined name with a definition is listed with the entries
                    if key == part.entries or not self.client.hexists(part.entries, name)
                )
                yield from in_batches(names, batch)

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
            events.append(
                Event(f"{at_ms}-{sequence}", kind, from_ms(at_ms), tick, task_id or None, extra)
            )
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
        began.update(
            to_ms(event.tick)
            for event in events
            if event.kind in ("started", "retry") and event.tick
        )
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
                    indexes=str(info.get("indexes", "")),
                    publishing=info.get("publishing") != "0",
                )
            )
        return beats

    def stats(self) -> dict[str, int]:
        """The histogram fields of every partition's stats hash, added up (one round trip);
        a value that is not a number (garbage written by someone else) counts as nothing."""
        total: Counter[str] = Counter()
        for fields in self._each("hgetall", lambda part: part.stats):
            for field, value in (fields or {}).items():
                try:
                    total[field] += int(value)
                except (TypeError, ValueError):
                    continue
        return dict(total)

    def holds_schedule_of(self, prefix: str) -> bool:
        """Whether Redis holds entries under ``prefix`` in the layout from before each app
        got its own prefix (one ``{prefix}:entries`` hash)."""
        return bool(self.client.exists(f"{{{prefix}}}:entries"))

    def markers(self, names: list[str], now_ms: int) -> dict[str, tuple[bool, bool]]:
        """Per entry, whether a run of it is unfinished and whether a published run of it
        has not started, at ``now_ms`` (what claim.lua tells a claim)."""
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hget(self.keys.of(name).state, name)
        found: dict[str, tuple[bool, bool]] = {}
        for name, raw in zip(names, pipe.execute(), strict=True):
            try:
                state = json.loads(raw) if raw else {}
            except ValueError:
                state = {}
            state = state if isinstance(state, dict) else {}
            found[name] = (
                _holds(state.get("running"), now_ms),
                _holds(state.get("queued"), now_ms),
            )
        return found


def _holds(marker: Any, now_ms: int) -> bool:
    """Whether a run marker (``[task id, until ms, ...]``) holds at ``now_ms``."""
    if not isinstance(marker, list) or len(marker) < 2 or not isinstance(marker[0], str):
        return False
    try:
        return float(marker[1]) > now_ms
    except (TypeError, ValueError):
        return False
