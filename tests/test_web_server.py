"""The dashboard as a real HTTP server (uvicorn on a free port) against a real Redis.

A slow request never delays another: Redis is reached through a proxy that holds the
one command of the slow request for seconds, and a page asked meanwhile answers at
once (the handlers' Redis calls run in a thread pool, never on the event loop). With
Redis down, every page answers 503 saying what is down and retrying itself, every
``/api/`` route a 503 with a JSON error; the server logs one line, no traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import uvicorn
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.web import make_app
from tests.processes import wait_for
from tests.proxy import Proxy
from tests.test_cli import free_port

TOKEN = "s3cret-token"
REDACTED = "redis://***@127.0.0.1:"
"""How the stopped Redis's URL (with a password) is shown."""
HOLD = 3.0
"""How long the proxy holds the slow request's command (s)."""


@contextlib.contextmanager
def served(api: Periodiq) -> Iterator[str]:
    """The dashboard of ``api`` served by uvicorn in a thread; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(
        make_app(api, TOKEN), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="dashboard", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 20, "the dashboard to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def get(url: str, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    """Status, body and headers of one request (an error status is an answer too)."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return (
                answer.status,
                answer.read().decode(),
                {k.lower(): v for k, v in answer.headers.items()},
            )
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), {k.lower(): v for k, v in error.headers.items()}


@pytest.fixture
def slow_api(redis_server: LocalRedis, broker_url: str) -> Iterator[tuple[Periodiq, Proxy]]:
    """An API whose Redis is reached through a proxy that can hold one command."""
    with Proxy(redis_server.port) as proxy:
        app = Celery("served", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = proxy.url
        api = periodiq(app)
        yield api, proxy
        api.store.client.close()


@pytest.mark.parametrize(
    ("slow_path", "slow_key"),
    [("/api/entries/slowpoke", lambda keys: "slowpoke"),
     ("/entries/slowpoke", lambda keys: "slowpoke"),
     ("/metrics", lambda keys: keys.beats)],  # only a scrape reads the live beats
)  # fmt: skip # table: one row per slow route
def test_a_page_answers_at_once_while_a_slow_request_runs(
    slow_api: tuple[Periodiq, Proxy], slow_path: str, slow_key: Callable[[Keys], str]
) -> None:
    api, proxy = slow_api
    pattern = slow_key(api.settings.keys).encode()
    api.add("quick", "proj.t", every=60)
    api.add("slowpoke", "proj.t", every=60)
    slow_answer: list[int] = []
    with served(api) as base:
        proxy.hold_next(pattern, HOLD)
        slow = threading.Thread(target=lambda: slow_answer.append(get(base + slow_path)[0]))
        slow.start()
        assert proxy.holding.wait(10), "the slow request never reached Redis"
        started = time.monotonic()
        status, body, _ = get(base + "/api/entries/quick")
        took = time.monotonic() - started
        slow.join(30)

    assert status == 200
    assert json.loads(body)["name"] == "quick"
    assert took < 0.5, f"the quick request waited {took:.2f} s behind the slow one"
    assert slow_answer == [200]  # the slow one was slow, not broken


PAGES = ["/", "/?state=paused&q=x", "/entries/report", "/beats", "/login"]
APIS = [
    "/api/entries",
    "/api/entries?limit=5",
    "/api/entries/report",
    "/api/history/report",
    "/api/failures",
    "/api/beats",
    "/api/doctor",
]


@pytest.fixture
def down_api(redis_server: LocalRedis, broker_url: str) -> Iterator[Periodiq]:
    """An API with an entry, whose Redis (with a password) is then stopped."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.config_set("requirepass", "hunter22")
    app = Celery("down", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_server.url.replace("redis://", "redis://:hunter22@")
    api = periodiq(app)
    api.add("report", "proj.t", every=60)
    redis_server.stop()
    assert (
        api.settings.redis_url.replace(":hunter22@", "***@") == REDACTED + f"{redis_server.port}/0"
    )
    yield api
    api.store.client.close()


def server_log(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name.startswith(("uvicorn", "celery"))]


def test_with_redis_down_every_page_is_a_503_that_says_so_and_retries(
    down_api: Periodiq, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), served(down_api) as base:
        answers = {path: get(base + path) for path in PAGES}
        posted = get(base + "/actions/pause/report", method="POST")

    for path, (status, body, headers) in answers.items():
        if path == "/login":  # reads nothing from Redis
            assert status == 200, path
            continue
        assert status == 503, path
        assert headers["retry-after"] == "5", path
        assert f"Redis at {REDACTED}" in body, path
        assert "hunter22" not in body, path
        assert '<meta http-equiv="refresh" content="5">' in body, path
        assert "Back to the entries" not in body, path
    assert posted[0] == 403  # refused before Redis is asked
    assert not [record for record in server_log(caplog) if record.exc_info]
    assert "Traceback" not in caplog.text


def test_with_redis_down_every_api_route_is_a_503_with_a_json_error(
    down_api: Periodiq, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), served(down_api) as base:
        answers = {path: get(base + path) for path in APIS}
        write = urllib.request.Request(
            base + "/api/actions/pause/report",
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        try:
            urllib.request.urlopen(write, timeout=30)
            written: Any = None
        except urllib.error.HTTPError as error:
            written = (error.code, json.loads(error.read()))

    for path, (status, body, headers) in answers.items():
        error = json.loads(body)
        assert status == 503, path
        assert headers["content-type"] == "application/json", path
        assert headers["retry-after"] == "5", path
        assert f"Redis at {REDACTED}" in error["error"], path
        assert "hunter22" not in body, path
    assert written is not None
    assert written[0] == 503
    assert "unreachable" in written[1]["error"]
    assert not [record for record in server_log(caplog) if record.exc_info]
    assert "Traceback" not in caplog.text
    warnings = [record for record in caplog.records if record.name == "celery_periodiq.web"]
    assert warnings, "the server says, in one line, that Redis is down"
    assert all("\n" not in record.getMessage() for record in warnings)
