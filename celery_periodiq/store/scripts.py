"""The Lua scripts in ``lua/``: their text, their registration on a client, the KEYS
each declares, and the ways one is called (at once, pipelined, sent ahead, waited on by
replicas). The typed wrappers build on :class:`ScriptCalls`, grouped by who calls them:
:mod:`~celery_periodiq.store.beat_scripts` (claim, ack, beat, declare, alerts),
:mod:`~celery_periodiq.store.run_scripts` (begin, finish, record) and
:mod:`~celery_periodiq.store.entry_scripts` (put, remove, pause).

Scripts are registered with redis-py, which calls them by SHA and loads them
again after ``SCRIPT FLUSH`` or a server restart (NOSCRIPT). Each script is
sent with ``lua/_common.lua`` (clock, key types, defensive JSON) in front of it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
from celery_periodiq.protocol.keys import Keys, Partition
from celery_periodiq.store.cluster_client import is_cluster
from celery_periodiq.store.topology import attached

__all__ = ["INDEXES", "SCRIPT_NAMES", "ScriptCalls", "ScriptKeys", "script_source"]

logger = logging.getLogger("celery_periodiq.scripts")


SCRIPT_NAMES = (
    "claim",
    "ack",
    "put",
    "remove",
    "pause",
    "beat",
    "begin",
    "finish",
    "record",
    "declare",
    "index",
    "release",
    "alerts",
    "window",
)


INDEXES = ("names", "paused", "disabled", "ended", "overdue", "failing", "running")
"""The read side's index keys, in the order the scripts that keep them take them
(after the partition's stats hash; see ``keep_indexes`` in ``lua/_common.lua``)."""


@functools.cache
def script_source(name: str) -> str:
    """The text of one script as Redis runs it: ``_common.lua`` then ``NAME.lua``."""
    folder = resources.files("celery_periodiq.store.lua")
    return folder.joinpath("_common.lua").read_text() + folder.joinpath(f"{name}.lua").read_text()


Role = tuple[str, str]
"""A role read once: the attribute of the key's source and the argument it is given ("":
none, the attribute is the key)."""


@dataclass(frozen=True, slots=True)
class ScriptKeys:
    """One script's KEYS, declared once, beside its wrapper, in its Lua header's order:
    ``head``, then ``each`` once per item (a tick, an entry), then ``tail``.

    A role names a key of a :class:`~celery_periodiq.protocol.keys.Partition` (or of
    :class:`~celery_periodiq.protocol.keys.Keys`): an attribute (``"due"``), or a method
    and the name of the argument it is given (``"history:name"``: the history of the
    entry ``name``). ``tests/test_lua_contract.py`` holds each against its header.

    The roles are read once, when the declaration is made, and a partition's fixed keys
    built once: the beat asks for them on every pass, for every partition it claims.
    """

    script: str
    """The script's name: ``lua/NAME.lua``."""
    head: tuple[str, ...]
    each: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()
    _roles: tuple[tuple[Role, ...], tuple[Role, ...], tuple[Role, ...]] = field(
        init=False, repr=False, compare=False
    )
    _built: dict[tuple[int, Partition], tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """The head and tail keys of each partition, built once: they never change, and the
    beat asks for them on every pass, for every partition it claims."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_roles", (_read(self.head), _read(self.each), _read(self.tail)))

    def keys(self, source: Partition | Keys, **given: str) -> list[str]:
        """The ``head`` keys of ``source``, methods given the arguments named in ``given``."""
        if given or not isinstance(source, Partition):
            return _resolved(source, self._roles[0], given)
        return self._fixed(0, source)

    def item_keys(self, source: Partition, **given: str) -> list[str]:
        """The keys of one item (``each``)."""
        return _resolved(source, self._roles[1], given)

    def item_makers(self, source: Partition) -> list[Callable[[str], str]]:
        """The methods that make one item's keys (``each``, in order), each to be given the
        item's one argument: what a wrapper calls per item on the beat's hot path."""
        if not all(argument for _, argument in self._roles[1]):
            raise ValueError(f"{self.script}: an item key that takes no argument: {self.each}")
        return [getattr(source, attribute) for attribute, _ in self._roles[1]]

    def tail_keys(self, source: Partition) -> list[str]:
        """The keys after the items (``tail``)."""
        return self._fixed(2, source)

    def _fixed(self, section: int, source: Partition) -> list[str]:
        """The keys of a section (0: head, 2: tail) of a partition, when they take no argument."""
        built = self._built.get((section, source))
        if built is None:
            roles = self._roles[section]
            built = self._built[section, source] = tuple(_resolved(source, roles, {}))
        return list(built)


def _read(roles: tuple[str, ...]) -> tuple[Role, ...]:
    """Each role as (attribute, argument), the attribute's name interned as Python's own
    attribute names are."""
    return tuple(
        (sys.intern(attribute), argument)
        for attribute, _, argument in (role.partition(":") for role in roles)
    )


def _resolved(
    source: Partition | Keys, roles: tuple[Role, ...], given: dict[str, str]
) -> list[str]:
    keys = []
    for attribute, argument in roles:
        found = getattr(source, attribute)
        keys.append(found(given[argument]) if argument else found)
    return keys


def _send(connection: Any, commands: list[tuple[Any, ...]]) -> None:
    """Send ``commands`` in one write on ``connection``."""
    connection.send_packed_command(connection.pack_commands(commands))


def _exchange(connection: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Send ``commands`` on ``connection`` and read their replies (see :func:`_replies`)."""
    _send(connection, commands)
    return _replies(connection, len(commands))


def _replies(connection: Any, count: int) -> list[Any]:
    """Read ``count`` replies from ``connection``: an error reply in its place, the others
    read all the same."""
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(connection.read_response())
        except redis.ResponseError as error:
            replies.append(error)
    return replies


def _sent(client: Any, commands: list[tuple[Any, ...]]) -> Callable[[], list[Any]]:
    """Send ``commands`` in one write on one connection of ``client``, without waiting;
    the returned function reads every reply (see :func:`_replies`) and gives the connection
    back."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        _send(connection, commands)
    except BaseException:
        connection.disconnect()
        pool.release(connection)
        raise

    def read() -> list[Any]:
        try:
            return _replies(connection, len(commands))
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)

    return read


@contextlib.contextmanager
def _connection(client: Any) -> Iterator[Any]:
    """One connection of ``client``, for several requests in turn (``WAIT`` counts the
    writes of its own connection); given back afterwards, dropped after an error."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        yield connection
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)


_REPLICA_KEY = re.compile(r"slave\d+")


def _attached(info: Any) -> int | None:
    """How many replicas a primary's raw ``INFO replication`` lists that replica acks wait
    for (:func:`~celery_periodiq.store.topology.attached`); None when INFO was refused
    (an ACL without ``+info``)."""
    if isinstance(info, Exception):
        return None
    text = info.decode() if isinstance(info, bytes) else str(info)
    listed = {
        key: dict(pair.partition("=")[::2] for pair in value.split(","))
        for key, _, value in (line.strip().partition(":") for line in text.splitlines())
        if _REPLICA_KEY.fullmatch(key)
    }
    return attached(listed)


_warned_at = 0.0


def _warn_now_and_then(message: str) -> None:
    """Log ``message`` at WARNING, at most every 30 s (it may hold for every pass)."""
    global _warned_at
    if time.monotonic() - _warned_at >= 30:
        _warned_at = time.monotonic()
        logger.warning("periodiq: %s", message)


PIPELINED = 500
"""How many calls of a script on many entries go in one pipeline (one round trip)."""


class ScriptCalls:
    """Every Lua script, registered on one client (``decode_responses=True``), and the
    ways of calling one; the typed wrappers are its subclasses' methods."""

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
        self.audit_limits = (0, 0)
        """The audit trail's records kept per entry and window (ms), for the contexts of
        the beats' and workers' scripts (a quarantine); (0, 0): nothing is recorded."""
        self._attached: dict[str, int] = {}
        """How many replicas each node ("" off a cluster) had attached when last asked."""
        self._told_info_refused = False

    def _audit_by(self, actor: str, via: str) -> str:
        """The audit context of a beat's or a worker's script (``""``: none recorded)."""
        keep, window_ms = self.audit_limits
        return json.dumps([actor, via, "", keep, window_ms]) if keep > 0 else ""

    def _run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        return self._scripts[name](keys=keys, args=args, client=client)

    def _pipelined(self, name: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Calls of one script that each touch one entry's keys, in pipelines of
        :data:`PIPELINED` (one after the other on a Redis Cluster, whose entries' keys are
        spread over the nodes); one reply per call."""
        if self._clustered or len(calls) < 2:
            return [self._run(name, keys, args) for keys, args in calls]
        replies: list[Any] = []
        for start in range(0, len(calls), PIPELINED):
            pipe = self._client.pipeline(transaction=False)
            for keys, args in calls[start : start + PIPELINED]:
                self._run(name, keys, args, client=pipe)
            replies += pipe.execute()
        return replies

    def _replicated_calls(
        self, name: str, calls: list[tuple[list[str], list[Any]]], what: str, then: str
    ) -> list[tuple[Any, ReplicasBehindError | None]]:
        """Run calls of one script, then ``WAIT`` on the same connection (WAIT counts that
        connection's writes) until every replica attached to the primary has them, and at
        least ``replica_acks`` (:meth:`_wait_for_replicas`), one request per node. Each
        call's reply, with the error of its node's replicas falling behind, if so."""
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for position, (keys, _) in enumerate(calls):
            node, client = self._node_of(keys[0])
            by_node.setdefault(node, (client, []))[1].append(position)
        replies: list[tuple[Any, ReplicasBehindError | None]] = [(None, None)] * len(calls)
        script = self._scripts[name]
        for node, (client, positions) in by_node.items():
            commands = [
                ("EVALSHA", script.sha, len(keys), *keys, *args)
                for keys, args in (calls[position] for position in positions)
            ]
            try:
                with _connection(client) as connection:
                    answered, acked, needed = self._wait_for_replicas(node, connection, commands)
                    if isinstance(answered[0], NoScriptError):  # then none of them ran
                        client.script_load(script.script)
                        answered, acked, needed = self._wait_for_replicas(
                            node, connection, commands
                        )
            except (redis.ConnectionError, redis.TimeoutError):
                self._relearn()  # a master failed or a slot moved
                raise
            failed = next((reply for reply in answered if isinstance(reply, Exception)), None)
            if failed is not None:
                if isinstance(failed, AskError | ClusterDownError | TryAgainError):
                    self._relearn()  # MOVED, ASK: the slot is elsewhere now
                raise failed
            behind = None
            if acked < needed:
                behind = ReplicasBehindError(
                    f"{acked} of the {needed} replicas required acknowledged the {what} "
                    f"within {self._wait_ms} ms (every replica attached to the primary, "
                    f"and at least periodiq_replica_acks = {self.replica_acks})"
                    + (f"; {then}" if then else "")
                )
            for position, reply in zip(positions, answered, strict=True):
                replies[position] = (reply, behind)
        return replies

    def _wait_for_replicas(
        self, node: str, connection: Any, commands: list[tuple[Any, ...]]
    ) -> tuple[list[Any], int, int]:
        """Send ``commands`` on ``connection``, then ``WAIT`` and ``INFO replication``;
        returns their replies, how many replicas acknowledged them and how many had to.

        WAIT N says that N replicas have the writes, not which: a failover may promote
        another, one that lagged (Sentinel ranks replicas by the offsets it last read,
        seconds ago), and the writes are lost though acknowledged. So every replica
        attached to the primary (syncing or in sync) must have them, and at least
        ``replica_acks``. The WAIT asks for as many as the node had attached last time;
        when more are attached now, it is asked again for them all.
        """
        wanted = max(self.replica_acks, self._attached.get(node, 0))
        replies = _exchange(
            connection, [*commands, ("WAIT", wanted, self._wait_ms), ("INFO", "replication")]
        )
        for asked in range(3):
            if isinstance(replies[-2], Exception):  # the scripts' own error says more
                if any(isinstance(reply, Exception) for reply in replies[: len(commands)]):
                    return replies[: len(commands)], 0, self.replica_acks
                raise replies[-2]
            acked, attached = int(replies[-2]), _attached(replies[-1])
            if attached is None and not self._told_info_refused:
                self._told_info_refused = True
                logger.warning(
                    "periodiq: INFO replication is refused (grant +info to this Redis "
                    "user): only periodiq_replica_acks = %d replicas are waited for, and a "
                    "failover that promotes another replica can lose what they acknowledged",
                    self.replica_acks,
                )
            self._attached[node] = attached or 0
            needed = max(self.replica_acks, attached or 0)
            if acked >= needed or wanted >= needed or asked == 2:  # done, or it timed out
                break
            wanted = needed  # replicas attached meanwhile: wait for them all
            replies[-2:] = _exchange(
                connection, [("WAIT", wanted, self._wait_ms), ("INFO", "replication")]
            )
        return replies[: len(commands)], acked, needed

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

    def _later(
        self, name: str, calls: list[tuple[list[str], list[Any]]]
    ) -> Callable[[], list[Any]]:
        """Send calls of one script on a connection of their own, without waiting; the
        returned function reads their replies (None for a script Redis did not know: the
        caller runs that one the usual way, which loads it) and gives the connection back."""
        sha = self._scripts[name].sha
        read = _sent(
            self._client, [("EVALSHA", sha, len(keys), *keys, *args) for keys, args in calls]
        )

        def wait() -> list[Any]:
            replies = [None if isinstance(reply, NoScriptError) else reply for reply in read()]
            failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
            if failed is not None:
                raise failed
            return replies

        return wait
