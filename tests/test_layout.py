"""The schedule's layout record: another number of partitions is refused with a clear
error; a record a beat is still writing (layout, no partitions yet) is not an error."""

from __future__ import annotations

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.protocol.keys import LAYOUT


def api_with(redis_url: str, partitions: int) -> Periodiq:
    app = Celery("layout", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_partitions = partitions
    return periodiq(app)


def test_another_number_of_partitions_is_refused_and_nothing_is_written(
    redis_url: str, redis_client: redis.Redis
) -> None:
    api_with(redis_url, 16).add("first", "proj.t", every=60)
    before = sorted(redis_client.keys("*"))
    other = api_with(redis_url, 8)

    with pytest.raises(ConfigurationError) as caught:
        other.add("second", "proj.t", every=60)

    assert "periodiq_partitions=8" in str(caught.value)
    assert "stored in 16 partitions" in str(caught.value)
    assert sorted(redis_client.keys("*")) == before


def test_a_layout_record_being_written_is_not_an_error(
    redis_url: str, redis_client: redis.Redis
) -> None:
    api = api_with(redis_url, 16)
    redis_client.hset("{periodiq:layout}:meta", "layout", LAYOUT)  # a beat between its writes

    api.add("first", "proj.t", every=60)

    assert api.count() == 1
