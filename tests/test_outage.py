"""What a beat knows after it lost Redis or was frozen: how long Redis has answered
again (before a lease has passed, the beats it sees live are not all that live), and
whether its own heartbeat lapsed (other beats took it for gone meanwhile)."""

from __future__ import annotations

import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.heartbeat import Heartbeat
from celery_periodiq.beat.outage import Outage
from celery_periodiq.store.store import Store
from tests.processes import wait_for


def test_redis_has_answered_from_its_first_answer_and_again_from_when_it_is_back() -> None:
    outage = Outage()
    before = outage.redis_answered_for()  # a beat that starts has seen no answer yet
    outage.answered()
    first = outage.redis_answered_for()

    outage.failed("a beat pass", redis.ConnectionError("refused"))
    outage.failed("the heartbeat", redis.ConnectionError("refused"))
    failing = outage.redis_answered_for()
    outage.answered()  # the pass's first command after it failed
    answered = outage.redis_answered_for()
    outage.failed("the heartbeat", redis.TimeoutError("timed out"))
    failed_again = outage.redis_answered_for()
    outage.worked("the heartbeat")
    outage.worked("a beat pass")

    assert before == 0.0
    assert 0.0 < first < 1.0
    assert failing == 0.0
    assert 0.0 < answered < 1.0
    assert failed_again == 0.0
    assert 0.0 < outage.redis_answered_for() < 1.0


def test_an_outage_of_something_else_leaves_redis_trusted() -> None:
    outage = Outage()
    outage.answered()
    answered = outage.redis_answered_for()
    outage.failed("a beat pass", RuntimeError("the broker"))
    during = outage.redis_answered_for()
    outage.worked("a beat pass")

    assert during >= answered > 0.0
    assert outage.redis_answered_for() >= during


def test_a_heartbeat_refreshed_after_it_ran_out_counts_a_lapse(redis_url: str) -> None:
    app = Celery("lapses", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    store: Store = periodiq(app).store
    heartbeat = Heartbeat(store, "frozen-beat", lease=0.5, info=lambda: {"host": "h"})

    heartbeat.beat_once("start")
    heartbeat.beat_once()  # within the lease: no lapse
    held = heartbeat.lapses
    wait_for(lambda: "frozen-beat" not in {beat.id for beat in store.beats()}, 10,
             "the heartbeat to run out")  # fmt: skip # as if the beat were frozen
    heartbeat.beat_once()
    store.client.close()

    assert held == 0
    assert heartbeat.lapses == 1
