"""Staged release, what a message looks like and what may happen to it between staging
and release: kombu priorities, a global key prefix, another queue, expiry counted from
the instant, a manual run meanwhile; and a change that a claim's reply may hide.

Real clock, real Redis (schedule and broker), beats as in-process Dispatchers, as in
test_staging.py: a thread pops the broker's list as messages arrive and stamps each.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.api import Periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.partitions import HORIZON_MS, received
from celery_periodiq.clock import elapsed
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_EXPIRES, HEADER_TICK, task_id_for
from tests.test_staging import Arrivals, run_beats

NAMES = [f"e-{n}" for n in range(3)]


def app_with(redis_url: str, broker_url: str, **conf: Any) -> tuple[Celery, Periodiq]:
    app = Celery("staging", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_stage_min = 1
    app.conf.periodiq_stage_horizon = 30
    app.conf.update(conf)
    return app, periodiq(app)


def burst(api: Periodiq, seconds: float = 3, **options: Any) -> int:
    """``NAMES`` due at one whole second about ``seconds`` on; its ms."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=seconds)
    api.add_many(
        {"name": name, "task": "proj.t", "every": 3600, "start_at": start, **options}
        for name in NAMES
    )
    return int(start.timestamp() * 1000)


def staged_then_released(beat: Dispatcher, arrivals: Arrivals, instant: int) -> None:
    """Run ``beat`` until it staged every entry's tick (before the instant), then until
    they arrived; check none was early, each once."""
    run_beats([beat], lambda: beat._stager.staged_count >= len(NAMES), 3)
    assert beat._stager.staged_count == len(NAMES)
    assert time.time() * 1000 < instant
    assert arrivals.got == []  # nothing in the queue before the instant
    run_beats([beat], lambda: len(arrivals.got) >= len(NAMES), 6)
    arrivals.stop()
    assert arrivals.early() == []
    assert arrivals.entries() == NAMES
    assert len(set(arrivals.ids())) == len(NAMES)


def test_a_staged_message_lands_in_the_priority_list_kombu_would_put_it_in(
    redis_url: str, broker_url: str
) -> None:
    options = {"priority_steps": list(range(10)), "queue_order_strategy": "priority"}
    app, api = app_with(redis_url, broker_url, broker_transport_options=options)
    broker = redis.Redis.from_url(broker_url, decode_responses=True)
    app.send_task("proj.t", priority=6)  # where kombu itself puts a priority 6 message
    (key,) = broker.keys("celery*")
    assert key != "celery"
    broker.delete(key)
    instant = burst(api, options={"priority": 6})
    arrivals = Arrivals(broker_url, queue=key)
    staged_then_released(Dispatcher(app, api.store, "beat-a"), arrivals, instant)
    assert broker.keys("celery*") == []  # nothing in another list
    assert {got["properties"]["priority"] for _, got in arrivals.got} == {6}


def test_with_a_global_key_prefix_everything_staged_and_released_is_under_it(
    redis_url: str, broker_url: str
) -> None:
    options = {"global_keyprefix": "tenant1:"}
    app, api = app_with(redis_url, broker_url, broker_transport_options=options)
    broker = redis.Redis.from_url(broker_url, decode_responses=True)
    instant = burst(api)
    arrivals = Arrivals(broker_url, queue="tenant1:celery")
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= len(NAMES), 3)
    staged_keys = broker.keys("*staged*")
    try:
        assert staged_keys
        prefix = "tenant1:periodiq:staging:staged:"
        assert all(key.startswith(prefix) for key in staged_keys), staged_keys
    finally:
        arrivals.stop()
    arrivals = Arrivals(broker_url, queue="tenant1:celery")
    staged_then_released(beat, arrivals, instant)
    assert [key for key in broker.keys("*") if not key.startswith("tenant1:")] == []


def test_a_tick_routed_to_another_queue_is_released_into_that_queue(
    redis_url: str, broker_url: str
) -> None:
    app, api = app_with(redis_url, broker_url)
    broker = redis.Redis.from_url(broker_url, decode_responses=True)
    instant = burst(api, options={"queue": "other"})
    arrivals = Arrivals(broker_url, queue="other")
    staged_then_released(Dispatcher(app, api.store, "beat-a"), arrivals, instant)
    assert broker.llen("celery") == 0


