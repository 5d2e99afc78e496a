"""A damaged checkpoint never raises inside the user's task: the run starts afresh.

Real Redis; another program has written garbage, or a key of another type, where
the entry's checkpoint lives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.store.checkpoint import Checkpoint


@pytest.fixture
def api(redis_url: str) -> Iterator[Periodiq]:
    app = Celery("checkpointed", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    client = periodiq(app)
    yield client
    client.store.client.close()


def test_a_checkpoint_that_is_not_json_loads_as_the_default_with_a_warning(
    api: Periodiq, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = Checkpoint(api.store, "pop3")
    api.store.client.set(api.store.keys.of("pop3").checkpoint("pop3"), "{not json")

    assert checkpoint.load(0) == 0

    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith("periodiq: checkpoint of entry 'pop3' is not JSON")


def test_a_checkpoint_key_of_another_type_loads_as_the_default_and_save_replaces_it(
    api: Periodiq, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = Checkpoint(api.store, "pop3")
    api.store.client.rpush(
        api.store.keys.of("pop3").checkpoint("pop3"), "written by something else"
    )

    assert checkpoint.load({"position": 0}) == {"position": 0}
    assert checkpoint.exists()  # something is there, and it says so
    checkpoint.save({"position": 7})

    assert checkpoint.load() == {"position": 7}
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "holds another Redis type" in line
