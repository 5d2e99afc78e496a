"""A Redis Cluster client that connects on first use, from any of several nodes.

redis-py's ``RedisCluster`` asks a node for the cluster's layout when it is made,
and raises if none of the nodes it was given answers. A beat or worker starting
while the node its URL names is down (a master just killed, its replica not yet
promoted) would then die, where with a single Redis it retries. This client is
made at once and connects when first used; until a node answers, each use raises
``redis.ConnectionError``, which every caller already treats as "Redis unreachable".
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException

__all__ = ["ClusterOnDemand", "is_cluster", "node_urls"]


def node_urls(url: str) -> list[str]:
    """The nodes of ``redis://h1:p1;redis://h2:p2/db``: one URL each (Celery's ``;`` form)."""
    return [part.strip() for part in url.split(";") if part.strip()]


class ClusterOnDemand:
    """A :class:`RedisCluster` of the nodes in ``url``, made when first used."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self._urls = node_urls(url)
        self._options = options
        self._client: RedisCluster | None = None
        self._lock = threading.Lock()

    def register_script(self, script: str) -> Script:
        """A script called through this client, registered without connecting."""
        return Script(self, script)  # type: ignore[arg-type]

    def get_encoder(self) -> _Utf8:
        """What ``register_script`` asks for (to hash a script), without connecting."""
        return _Utf8()

    def connected(self) -> RedisCluster:
        """The cluster client, made now if it is not yet.

        Raises:
            redis.ConnectionError: none of the nodes answered.
        """
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self._client is None:
                first, *others = self._urls
                nodes = [
                    ClusterNode(parsed.hostname or "localhost", parsed.port or 6379)  # type: ignore[no-untyped-call]
                    for parsed in map(urlsplit, others)
                ]
                try:
                    self._client = RedisCluster.from_url(
                        first, startup_nodes=nodes, **self._options
                    )
                except RedisClusterException as error:
                    raise redis.ConnectionError(str(error)) from error
            return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connected(), name)


class _Utf8:
    """Encodes a script's text as redis-py's encoder does by default."""

    @staticmethod
    def encode(text: str) -> bytes:
        return text.encode()


def is_cluster(client: Any) -> bool:
    """True for a Redis Cluster client (made or still to be made)."""
    return isinstance(client, RedisCluster | ClusterOnDemand)
