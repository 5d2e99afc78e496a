"""The Lua scripts in ``lua/``: loaded once per client, called through typed wrappers.

Scripts are registered with redis-py, which calls them by SHA and loads them
again after ``SCRIPT FLUSH`` or a server restart (NOSCRIPT). Each script is
sent with ``lua/_common.lua`` (clock, key types, defensive JSON) in front of it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import redis
from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    RedisClusterException,
    TryAgainError,
)

from celery_periodiq.errors import ReplicasBehindError
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.protocol.keys import Keys, Partition
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.cluster_client import is_cluster

__all__ = ["SCRIPT_NAMES", "Claim", "ClaimBatch", "Pulse", "PutItem", "Scripts", "script_source"]

logger = logging.getLogger("celery_periodiq.scripts")


BACKFILL_MEMORY_MS = 30 * 24 * 3600 * 1000
"""How long an entry remembers which backfilled ticks began, after the newest one."""
DECLARATION_TTL_MS = 24 * 3600 * 1000
"""How long a declaration set (and its generation) is kept after its last beat: an old
version's beat that comes back within it is still older than the code deployed since."""
SCRIPT_NAMES = ("claim", "ack", "put", "remove", "pause", "beat", "begin", "finish", "record",
                "declare")  # fmt: skip
PutItem = tuple[str, str, str | None, str, int | None, int | None, bool, str | None,
                int | None, int | None, str]  # fmt: skip
"""What put.lua writes for one entry: its name, digest, owner, source, first tick and its
due instant (ms), whether it goes in the due set, its cluster event, its alert_after (ms),
its max_runs, and its definition JSON."""


@functools.cache
def script_source(name: str) -> str:
    """The text of one script as Redis runs it: ``_common.lua`` then ``NAME.lua``."""
    folder = resources.files("celery_periodiq.store.lua")
    return folder.joinpath("_common.lua").read_text() + folder.joinpath(f"{name}.lua").read_text()


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed tick, as claim.lua recorded it."""

    id: str
    name: str
    nominal_ms: int
    due_ms: int
    """When it is due (jitter applied); may be a little after the claim (claimed ahead)."""
    claimed_ms: int
    running: bool
    queued: bool
    version: int
    prev_ms: int | None
    """The entry's previous scheduled tick; None when unknown."""
    taken: int
    definition: str | None
    """The entry's JSON at claim time; None when the entry has vanished."""
    rebuilt: bool = False
    """The entry's state had no readable next tick: ``nominal_ms`` is its due instant,
    which the beat must check against the schedule."""
    runs: int = 0
    """Ticks the beat had published for the entry before this claim (what ``max_runs``
    counts)."""
    owed: int = 0
    """Ticks folded into the entry's next run by earlier claims (it stands for them)."""
    inc: str | None = None
    """The entry's incarnation when it was claimed (None: written before there were)."""


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """What one claim.lua call returned, for one partition."""

    partition: int
    now_ms: int
    now_us: int
    """Microseconds of the Redis clock past ``now_ms``."""
    next_due_ms: int | None
    next_recheck_ms: int | None
    claims: list[Claim]
    vanished: list[str] = field(default_factory=list)
    """Due entries whose definition was gone (deleted outside periodiq)."""


