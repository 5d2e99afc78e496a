"""A private Redis Cluster on loopback, every node a :class:`LocalRedis`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery_periodiq.errors import RedisServerError
from celery_periodiq.localredis.server import LocalRedis, _free_ports, _Started

__all__ = ["LocalRedisCluster"]


class LocalRedisCluster(_Started):
    """A private Redis Cluster on loopback: ``masters`` masters with ``replicas`` replicas
    each, every node a :class:`LocalRedis` with persistence, so tests can kill a master
    and watch its replica take over.

    Built with CLUSTER MEET, ADDSLOTSRANGE and REPLICATE (no ``redis-cli`` needed), with
    a node timeout of ``node_timeout_ms``: a killed master fails over in about twice that.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 1000,
    ) -> None:
        self.directory = Path(directory)
        count = masters * (1 + replicas)
        ports = _free_ports(2 * count)
        self.bus_ports = ports[count:]
        self.nodes = [
            LocalRedis(
                self.directory / f"node-{index}",
                persist=True,
                port=ports[index],
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-port",
                    str(self.bus_ports[index]),
                    "--cluster-node-timeout",
                    str(node_timeout_ms),
                ],
            )
            for index in range(count)
        ]
        self.masters, self.replicas = masters, replicas

    @property
    def url(self) -> str:
        """The URL of one node, from which a cluster client learns the rest."""
        return self.nodes[0].url

    @property
    def urls(self) -> str:
        """Every node's URL, separated by ``;``: what ``periodiq_redis_url`` takes."""
        return ";".join(node.url for node in self.nodes)

    def start(self) -> LocalRedisCluster:
        """Start every node, form the cluster and wait until it serves every slot.

        Raises:
            RedisServerError: a node did not start, or the cluster did not form in 30 s.
        """
        try:
            self._form()
        except BaseException:
            self.close()
            raise
        return self

    def _form(self) -> None:
        import redis

        for node in self.nodes:
            node.start()
        clients: list[Any] = [
            redis.Redis(port=node.port, decode_responses=True) for node in self.nodes
        ]
        try:
            for client in clients[1:]:
                client.execute_command(
                    "CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.bus_ports[0]
                )
            self._wait(lambda: all(len(_nodes(c)) == len(clients) for c in clients), "meet")
            step = 16384 // self.masters
            for index, client in enumerate(clients[: self.masters]):
                last = 16383 if index == self.masters - 1 else (index + 1) * step - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", index * step, last)
            ids = [client.execute_command("CLUSTER", "MYID") for client in clients]
            self._wait(lambda: all(_known_masters(c) >= self.masters for c in clients), "slots")
            for index, client in enumerate(clients[self.masters :]):
                client.execute_command("CLUSTER", "REPLICATE", ids[index % self.masters])
            self._wait(lambda: all(_state_ok(c) for c in clients), "cluster_state:ok")
            self._wait(
                lambda: (
                    len(self.master_ports()) == self.masters
                    and all(_replica_synced(c) for c in clients[self.masters :])
                ),
                "replicas in sync",
            )
        finally:
            for client in clients:
                client.close()

    def master_ports(self) -> list[int]:
        """The ports of the nodes that are masters now, in slot order (dead ones left out)."""
        import redis

        for node in self.nodes:
            if not node.running:
                continue
            client: Any = redis.Redis(port=node.port, decode_responses=True)
            try:
                slots = client.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            finally:
                client.close()
            return [int(row[2][1]) for row in sorted(slots, key=lambda row: row[0])]
        return []

    def node_on(self, port: int) -> LocalRedis:
        """The node listening on ``port``."""
        return next(node for node in self.nodes if node.port == port)

    def close(self) -> None:
        """Stop every node and remove nothing (their directories are the caller's)."""
        for node in self.nodes:
            node.stop(kill=True)

    @staticmethod
    def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"the local Redis Cluster did not reach {what} in {timeout} s"
                )
            time.sleep(0.05)


def _nodes(client: Any) -> list[str]:
    return [line for line in client.execute_command("CLUSTER", "NODES").splitlines() if line]


def _known_masters(client: Any) -> int:
    return sum(
        1 for line in _nodes(client) if "master" in line.split()[2] and len(line.split()) > 8
    )


def _state_ok(client: Any) -> bool:
    return "cluster_state:ok" in str(client.execute_command("CLUSTER", "INFO"))


def _replica_synced(client: Any) -> bool:
    info = client.info("replication")
    return bool(info.get("role") == "slave" and info.get("master_link_status") == "up")
