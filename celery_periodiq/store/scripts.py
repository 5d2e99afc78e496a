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
import logging
import sys
import time
from collections.abc import Callable
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

    def _run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        return self._scripts[name](keys=keys, args=args, client=client)

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
            commands = [
                ("EVALSHA", script.sha, len(keys), *keys, *args)
                for keys, args in (calls[position] for position in positions)
            ]
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