@pytest.mark.parametrize("expires", [30, None], ids=["expires-30s", "default"])
def test_a_staged_message_expires_as_if_sent_at_its_instant(
    redis_url: str, broker_url: str, expires: int | None
) -> None:
    given = {} if expires is None else {"expires": expires}
    app, api = app_with(redis_url, broker_url)
    # the same entries in a second schedule whose beat does not stage: sent the usual way
    usual_app, usual_api = app_with(
        redis_url, broker_url, periodiq_stage_horizon=0, periodiq_key_prefix="usual"
    )
    instant = burst(api, **given)
    assert burst(usual_api, **given) == instant
    arrivals = Arrivals(broker_url)
    beat, usual = Dispatcher(app, api.store, "beat-a"), Dispatcher(usual_app, usual_api.store, "b")
    run_beats([beat, usual], lambda: len(arrivals.got) >= 2 * len(NAMES), 8)
    arrivals.stop()

    assert beat._stager.staged_count == len(NAMES)
    assert usual._stager.staged_count == 0
    assert arrivals.early() == []
    staged = [
        got["headers"] for _, got in arrivals.got if got["headers"]["id"] in ids(api, instant)
    ]
    sent = [
        got["headers"] for _, got in arrivals.got if got["headers"]["id"] in ids(usual_api, instant)
    ]
    assert len(staged) == len(sent) == len(NAMES)
    assert {header[HEADER_TICK] for header in staged + sent} == {instant}
    # counted from the instant (the default: an interval from sending, here the instant)
    due = instant + (expires or 3600) * 1000
    assert {header[HEADER_EXPIRES] for header in staged} == {due}
    if expires is not None:  # the same as sent the usual way (and Celery's expires header)
        assert {(h[HEADER_EXPIRES], h["expires"]) for h in sent} == {(due, staged[0]["expires"])}
    else:  # sent the usual way: an interval from when it was sent, at or after the instant
        assert all(due <= header[HEADER_EXPIRES] < due + 1000 for header in sent)


def ids(api: Periodiq, instant: int) -> set[str]:
    return {task_id_for(api.store.settings.key_prefix, name, instant) for name in NAMES}


def test_a_manual_run_after_staging_leaves_the_staged_tick_and_both_are_delivered(
    redis_url: str, broker_url: str
) -> None:
    app, api = app_with(redis_url, broker_url)
    instant = burst(api)
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= len(NAMES), 3)
    manual_id = api.trigger("e-0")
    beat.touch("e-0")  # what the beat's change listener does
    run_beats([beat], lambda: len(arrivals.got) >= len(NAMES) + 1, 6)
    arrivals.stop()

    manual = [got for _, got in arrivals.got if got["headers"]["id"] == manual_id]
    ticks = [(at, got) for at, got in arrivals.got if got["headers"]["id"] != manual_id]
    assert len(manual) == 1
    assert sorted(got["headers"][HEADER_ENTRY] for _, got in ticks) == NAMES  # e-0's too
    assert {got["headers"][HEADER_TICK] for _, got in ticks} == {instant}
    assert min(at for at, _ in ticks) >= instant  # none early


def test_an_entry_added_while_a_claim_is_on_its_way_is_claimed_when_due(
    redis_url: str, broker_url: str
) -> None:
    app, api = app_with(redis_url, broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    beat.dispatch()  # nothing due anywhere: no partition has a next wake-up
    # the threads interleave: a pass sends its claim, the entry is written and its change
    # heard (the listener's touch), then the pass reads the claim's reply
    sent_at = elapsed()
    replies = api.store.scripts.claim_many(
        api.store.keys.all(), beat.beat_id, 32, 10_000, None, HORIZON_MS
    )
    api.add("late", "proj.t", every=3600, start_at=datetime.now(UTC) + timedelta(seconds=1))
    beat.touch("late")
    for got in received(replies, sent_at):
        beat._partitions.claimed(got)
    run_beats([beat], lambda: bool(api.get("late").state.get("last_enqueued")), 4)

    assert api.get("late").state.get("last_enqueued")