def _sent(client: Any, commands: list[tuple[Any, ...]]) -> Callable[[], list[Any]]:
    """Send ``commands`` in one write on one connection of ``client``, without waiting;
    the returned function reads every reply (an error reply in its place, the others
    read all the same) and gives the connection back."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_packed_command(connection.pack_commands(commands))
    except BaseException:
        connection.disconnect()
        pool.release(connection)
        raise

    def read() -> list[Any]:
        replies: list[Any] = []
        try:
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:
                    replies.append(error)
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)
        return replies

    return read


def _one_request(client: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """:func:`_sent`, waited for at once."""
    return _sent(client, commands)()


_warned_at = 0.0


def _warn_now_and_then(message: str) -> None:
    """Log ``message`` at WARNING, at most every 30 s (it may hold for every pass)."""
    global _warned_at
    if time.monotonic() - _warned_at >= 30:
        _warned_at = time.monotonic()
        logger.warning("periodiq: %s", message)


def _decode_claims(partition: int, raw: list[Any]) -> ClaimBatch:
    now, next_due, recheck, micros = (int(value) for value in raw[:4])
    notices = json.loads(raw[4]) if raw[4] else {}
    claims = []
    for index in range(5, len(raw), 3):
        record = json.loads(raw[index + 1])
        claims.append(
            Claim(
                id=raw[index],
                name=record["name"],
                nominal_ms=int(record["nominal"]),
                due_ms=int(record.get("due", record["nominal"])),
                claimed_ms=int(record["claimed"]),
                running=bool(record["running"]),
                queued=bool(record["queued"]),
                version=int(record["version"]),
                prev_ms=None if int(record.get("prev", -1)) < 0 else int(record["prev"]),
                taken=int(record.get("taken", 0)),
                definition=raw[index + 2] or None,
                rebuilt=bool(record.get("rebuilt", False)),
                runs=int(record.get("runs", 0)),
                owed=int(record.get("owed") or 0),
                inc=record.get("inc"),
            )
        )
    return ClaimBatch(
        partition=partition,
        now_ms=now,
        now_us=micros,
        next_due_ms=None if next_due < 0 else next_due,
        next_recheck_ms=None if recheck < 0 else recheck,
        claims=claims,
        vanished=list(notices.get("vanished") or []),
    )


@dataclass(frozen=True, slots=True)
class Pulse:
    """What a heartbeat (beat.lua) answered."""

    now_ms: int
    flag: bool
    """start: no other beat was alive; stop: no other beat is alive any more."""
    live: list[str]
    """The ids of the beats alive now."""
    declarations: dict[str, str] = field(default_factory=dict)
    """Each live beat's declaration set digest ("" for a beat that says none)."""
    registered: bool = False
    """This beat's declaration set is stored (False: declare it again)."""


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


