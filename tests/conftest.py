"""Shared fixtures: private redis-server processes on free loopback ports."""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from hypothesis import HealthCheck, settings

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.localredis import LocalRedis
from tests.processes import api_for, close_opened

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _close_apis() -> Iterator[None]:
    """Close the Redis clients of the APIs the test made with ``tests.processes.api_for``."""
    yield
    close_opened()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[LocalRedis]:
    """A private redis-server for this test; ``stop()``/``restart()`` it at will."""
    with LocalRedis(tmp_path / "redis", persist=True) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: LocalRedis) -> str:
    """The URL of this test's private Redis."""
    return redis_server.url


@pytest.fixture
def redis_client(redis_server: LocalRedis) -> Iterator[redis.Redis]:
    """A client of this test's private Redis."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def app(redis_url: str) -> Celery:
    """An app whose schedule is in the test's Redis, its broker in memory (no worker);
    closed after the test (:func:`_close_apis`)."""
    return api_for(redis_url, "memory://", "periodiq-tests").app


@pytest.fixture
def api(app: Celery) -> Periodiq:
    """The runtime API of :func:`app`."""
    return periodiq(app)


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    """A second private Redis, used as the Celery broker so the schedule's Redis can fail alone."""
    with LocalRedis(tmp_path / "broker") as server:
        yield server.url


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Collect what the tests left in reference cycles, and say which sockets were left
    open, before pytest's own last collection: there, an unclosed socket fails the whole
    run after every test passed (a client left open by a test near the end, found by no
    collection before), and says nothing of where it came from."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):
            gc.collect()
    left = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    if left:
        print(f"\n{len(left)} resources left open by the tests, closed at the end:")
        for message in left[:20]:
            print(f"  {message}")
