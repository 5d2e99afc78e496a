"""A beat and the API over a password-protected, least-privilege ACL user and over TLS."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_periodiq import StoreUnavailableError
from celery_periodiq.localredis import LocalRedis
from tests.processes import api_for, cluster, wait_for

pytestmark = pytest.mark.slow

# What celery_periodiq needs and nothing more: its own keys and channel, no admin commands.
LEAST_PRIVILEGE = [
    "--user", "default", "off",
    "--user", "periodiq", "on", ">s3cret", "resetkeys", "~{periodiq:periodiq_app}:*",
    "~{periodiq:periodiq_app:*}:*",
    "resetchannels", "&{periodiq:periodiq_app}:*", "-@all", "+@read", "+@write", "+@scripting",
    "+@pubsub", "+@connection", "+time", "-script|flush", "-script|kill",
]  # fmt: skip


def enqueued(client: Any, name: str) -> int:
    return sum(1 for event in client.history(name, limit=50) if event.kind == "enqueued")


def test_a_least_privilege_acl_user_runs_the_beat_and_the_api(
    tmp_path: Path, broker_url: str
) -> None:
    with LocalRedis(tmp_path / "acl", extra_args=LEAST_PRIVILEGE) as server:
        url = f"redis://periodiq:s3cret@127.0.0.1:{server.port}/0"
        client = api_for(url, broker_url)
        client.add("guarded-by-acl", "record", every=1)
        with cluster(tmp_path, url, broker_url) as running:
            running.beat()
            wait_for(lambda: enqueued(client, "guarded-by-acl") >= 3, 30, "three published ticks")
            assert len(client.beats()) == 1
        outsider = redis.Redis(port=server.port, username="periodiq", password="s3cret")
        with pytest.raises(redis.exceptions.NoPermissionError):
            outsider.set("not-ours", "1")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port, username="periodiq", password="wrong").ping()


@pytest.fixture
def certificates(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "tls"
    folder.mkdir()

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=periodiq-test-ca",
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2",
            "-extfile", "san.ext")  # fmt: skip
    return {name: str(folder / name) for name in ("ca.crt", "server.crt", "server.key")}


def test_a_beat_and_the_api_work_over_tls(
    tmp_path: Path, broker_url: str, certificates: dict[str, str]
) -> None:
    from celery_periodiq.localredis import _free_port

    tls_port = _free_port()
    tls = [
        "--tls-port", str(tls_port), "--tls-cert-file", certificates["server.crt"],
        "--tls-key-file", certificates["server.key"],
        "--tls-ca-cert-file", certificates["ca.crt"], "--tls-auth-clients", "no",
    ]  # fmt: skip
    with LocalRedis(tmp_path / "tls-server", extra_args=tls):
        url = f"rediss://127.0.0.1:{tls_port}/0"
        options = {"ssl_ca_certs": certificates["ca.crt"]}
        client = api_for(url, broker_url, **options)
        client.add("over-tls", "record", every=1)
        with cluster(tmp_path, url, broker_url, TEST_REDIS_OPTIONS=json.dumps(options)) as running:
            running.beat()
            wait_for(lambda: enqueued(client, "over-tls") >= 3, 30, "three published ticks")
        untrusted = api_for(url, broker_url)
        with pytest.raises(StoreUnavailableError, match="certificate verify failed"):
            untrusted.list()
