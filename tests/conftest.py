"""Shared fixtures: private redis-server processes on free loopback ports."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, settings

from celery_periodiq.localredis import LocalRedis

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


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
def broker_url(tmp_path: Path) -> Iterator[str]:
    """A second private Redis, used as the Celery broker so the schedule's Redis can fail alone."""
    with LocalRedis(tmp_path / "broker") as server:
        yield server.url
