"""Counters tell the truth and logs can be followed: a regression test per defect.

Missed ticks used to be counted from a sample of at most 20; runs sent by
``trigger()`` never counted as enqueued; the beat logged every tick at INFO
whatever the rate, and the worker logged a tick as epoch milliseconds while the
beat logged ISO time. Real Lua on a private Redis; the beat's Dispatcher and the
worker's guard run in this process on an injected clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from celery import Celery
from celery.signals import before_task_publish

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.ledger import Ledger
from celery_periodiq.beat.scheduler import Scheduler
from celery_periodiq.config import Settings
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.plan import tick_text, to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.scripts import script_source
from celery_periodiq.store.store import Store
from tests.processes import wait_for
from tests.proxy import Proxy

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def app(redis_url: str, broker_url: str) -> Iterator[Celery]:
    app = Celery("counted", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    yield app
    periodiq(app).store.client.close()


def tenants(app: Celery, count: int) -> Periodiq:
    """``count`` entries every 60 s from START, first due at START + 60 s."""
    api = periodiq(app)
    for index in range(count):
        entry = api.add(f"tenant-{index}", "proj.t", every=60, start_at=START).entry
        assert entry is not None
        api.store.put("update", [entry], now_ms=to_ms(START))
    return api


def test_a_thousand_missed_ticks_count_as_a_thousand(app: Celery) -> None:
    api = periodiq(app)
    entry = api.add("every-second", "proj.t", every=1, start_at=START).entry
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))  # first tick at START + 1 s
    dispatcher = Dispatcher(app, api.store, "beat")

    # the beats were down: 1,001 ticks are due, catch-up "last" runs the newest
    dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=1001)))

    assert api.get("every-second").counters == {"enqueued": 1, "missed": 1000}
    missed = [event for event in api.history("every-second", limit=50) if event.kind == "missed"]
    assert len(missed) == 19  # the newest 20 due ticks, less the one that runs
    assert missed[0].fields["note"] == "981 earlier not listed"


def test_a_triggered_run_counts_as_enqueued(app: Celery) -> None:
    api = periodiq(app)
    api.add("report", "proj.t", every=60)

    api.trigger("report")
    api.trigger("report")

    assert api.get("report").counters == {"enqueued": 2}


def test_a_pass_sending_many_ticks_logs_one_summary_at_info(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    api = tenants(app, 25)
    dispatcher = Dispatcher(app, api.store, "beat")
    caplog.set_level(logging.DEBUG, logger="celery_periodiq.dispatch")

    dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=60)))

    records = [r for r in caplog.records if r.name == "celery_periodiq.dispatch"]
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    debug = [r.getMessage() for r in records if r.levelno == logging.DEBUG]
    assert info == [
        "periodiq: sent 25 ticks of 25 entries "
        "(ticks 2026-01-01T00:01:00.000Z to 2026-01-01T00:01:00.000Z)"
    ]
    assert len([line for line in debug if " sent as " in line]) == 25


def test_a_pass_sending_a_few_ticks_logs_each_at_info(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(name="proj.t", shared=False)  # known to the beat, as it imports its tasks
    def task() -> None:
        """A plain task."""

    api = periodiq(app)
    entry = api.add("report", "proj.t", every=60, start_at=START).entry
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))
    dispatcher = Dispatcher(app, api.store, "beat")
    caplog.set_level(logging.INFO, logger="celery_periodiq.dispatch")

    dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=60)))

    (line,) = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.dispatch"]
    assert line.startswith("periodiq: entry 'report' tick 2026-01-01T00:01:00.000Z sent as ")


def test_a_beat_that_does_not_know_a_task_timeboxes_its_runs_and_says_so_once(
    app: Celery, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # It cannot tell a plain task (whose runs keep the task's own limits) from a
    # PeriodicTask (whose runs are timeboxed): it timeboxes, and the log says why.
    tenants(app, 3)
    dispatcher = Dispatcher(app, periodiq(app).store, "beat")
    caplog.set_level(logging.WARNING, logger="celery_periodiq.dispatch")

    for minute in (1, 2):
        dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=minute)))

    broker = redis.Redis.from_url(broker_url)
    messages = [json.loads(raw) for raw in broker.lrange("celery", 0, -1)]
    broker.close()
    assert [message["headers"]["timelimit"] for message in messages] == [[36.0, 30.0]] * 6
    warned = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.dispatch"]
    assert warned == [
        "periodiq: task 'proj.t' is not registered in this beat's app: its entries' runs are "
        "timeboxed as a PeriodicTask's are (a plain task keeps its own time limits where the "
        "beat knows it: import its module in the beat, or set timebox=None on its entries)"
    ]


def test_the_worker_logs_a_tick_as_the_beat_does(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(base=PeriodicTask, name="proj.t")
    def task() -> None:
        """A guarded task."""

    api = periodiq(app)
    api.add("report", "proj.t", every=60)
    tick = to_ms(START + timedelta(seconds=60))
    headers = {HEADER_ENTRY: "report", HEADER_TICK: tick}
    task.apply(task_id="first", headers=headers)
    caplog.set_level(logging.WARNING, logger="celery_periodiq.task")

    task.apply(task_id="again", headers=headers)  # the same tick again: a duplicate

    (line,) = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.task"]
    assert line == (
        f"periodiq: entry 'report' tick {tick_text(tick)} run again duplicate: "
        "this tick already began"
    )
    assert tick_text(tick) == "2026-01-01T00:01:00.000Z"


def test_the_beat_warns_when_it_falls_back_to_a_default_redis_url(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    app = Celery("fallback", broker="amqp://guest@127.0.0.1:1//", set_as_current=False)
    scheduler = Scheduler(app, lazy=True)  # nothing connects
    scheduler.settings = Settings.from_app(app)
    scheduler.store = Store(scheduler.settings, client=redis_client)  # our private Redis
    caplog.set_level(logging.INFO, logger="celery_periodiq.scheduler")

    scheduler._log_settings()

    lines = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.scheduler"]
    assert lines[0] == (
        "periodiq: app 'fallback' keeps its schedule in Redis at redis://localhost:6379/0 "
        "(from a default) under prefix 'periodiq:fallback'"
    )
    assert lines[1].startswith(
        "periodiq: neither periodiq_redis_url nor a redis:// broker_url is set"
    )


def test_the_beat_warns_of_a_schedule_left_under_the_old_shared_prefix(
    redis_client: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    redis_client.hset("{periodiq}:entries", "old", json.dumps({"name": "old"}))
    app = Celery("upgraded", broker=redis_url, set_as_current=False)
    scheduler = Scheduler(app, lazy=True)
    scheduler.settings = Settings.from_app(app)
    scheduler.store = Store(scheduler.settings, client=redis_client)
    caplog.set_level(logging.WARNING, logger="celery_periodiq.scheduler")

    scheduler._log_settings()

    (line,) = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.scheduler"]
    assert "set periodiq_key_prefix = 'periodiq' to keep using it" in line


def test_a_tick_between_milliseconds_is_sent_once(app: Celery) -> None:
    # start_at with microseconds: the stored tick (whole ms) used to lead back to
    # itself, so every pass claimed and sent the same tick again.
    start = START + timedelta(microseconds=957_945)
    api = periodiq(app)
    entry = api.add("tenant", "proj.t", every=3600, start_at=start).entry
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))
    dispatcher = Dispatcher(app, api.store, "beat")
    now_ms = to_ms(start) + 100

    first = dispatcher.dispatch(now_ms=now_ms)
    second = dispatcher.dispatch(now_ms=now_ms)

    assert (first.claimed, second.claimed) == (1, 0)
    stored = api.get("tenant")
    assert stored.counters == {"enqueued": 1}
    assert stored.next_run is not None
    assert to_ms(stored.next_run) == to_ms(start) + 3_600_000


def test_settlements_are_written_after_redis_forgot_the_scripts(
    app: Celery, redis_client: redis.Redis
) -> None:
    # The beat sends a chunk's settlements without waiting (by script hash); a Redis
    # that restarted or ran SCRIPT FLUSH answers NOSCRIPT, and they must still land.
    api = tenants(app, 60)
    dispatcher = Dispatcher(app, api.store, "beat")
    redis_client.script_flush()

    first = dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=60)))
    again = dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=60)))

    assert (first.claimed, again.claimed) == (60, 0)
    for stored in api.list():
        assert stored.counters == {"enqueued": 1}
        assert stored.next_run == START + timedelta(seconds=120)
    assert redis_client.zcard(api.store.keys.part(0).inflight) == 0


def test_settlements_the_schedule_redis_refused_are_written_next_pass_and_nothing_is_resent(
    app: Celery, redis_server: LocalRedis, broker_url: str
) -> None:
    api = tenants(app, 3)
    dispatcher = Dispatcher(app, api.store, "beat")
    due = to_ms(START + timedelta(seconds=60))
    lease_ms = int(api.settings.claim_lease * 1000)

    def schedule_redis_dies_once_the_ticks_are_claimed(**_: object) -> None:
        if redis_server.running:
            redis_server.stop(kill=True)  # the messages go out; their settlements cannot

    before_task_publish.connect(schedule_redis_dies_once_the_ticks_are_claimed, weak=False)
    try:
        with contextlib.suppress(redis.RedisError):  # the pass may fail, or say it did
            dispatcher.dispatch(now_ms=due)
    finally:
        before_task_publish.disconnect(schedule_redis_dies_once_the_ticks_are_claimed)
    redis_server.start()
    dispatcher.dispatch(now_ms=due + 100)  # writes the settlements kept from the last pass
    after_the_lease = dispatcher.dispatch(now_ms=due + lease_ms + 1000)

    broker = redis.Redis.from_url(broker_url)
    sent = [json.loads(raw)["headers"]["id"] for raw in broker.lrange("celery", 0, -1)]
    broker.close()
    assert len(sent) == 3
    assert len(set(sent)) == 3  # no task id sent twice: nothing was taken over and resent
    assert after_the_lease.claimed == 0
    for stored in api.list():
        assert stored.counters == {"enqueued": 1}
        assert stored.next_run == START + timedelta(seconds=120)
    assert sum(api.store.client.zcard(part.inflight) for part in api.store.keys.all()) == 0


def test_a_settlement_written_again_after_its_reply_was_lost_is_not_said_refused(
    app: Celery, redis_server: LocalRedis, caplog: pytest.LogCaptureFixture
) -> None:
    # ack.lua ran and settled the claims, but its reply never came back: the ledger
    # writes those settlements again and finds the claims gone. That is its own first
    # call's doing, not another beat's takeover.
    with Proxy(redis_server.port) as proxy:
        app.conf.periodiq_redis_url = proxy.url
        api = tenants(app, 3)
        api.store.load_scripts()  # the lost reply is ack.lua's own, not a NOSCRIPT
        dispatcher = Dispatcher(app, api.store, "beat")
        proxy.lose_next_reply(hashlib.sha1(script_source("ack").encode()).hexdigest().encode())
        caplog.set_level(logging.INFO, logger="celery_periodiq")

        done = dispatcher.dispatch(now_ms=to_ms(START + timedelta(seconds=60)))

        assert proxy.lost.is_set()  # the reply of a call that ran was lost
        assert (done.claimed, done.complete) == (3, True)
        assert "settlements refused" not in caplog.text
        assert "another beat" not in caplog.text
        for stored in api.list():  # settled once: written twice, counted once
            assert stored.counters == {"enqueued": 1}
            assert stored.next_run == START + timedelta(seconds=120)
        assert sum(api.store.client.zcard(part.inflight) for part in api.store.keys.all()) == 0
        api.store.client.close()


def _burst_of_one_partition(api: Periodiq) -> datetime:
    """Forty hourly entries of partition 0, their first tick two seconds ahead (returned):
    a pass with periodiq_batch_size 20 claims 20 of them, in one chunk, and is full."""
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    names = (f"burst-{index}" for index in range(10_000))
    for name in itertools.islice((n for n in names if api.store.keys.of(n).index == 0), 40):
        api.add(name, "proj.t", every=3600, start_at=first)
    api.store.load_scripts()
    return first


def test_a_burst_pass_leaves_its_settlements_to_the_next_pass_and_one_that_failed_is_kept(
    app: Celery, redis_server: LocalRedis, broker_url: str
) -> None:
    # In a burst (a pass full, more due at once) a pass does not wait for its last
    # chunk's settlements: the next pass's first send does. Here they never reach
    # Redis (held on the way, then the connection is cut): they are written by a later
    # pass, and no claim is left in flight to be taken over and sent again.
    app.conf.periodiq_batch_size = 20
    with Proxy(redis_server.port) as proxy:
        app.conf.periodiq_redis_url = proxy.url
        api = periodiq(app)
        first = _burst_of_one_partition(api)
        dispatcher = Dispatcher(app, api.store, "beat")
        wait_for(lambda: datetime.now(UTC) > first, 10, "the ticks to be due")
        proxy.hold_next(hashlib.sha1(script_source("ack").encode()).hexdigest().encode(), 5)

        full = dispatcher.dispatch()
        wait_for(proxy.holding.is_set, 5, "the first pass's settlements on their way")
        proxy.cut()  # they never arrive
        passes = [full]
        deadline = time.monotonic() + 30
        while passes[-1].claimed or passes[-1].full:
            assert time.monotonic() < deadline, passes
            with contextlib.suppress(redis.ConnectionError):  # the cut, seen once
                passes.append(dispatcher.dispatch())

        broker = redis.Redis.from_url(broker_url)
        sent = [json.loads(raw)["headers"]["id"] for raw in broker.lrange("celery", 0, -1)]
        broker.close()
        assert (full.claimed, full.full) == (20, True)
        assert sum(done.claimed for done in passes) == 40
        assert len(sent) == len(set(sent)) == 40
        for stored in api.list():
            assert stored.counters == {"enqueued": 1}
            assert stored.next_run == first + timedelta(seconds=3600)
        assert sum(api.store.client.zcard(part.inflight) for part in api.store.keys.all()) == 0
        api.store.client.close()


def test_a_burst_pass_whose_settlements_arrive_after_a_takeover_has_them_refused(
    app: Celery, redis_server: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The worst case of leaving a full pass's settlements to the next pass: they are
    # held on the way past the claims' lease (a beat frozen, a slow network), another
    # beat takes the claims over and sends those ticks again with the same task ids,
    # and the late settlements are refused: nothing is counted twice or left in flight.
    app.conf.periodiq_batch_size = 20
    app.conf.periodiq_claim_lease = 1
    caplog.set_level(logging.INFO, logger="celery_periodiq")
    with Proxy(redis_server.port) as proxy:
        other = Celery("counted", broker=broker_url, set_as_current=False)
        other.conf.update(app.conf.table(with_defaults=False))
        app.conf.periodiq_redis_url = proxy.url
        api = periodiq(app)
        first = _burst_of_one_partition(api)
        held = Dispatcher(app, api.store, "beat-a")
        wait_for(lambda: datetime.now(UTC) > first, 10, "the ticks to be due")
        proxy.hold_next(hashlib.sha1(script_source("ack").encode()).hexdigest().encode(), 2.5)

        full = held.dispatch()
        wait_for(proxy.holding.is_set, 5, "the first pass's settlements on their way")
        past_lease = time.monotonic() + 1.3
        wait_for(lambda: time.monotonic() > past_lease, 5, "the claims' lease to run out")
        taker = Dispatcher(other, periodiq(other).store, "beat-b")
        passes = [taker.dispatch()]
        while passes[-1].claimed or passes[-1].full:
            passes.append(taker.dispatch())
        held.dispatch()  # reads the late reply

        broker = redis.Redis.from_url(broker_url)
        sent = [json.loads(raw)["headers"]["id"] for raw in broker.lrange("celery", 0, -1)]
        broker.close()
        assert (full.claimed, full.full) == (20, True)
        assert sum(done.claimed for done in passes) == 40  # 20 taken over, 20 due
        assert (len(sent), len(set(sent))) == (60, 40)  # a copy of 20: the same task ids
        assert "20 settlements refused" in caplog.text
        for stored in api.list():
            assert stored.counters == {"enqueued": 1}
            assert stored.next_run == first + timedelta(seconds=3600)
        assert sum(api.store.client.zcard(part.inflight) for part in api.store.keys.all()) == 0
        api.store.client.close()
        periodiq(other).store.client.close()


@pytest.mark.parametrize("other", ["holds it", "settled it"])
def test_a_settlement_of_a_claim_another_beat_took_over_is_said_refused(
    app: Celery, caplog: pytest.LogCaptureFixture, other: str
) -> None:
    api = tenants(app, 1)
    due = to_ms(START + timedelta(seconds=60))
    lease_ms = int(api.settings.claim_lease * 1000)
    part = api.store.keys.of("tenant-0")
    [batch] = api.store.scripts.claim_many([part], "stopped-beat", 10, lease_ms, now_ms=due)
    [claim] = batch.claims
    # its lease ran out without a heartbeat: another beat takes the claim over
    after = due + lease_ms + 1
    if other == "holds it":
        api.store.scripts.claim_many([part], "other-beat", 10, lease_ms, now_ms=after)
    else:
        Dispatcher(app, api.store, "other-beat").dispatch(now_ms=after)
    ledger = Ledger(api.store, "stopped-beat")
    caplog.set_level(logging.INFO, logger="celery_periodiq")

    ledger.send({part.index: [Settlement(claim.id, claim.name, claim.version)]})
    ledger.wait()

    assert "1 settlements refused: another beat took their claims over" in caplog.text
    assert ledger.refused == 1