class Scripts:
    """Every Lua script, registered on one client (``decode_responses=True``)."""

    def __init__(
        self, client: Any, keys: Keys, replica_acks: int = 0, replica_timeout: float = 0.5
    ) -> None:
        self.keys = keys
        self._client = client
        self.replica_acks = replica_acks
        """Replicas that must have a beat's claims before it publishes them (``WAIT``)."""
        self._wait_ms = max(int(replica_timeout * 1000), 1)
        self._clustered = is_cluster(client)
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}

    def _run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        return self._scripts[name](keys=keys, args=args, client=client)

    def _recorded_id(self, name: str, task_id: str, tick_ms: int | None) -> str:
        """The task id as the history keeps it: "" when the tick derives it."""
        if tick_ms is not None and task_id == task_id_for(self.keys.prefix, name, tick_ms):
            return ""
        return task_id

    def claim(
        self,
        part: Partition,
        beat_id: str,
        batch: int,
        lease_ms: int,
        now_ms: int | None = None,
        horizon_ms: int = 0,
    ) -> ClaimBatch:
        """Claim up to ``batch`` of the partition's ticks due (or due within ``horizon_ms``)
        or orphaned. ``now_ms`` replaces the Redis clock (tests only)."""
        raw = self._run(
            "claim",
            self._claim_keys(part),
            [beat_id, batch, lease_ms, "" if now_ms is None else now_ms, horizon_ms],
        )
        return _decode_claims(part.index, raw)

    @staticmethod
    def _claim_keys(part: Partition) -> list[str]:
        return [part.due, part.inflight, part.ticks, part.entries, part.state, part.quarantine,
                part.alive, part.alerts]  # fmt: skip

    def claim_many(
        self,
        parts: list[Partition],
        beat_id: str,
        batch: int,
        lease_ms: int,
        now_ms: int | None = None,
        horizon_ms: int = 0,
    ) -> list[ClaimBatch]:
        """:meth:`claim` for several partitions in one round trip (a pipeline); one call
        after the other on a Redis Cluster, whose pipelines do not carry scripts."""
        args = [beat_id, batch, lease_ms, "" if now_ms is None else now_ms, horizon_ms]
        if self.replica_acks:
            return self._replicated_claims(parts, args)
        if self._clustered or len(parts) < 2:
            return [self.claim(part, beat_id, batch, lease_ms, now_ms, horizon_ms)
                    for part in parts]  # fmt: skip
        pipe = self._client.pipeline(transaction=False)
        for part in parts:
            self._run("claim", self._claim_keys(part), args, client=pipe)
        return [_decode_claims(part.index, raw)
                for part, raw in zip(parts, pipe.execute(), strict=True)]  # fmt: skip

    def _replicated_claims(self, parts: list[Partition], args: list[Any]) -> list[ClaimBatch]:
        """Claims that ``replica_acks`` replicas have, per partition: a node whose replicas
        fell behind gives no claims (they are taken over after their lease), the others
        go on; when no node's replicas kept up, :class:`ReplicasBehindError`."""
        replied = self._replicated_calls(
            "claim", [(self._claim_keys(part), args) for part in parts], "claims",
            "none of them is published; they are taken over after their lease",
        )  # fmt: skip
        behind = [error for _, error in replied if error is not None]
        if behind and len(behind) == len(replied):
            raise behind[0]
        if behind:
            _warn_now_and_then(str(behind[0]))
        batches = []
        for part, (raw, error) in zip(parts, replied, strict=True):
            batch = _decode_claims(part.index, raw)
            batches.append(batch if error is None else replace(batch, claims=[], vanished=[]))
        return batches

    def _replicated_calls(
        self, name: str, calls: list[tuple[list[str], list[Any]]], what: str, then: str
    ) -> list[tuple[Any, ReplicasBehindError | None]]:
        """Run calls of one script, then ``WAIT`` for ``replica_acks`` replicas on the
        same connection (WAIT counts that connection's writes), one request per node.
        Each call's reply, with the error of its node's replicas falling behind, if so."""
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for position, (keys, _) in enumerate(calls):
            node, client = self._node_of(keys[0])
            by_node.setdefault(node, (client, []))[1].append(position)
        replies: list[tuple[Any, ReplicasBehindError | None]] = [(None, None)] * len(calls)
        script = self._scripts[name]
        for client, positions in by_node.values():
            commands = [("EVALSHA", script.sha, len(calls[position][0]), *calls[position][0],
                         *calls[position][1]) for position in positions]  # fmt: skip
            commands.append(("WAIT", self.replica_acks, self._wait_ms))
            try:
                answered = _one_request(client, commands)
                if isinstance(answered[0], NoScriptError):  # then none of them ran
                    client.script_load(script.script)
                    answered = _one_request(client, commands)
            except (redis.ConnectionError, redis.TimeoutError):
                self._relearn()  # a master failed or a slot moved
                raise
            failed = next((reply for reply in answered if isinstance(reply, Exception)), None)
            if failed is not None:
                if isinstance(failed, AskError | ClusterDownError | TryAgainError):
                    self._relearn()  # MOVED, ASK: the slot is elsewhere now
                raise failed
            acked = int(answered.pop())
            behind = None
            if acked < self.replica_acks:
                behind = ReplicasBehindError(
                    f"{acked} of the {self.replica_acks} replicas required "
                    f"(periodiq_replica_acks) acknowledged the {what} within "
                    f"{self._wait_ms} ms" + (f"; {then}" if then else "")
                )
            for position, reply in zip(positions, answered, strict=True):
                replies[position] = (reply, behind)
        return replies

    def _node_of(self, key: str) -> tuple[str, Any]:
        """The node holding ``key`` and a client of it alone (this client off a cluster)."""
        if not self._clustered:
            return "", self._client
        try:
            node = self._client.get_node_from_key(key)
        except RedisClusterException as error:  # the slot's master is gone, no successor yet
            self._relearn()
            raise redis.ConnectionError(f"Redis Cluster: {error}") from error
        return node.name, self._client.get_redis_connection(node)

    def _relearn(self) -> None:
        """Ask the cluster for its layout again (after a failover); quietly, if it fails."""
        if self._clustered:
            with contextlib.suppress(RedisClusterException, redis.RedisError):
                self._client.nodes_manager.initialize()

    def ack(
        self, part: Partition, beat_id: str, history_length: int, settlements: list[Settlement]
    ) -> int:
        """Settle claimed ticks of one partition (see ack.lua); returns how many were ours."""
        if not settlements:
            return 0
        return int(self._run("ack", *self._ack_call(part, beat_id, history_length, settlements)))

    def ack_many(
        self,
        batches: list[tuple[Partition, list[Settlement]]],
        beat_id: str,
        history_length: int,
    ) -> int:
        """:meth:`ack` for several partitions in one round trip (a pipeline); one call
        after the other on a Redis Cluster. Returns how many were ours in all."""
        batches = [(part, items) for part, items in batches if items]
        if self._clustered or len(batches) < 2:
            return sum(self.ack(part, beat_id, history_length, items) for part, items in batches)
        pipe = self._client.pipeline(transaction=False)
        for part, items in batches:
            self._run("ack", *self._ack_call(part, beat_id, history_length, items), client=pipe)
        return sum(int(settled) for settled in pipe.execute())

    def ack_later(
        self,
        batches: list[tuple[Partition, list[Settlement]]],
        beat_id: str,
        history_length: int,
    ) -> Callable[[], int]:
        """:meth:`ack_many`, sent now and waited for when the returned function is called:
        Redis runs the scripts while the caller goes on. The function returns how many
        settlements were ours, or raises what the calls raised."""
        batches = [(part, items) for part, items in batches if items]
        if self._clustered or not batches:
            settled = self.ack_many(batches, beat_id, history_length)
            return lambda: settled
        wait = self._later(
            "ack", [self._ack_call(part, beat_id, history_length, items) for part, items in batches]
        )
        return lambda: sum(
            int(reply) if reply is not None else self.ack(part, beat_id, history_length, items)
            for reply, (part, items) in zip(wait(), batches, strict=True)
        )  # fmt: skip

    def claim_later(
        self,
        parts: list[Partition],
        beat_id: str,
        batch: int,
        lease_ms: int,
        horizon_ms: int = 0,
    ) -> Callable[[], list[ClaimBatch]]:
        """:meth:`claim_many`, sent now and read when the returned function is called."""
        if self._clustered or not parts or self.replica_acks:  # claimed (and waited for) now
            claimed = self.claim_many(parts, beat_id, batch, lease_ms, None, horizon_ms)
            return lambda: claimed
        args = [beat_id, batch, lease_ms, "", horizon_ms]
        wait = self._later("claim", [(self._claim_keys(part), args) for part in parts])
        return lambda: [
            _decode_claims(part.index, raw) if raw is not None
            else self.claim(part, beat_id, batch, lease_ms, None, horizon_ms)
            for part, raw in zip(parts, wait(), strict=True)
        ]  # fmt: skip

    def _later(
        self, name: str, calls: list[tuple[list[str], list[Any]]]
    ) -> Callable[[], list[Any]]:
        """Send calls of one script on a connection of their own, without waiting; the
        returned function reads their replies (None for a script Redis did not know: the
        caller runs that one the usual way, which loads it) and gives the connection back."""
        sha = self._scripts[name].sha
        read = _sent(self._client, [("EVALSHA", sha, len(keys), *keys, *args)
                                    for keys, args in calls])  # fmt: skip

        def wait() -> list[Any]:
            replies = [None if isinstance(reply, NoScriptError) else reply for reply in read()]
            failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
            if failed is not None:
                raise failed
            return replies

        return wait

    @staticmethod
    def _ack_call(
        part: Partition, beat_id: str, history_length: int, settlements: list[Settlement]
    ) -> tuple[list[str], list[Any]]:
        keys = [part.due, part.inflight, part.ticks, part.entries, part.state, part.quarantine]
        for item in settlements:
            keys += [part.history(item.name), part.failures(item.name)]
        keys += [part.alerts, part.stats]
        args: list[Any] = [beat_id, history_length]
        args.extend(map(Settlement.to_lua, settlements))
        return keys, args

    def put(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None = None,
        generation: int | None = None,
    ) -> list[str]:
        """Create or replace entries of one partition; one status per item (see put.lua).

        ``was_owners``: the owner each entry had when the caller read it (None: no
        owner, or not read: "add" does not read it). ``generation``: the writing beat's
        declaration set's (reconcile).
        """
        if not items:
            return []
        call = self._put_call(part, mode, items, was_owners, generation)
        return list(self._run("put", *call))

    def put_later(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None = None,
        generation: int | None = None,
    ) -> Callable[[], list[str]]:
        """:meth:`put`, sent now and read when the returned function is called: Redis runs
        it while the caller prepares the next."""
        if self._clustered or not items:
            done = self.put(part, mode, items, was_owners, generation)
            return lambda: done
        wait = self._later("put", [self._put_call(part, mode, items, was_owners, generation)])

        def read() -> list[str]:
            (reply,) = wait()
            if reply is not None:
                return list(reply)
            return self.put(part, mode, items, was_owners, generation)

        return read

    def _put_call(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None,
        generation: int | None = None,
    ) -> tuple[list[str], list[Any]]:
        keys = [part.entries, part.due, part.declared, part.events, part.quarantine, part.state,
                part.generations]  # fmt: skip
        args: list[Any] = [self.keys.changes, mode, "" if generation is None else generation]
        owners = was_owners or {}
        for (
            name,
            digest,
            owner,
            source,
            next_ms,
            due_ms,
            scheduled,
            event,
            alert,
            most,
            text,
        ) in items:
            was = owners.get(name)
            keys += (part.owner(was or ""), part.owner(owner or ""), part.history(name),
                     part.failures(name))  # fmt: skip
            args += (
                name, digest, owner or "", source, was or "",
                "" if next_ms is None else next_ms, "" if due_ms is None else due_ms,
                "1" if scheduled else "", event or "", "" if alert is None else alert,
                "" if most is None else most, text,
            )  # fmt: skip
        return keys, args

    def remove(
        self, part: Partition, owners: dict[str, str | None], sources: str = "*"
    ) -> list[str]:
        """Delete entries of one partition whose source is in ``sources``, given the owner
        each had when read; returns the names removed, ``retry:NAME`` for those whose
        owner changed meanwhile, and (unless ``sources`` is ``"*"``) ``kept:NAME`` for
        those a live beat of the generation that wrote them still declares."""
        if not owners:
            return []
        keys = [part.entries, part.due, part.declared, part.events, part.quarantine, part.state,
                part.generations]  # fmt: skip
        args: list[Any] = [self.keys.changes, sources]
        for name, owner in owners.items():
            keys += [part.owner(owner or ""), part.history(name), part.failures(name),
                     part.checkpoint(name), part.backfilled(name)]  # fmt: skip
            args += [name, owner or ""]
        return list(self._run("remove", keys, args))

    def pause(self, name: str, note: str) -> str:
        """Pause an entry: ``"ok"``, ``"missing"`` or ``"damaged: <why>"``."""
        part = self.keys.of(name)
        keys = [part.entries, part.due, part.state, part.quarantine]
        return str(self._run("pause", keys, [self.keys.changes, name, "pause", note, ""]))

    def resume(self, name: str, next_ms: int | None, due_ms: int | None) -> str:
        """Resume an entry with its next tick: ``"ok"``, ``"missing"`` or ``"damaged: <why>"``."""
        part = self.keys.of(name)
        keys = [part.entries, part.due, part.state, part.quarantine]
        nominal = "" if next_ms is None else str(next_ms)
        due = "" if due_ms is None else str(due_ms)
        return str(self._run("pause", keys, [self.keys.changes, name, "resume", nominal, due]))

    def beat(
        self, beat_id: str, action: str, ttl_ms: int, info: dict[str, Any], declared: str = ""
    ) -> tuple[int, bool]:
        """Heartbeat ``start``/``alive``/``stop``; returns (server now in ms, cluster flag)."""
        pulse = self.heartbeat(beat_id, action, ttl_ms, info, declared)
        return pulse.now_ms, pulse.flag

    def heartbeat(
        self, beat_id: str, action: str, ttl_ms: int, info: dict[str, Any], declared: str = ""
    ) -> Pulse:
        """Heartbeat ``start``/``alive``/``stop`` of a beat running with the declaration
        set ``declared`` (its digest; "" for none), whose TTL it refreshes."""
        args: list[Any] = [beat_id, action, ttl_ms, declared, DECLARATION_TTL_MS]
        for key, value in info.items():
            args.extend([key, value])
        keys = [self.keys.beats, self.keys.beat(beat_id), self.keys.declarers,
                self.keys.declaration(declared)]  # fmt: skip
        now, flag, *rest = self._run("beat", keys, args)
        registered, pairs = bool(rest[0]) if rest else False, [str(value) for value in rest[1:]]
        declarations = dict(zip(pairs[::2], pairs[1::2], strict=True))
        return Pulse(int(now), bool(flag), list(declarations), declarations, registered)

    def declare(self, digest: str, names: str, hint: int | None = None) -> int:
        """Store a declaration set (declare.lua) given its digest and its names' JSON;
        returns its generation (``hint``, the one this beat had, when it was lost)."""
        keys = [self.keys.declaration(digest), self.keys.generation]
        args = [names, "" if hint is None else hint, DECLARATION_TTL_MS]
        return int(self._run("declare", keys, args))

    def record(self, name: str, kind: str, task_id: str, tick_ms: int | None, note: str,
               history_length: int) -> bool:  # fmt: skip
        """Note a run published outside the beat's claims (record.lua)."""
        part = self.keys.of(name)
        args = [name, history_length, kind, "" if tick_ms is None else tick_ms,
                self._recorded_id(name, task_id, tick_ms), note]  # fmt: skip
        return bool(self._run("record", [part.entries, part.state, part.history(name)], args))

    def begin(self, name: str, run: RunStart, now_ms: int | None = None) -> Admission:
        """The worker's guards before a run (begin.lua): one round trip.

        Raises:
            ReplicasBehindError: with ``replica_acks``, the run started (or resumed) but
                too few replicas acknowledged it; its ``now_ms`` is the Redis clock then.
                Sending the same ``run`` (its attempt token) again writes the start again.
        """
        part = self.keys.of(name)
        keys = [part.entries, part.state, part.quarantine, part.due, part.history(name),
                part.failures(name), part.alerts, part.stats, part.backfilled(name)]  # fmt: skip
        args = [
            run.task_id,
            "" if run.tick_ms is None else run.tick_ms,
            run.min_gap_ms,
            run.overlap,
            run.ttl_ms,
            run.retries,
            run.host,
            run.history_length,
            "" if now_ms is None else now_ms,
            name,
            "1" if run.published else "0",
            "" if run.expires_ms is None else run.expires_ms,
            self._recorded_id(name, run.task_id, run.tick_ms),
            run.attempt,
            "1" if run.backfill else "0",
            BACKFILL_MEMORY_MS,
            "1" if run.catchup else "0",
            "1" if run.plain else "0",
        ]
        if self.replica_acks:
            [(reply, behind)] = self._replicated_calls(
                "begin", [(keys, args)], "start of the run", ""
            )
            outcome, now, last, note = reply
            # A refusal need not be replicated: nothing runs on it. A start must be
            # before the body runs; the caller sends it again (see PeriodicTask._begin).
            if behind is not None and outcome in ("started", "resumed"):
                behind.now_ms = int(now)
                raise behind
        else:
            outcome, now, last, note = self._run("begin", keys, args)
        return Admission(
            outcome=outcome,
            now_ms=int(now),
            last_run_ms=None if int(last) < 0 else int(last),
            note=str(note or ""),
        )

    def finish(self, name: str, end: RunEnd, now_ms: int | None = None) -> bool:
        """Record how a run ended (finish.lua); True if its running marker was cleared."""
        part = self.keys.of(name)
        cleared = self._run(
            "finish",
            [part.entries, part.state, part.quarantine, part.due, part.history(name),
             part.failures(name), part.alerts],
            [
                end.task_id,
                "" if end.tick_ms is None else end.tick_ms,
                end.outcome,
                end.error,
                end.duration_ms,
                end.host,
                end.history_length,
                "2" if not end.ran else "1" if end.final else "0",
                end.retry_ttl_ms,
                "" if now_ms is None else now_ms,
                name,
                self._recorded_id(name, end.task_id, end.tick_ms),
                self.keys.changes,
            ],
        )  # fmt: skip
        return bool(cleared)
