"""A private Sentinel setup on loopback: a primary, its replicas and the sentinels."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from celery_periodiq.errors import RedisServerError
from celery_periodiq.localredis.cluster import LocalRedisCluster
from celery_periodiq.localredis.server import LocalRedis, _free_ports, _Started, find_redis_server

__all__ = ["LocalSentinel"]


class LocalSentinel(_Started):
    """A private Sentinel setup on loopback: a primary with ``replicas`` replicas, watched
    by ``sentinels`` Sentinel processes (quorum: a majority) under ``master_name``.

    Every data node is a :class:`LocalRedis` with persistence; a primary killed with
    :meth:`kill_primary` is failed over in about ``down_after_ms`` plus an election.
    :attr:`url` is the Celery-style ``sentinel://h:p;sentinel://h:p/0`` address.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        replicas: int = 2,
        sentinels: int = 3,
        master_name: str = "mymaster",
        down_after_ms: int = 1000,
    ) -> None:
        self.directory = Path(directory)
        self.master_name = master_name
        self.down_after_ms = down_after_ms
        # replicas sync at once (Redis waits 5 s by default for more to sync together)
        fast_sync = ["--repl-diskless-sync-delay", "0"]
        ports = _free_ports(1 + replicas + sentinels)
        self.nodes = [
            LocalRedis(self.directory / "node-0", persist=True, port=ports[0], extra_args=fast_sync)
        ]
        self.nodes += [
            LocalRedis(
                self.directory / f"node-{index}",
                persist=True,
                port=ports[index],
                extra_args=[*fast_sync, "--replicaof", "127.0.0.1", str(self.nodes[0].port)],
            )
            for index in range(1, replicas + 1)
        ]
        self.sentinel_ports = ports[1 + replicas :]
        self._sentinels: list[subprocess.Popen[bytes]] = []
        self._relaunched = 0
        self.executable = find_redis_server()

    @property
    def url(self) -> str:
        """``sentinel://127.0.0.1:P1;sentinel://127.0.0.1:P2;.../0``."""
        return ";".join(f"sentinel://127.0.0.1:{port}" for port in self.sentinel_ports) + "/0"

    def start(self) -> LocalSentinel:
        """Start the data nodes and the sentinels; wait until the sentinels agree.

        Raises:
            RedisServerError: a process did not start, or the setup was not ready in 30 s.
        """
        try:
            for node in self.nodes:
                node.start()
            for index in range(len(self.sentinel_ports)):
                self._sentinels.append(self._launch(index))
            LocalRedisCluster._wait(self._ready, "replicas in sync, sentinels watching them")
        except BaseException:
            self.close()
            raise
        return self

    def _launch(self, index: int) -> subprocess.Popen[bytes]:
        """Sentinel ``index``, on its port, with a fresh configuration."""
        folder = self.directory / f"sentinel-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "sentinel.conf"
        quorum = len(self.sentinel_ports) // 2 + 1
        config.write_text(
            f"port {self.sentinel_ports[index]}\nbind 127.0.0.1\ndir {folder}\n"
            f"logfile {folder / 'sentinel.log'}\n"
            f"sentinel monitor {self.master_name} 127.0.0.1 {self.nodes[0].port} {quorum}\n"
            f"sentinel down-after-milliseconds {self.master_name} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.master_name} 10000\n"
            f"sentinel parallel-syncs {self.master_name} {len(self.nodes)}\n"
        )
        return subprocess.Popen(
            [self.executable, str(config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _relaunch_the_dead(self) -> None:
        """A sentinel that exited while starting (its port taken meanwhile, by a client's
        connection) starts again on another port, up to three times in all."""
        for index, process in enumerate(self._sentinels):
            if process.poll() is None:
                continue
            if self._relaunched >= 3:
                raise RedisServerError(f"sentinel {index} exited with code {process.returncode}")
            self._relaunched += 1
            self.sentinel_ports[index] = _free_ports(1)[0]
            self._sentinels[index] = self._launch(index)

    def _ready(self) -> bool:
        import redis

        self._relaunch_the_dead()

        for port in self.sentinel_ports:
            client: Any = redis.Redis(port=port, decode_responses=True, socket_timeout=1)
            try:
                replicas = client.execute_command("SENTINEL", "REPLICAS", self.master_name)
                sentinels = client.execute_command("SENTINEL", "SENTINELS", self.master_name)
            except redis.RedisError:
                return False
            finally:
                client.close()
            if len(replicas) < len(self.nodes) - 1 or len(sentinels) < len(self._sentinels) - 1:
                return False
        return self.in_sync()

    def in_sync(self) -> bool:
        """Whether the primary the sentinels agree on has every other node as an online
        replica."""
        import redis

        from celery_periodiq.store.topology import replicas

        node = self.primary()
        if node is None:
            return False
        primary: Any = redis.Redis(port=node.port, decode_responses=True)
        try:
            info = primary.info("replication")
        except redis.RedisError:
            return False
        finally:
            primary.close()
        return len(replicas(info, "online")) == len(self.nodes) - 1

    def primary(self) -> LocalRedis | None:
        """The node every sentinel names as primary now (None: none is known, the
        sentinels do not agree yet, or one of them is still carrying out a failover: a
        failover leader names the promoted replica before it has reconfigured the
        others, and a primary killed then leaves it stuck)."""
        import redis

        named = set()
        for port in self.sentinel_ports:
            client: Any = redis.Redis(port=port, decode_responses=True, socket_timeout=1)
            try:
                _, found = client.execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name
                )
                named.add(int(found))
                state = client.sentinel_master(self.master_name, return_responses=True)
                if "failover_in_progress" in str(state.get("flags")):
                    return None
            except (redis.RedisError, TypeError, ValueError):
                continue
            finally:
                client.close()
        if len(named) != 1:
            return None
        port = named.pop()
        return next((node for node in self.nodes if node.port == port), None)

    def kill_primary(self) -> LocalRedis:
        """SIGKILL the current primary; returns it (it can be started again later)."""
        primary = self.primary()
        if primary is None:
            raise RedisServerError("no primary is known to the sentinels")
        primary.stop(kill=True)
        return primary

    def close(self) -> None:
        """Stop every process (the directories are the caller's)."""
        for process in self._sentinels:
            if process.poll() is None:
                process.kill()
                process.wait()
        self._sentinels = []
        for node in self.nodes:
            node.stop(kill=True)
