"""The dashboard as a real HTTP server (uvicorn on a free port) against a real Redis.

A slow request never delays another: Redis is reached through a proxy that holds the
one command of the slow request for seconds, and a page asked meanwhile answers at
once (the handlers' Redis calls run in a thread pool, never on the event loop).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
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
