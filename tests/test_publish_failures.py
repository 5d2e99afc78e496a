"""A message that fails at publish time costs its entry alone; only the broker stalls all.

What gets past the checks at the door (tests/test_options.py) can still fail when
the beat publishes: a definition written into Redis by something else, a
serializer uninstalled since the entry was added, an encoder that refuses the
arguments. Such a failure is the message's own: its entry is quarantined with the
reason, and every other tick of the pass goes out in it. Only the broker's own
connection or channel failing keeps claimed ticks in flight, and only that is
logged as "broker unreachable"; a failure of the schedule's Redis is named as such.

Each test runs the beat's Dispatcher (or a whole in-process Scheduler) on the real
Lua scripts against private Redis servers, on an injected clock; a Redis broker
covers both of the Publisher's paths (kombu's publish, and messages put straight
into the queue list), RabbitMQ (if one runs on 127.0.0.1:5672) kombu's AMQP path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery, signals
from kombu import Connection, Exchange, Queue
from kombu.serialization import register, unregister

from celery_periodiq import Periodiq, Scheduler, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.plan import to_ms
from tests.processes import wait_for

# a minute before each test: the messages expire as they would (RabbitMQ drops one
# already expired, so these are set anew for each test, not once at import)
START = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
FIRST = START + timedelta(seconds=60)  # the first tick of an every=60 entry anchored at START


@pytest.fixture(autouse=True)
def _instants_of_this_test() -> None:
    global START, FIRST
    START = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    FIRST = START + timedelta(seconds=60)


TASK = "proj.tasks.poll"
HEALTHY = [f"healthy-{n}" for n in range(6)]
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"


class Beat:
    """Healthy entries and a victim due at FIRST, a beat's dispatcher, and the broker."""

    def __init__(self, redis_url: str, broker_url: str, lease: float = 10, **options: Any) -> None:
        self.app = Celery("failures", broker=broker_url, set_as_current=False)
        self.app.conf.periodiq_redis_url = redis_url
        self.app.conf.periodiq_claim_lease = lease
        self.api: Periodiq = periodiq(self.app)
        self.store = self.api.store
        self.client = self.store.client
        self.dispatcher = Dispatcher(self.app, self.store, "test-beat")
        # the victim among the healthy entries: its message is neither first nor last
        for name in [*HEALTHY[:3], "victim", *HEALTHY[3:]]:
            stored = self.api.add(name, TASK, every=60, start_at=START, **options)
            # as if added before START: all are due at FIRST
            self.store.put("update", [stored.entry], now_ms=to_ms(START))  # type: ignore[list-item]

    def rewrite(self, name: str, **changes: Any) -> None:
        """Change a stored definition behind periodiq's back, as another program could."""
        part = self.store.keys.of(name)
        definition = json.loads(self.client.hget(part.entries, name))
        definition.update(changes)
        self.client.hset(part.entries, name, json.dumps(definition))

    def close(self) -> None:
        self.client.close()
        self.app.close()


class RedisBroker:
    """What the beat put in a private Redis broker's queue lists."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)

    def take(self, queue: str = "celery") -> list[str]:
        """The entries of the messages in ``queue``, sorted; the list is emptied."""
        sent = [json.loads(raw) for raw in self.client.lrange(queue, 0, -1)]
        self.client.delete(queue)
        return sorted(message["headers"]["periodiq_entry"] for message in sent)


@pytest.fixture
def broker(broker_url: str) -> Iterator[RedisBroker]:
    reader = RedisBroker(broker_url)
    yield reader
    reader.client.close()


@pytest.fixture
def beat(redis_url: str, broker_url: str) -> Iterator[Beat]:
    world = Beat(redis_url, broker_url)
    yield world
    world.close()


def _picky_encode(value: Any) -> str:
    text = json.dumps(value)
    if "boom" in text:
        raise ValueError("picky cannot encode 'boom'")
    return text


@pytest.fixture
def picky() -> Iterator[str]:
    """A serializer the app registers, as a project's module would: it refuses 'boom'."""
    register("picky", _picky_encode, json.loads, "application/x-picky", "utf-8")
    yield "picky"
    unregister("picky")


def quarantined(api: Periodiq) -> dict[str, str]:
    return {s.name: s.invalid or "" for s in api.list() if s.status == "quarantined"}


def logged(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= level)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"options": {"serializer": "nosuch"}}, "No encoder installed for nosuch"),
        ({"options": {"compression": "nosuch"}}, "nosuch"),
    ],
    ids=["serializer", "compression"],
)
def test_an_option_written_behind_periodiqs_back_quarantines_its_entry_and_the_others_go_out(
    beat: Beat,
    broker: RedisBroker,
    caplog: pytest.LogCaptureFixture,
    changes: dict[str, Any],
    reason: str,
) -> None:
    beat.rewrite("victim", **changes)
    caplog.set_level(logging.INFO, logger="celery_periodiq")

    done = beat.dispatcher.dispatch(now_ms=to_ms(FIRST))

    assert broker.take() == HEALTHY  # all in this pass, the victim's neighbours too
    assert (done.claimed, done.complete) == (7, True)
    assert list(quarantined(beat.api)) == ["victim"]
    assert reason in quarantined(beat.api)["victim"]
    assert "could not be published" in quarantined(beat.api)["victim"]
    assert "broker unreachable" not in logged(caplog)
    assert "entry 'victim' quarantined" in logged(caplog, logging.ERROR)
    for name in HEALTHY:
        assert beat.api.get(name).next_run == FIRST + timedelta(seconds=60)
    # and it stays out: the next pass sends the others only; update repairs it
    beat.dispatcher.dispatch(now_ms=to_ms(FIRST + timedelta(seconds=60)))
    assert broker.take() == HEALTHY
    beat.api.update("victim", options={})
    assert beat.api.get("victim").status == "active"


def test_a_serializer_uninstalled_since_the_entry_was_added_quarantines_it_alone(
    redis_url: str, broker_url: str, broker: RedisBroker, caplog: pytest.LogCaptureFixture
) -> None:
    register("short-lived", json.dumps, json.loads, "application/x-short-lived", "utf-8")
    try:
        world = Beat(redis_url, broker_url)
        world.api.update("victim", options={"serializer": "short-lived"})
        world.store.put("update", [world.api.get("victim").entry], now_ms=to_ms(START))  # type: ignore[list-item]
    finally:
        unregister("short-lived")
    caplog.set_level(logging.INFO, logger="celery_periodiq")
    try:
        world.dispatcher.dispatch(now_ms=to_ms(FIRST))

        assert broker.take() == HEALTHY
        assert "No encoder installed for short-lived" in quarantined(world.api)["victim"]
        assert "broker unreachable" not in logged(caplog)
    finally:
        world.close()


def test_arguments_an_encoder_refuses_quarantine_their_entry_on_the_direct_redis_path(
    redis_url: str, broker_url: str, broker: RedisBroker, picky: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    # All entries share one kind of message: after the first pass the Publisher puts
    # each straight into the queue list from a template, buffered until the chunk is
    # flushed. The victim's arguments, changed behind periodiq's back, make its encoder
    # fail there, between messages already buffered and messages still to come.
    world = Beat(redis_url, broker_url, args=[1], options={"serializer": picky})
    try:
        world.dispatcher.dispatch(now_ms=to_ms(FIRST))
        assert broker.take() == sorted([*HEALTHY, "victim"])
        templates = list(world.dispatcher._publisher._templates.values())
        assert templates
        assert all(t is not None and t.raw is not None for t in templates)
        world.rewrite("victim", args=["boom"])
        caplog.set_level(logging.INFO, logger="celery_periodiq")

        done = world.dispatcher.dispatch(now_ms=to_ms(FIRST + timedelta(seconds=60)))

        assert broker.take() == HEALTHY
        assert done.complete
        assert "picky cannot encode 'boom'" in quarantined(world.api)["victim"]
        assert "broker unreachable" not in logged(caplog)
    finally:
        world.close()


def test_at_reboot_an_entry_whose_message_fails_is_skipped_and_the_others_are_sent(
    beat: Beat, broker: RedisBroker, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("reboot-a", "reboot-bad", "reboot-z"):
        beat.api.add(name, TASK, cron="@reboot")
    beat.rewrite("reboot-bad", options={"serializer": "nosuch"})
    caplog.set_level(logging.INFO, logger="celery_periodiq")
    done: set[str] = set()

    fired = beat.dispatcher.fire_events("reboot", done)

    assert sorted(fired) == ["reboot-a", "reboot-z"]
    assert broker.take() == ["reboot-a", "reboot-z"]
    assert done == {"reboot-a", "reboot-z"}  # what was sent
    errors = logged(caplog, logging.ERROR)
    assert "entry 'reboot-bad' not sent on @reboot" in errors
    assert "No encoder installed for nosuch" in errors
    assert "broker unreachable" not in logged(caplog)


def test_a_broker_outage_keeps_the_ticks_in_flight_and_says_broker_unreachable_once(
    redis_url: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalRedis(tmp_path / "down-broker") as server:
        # a short lease: a tick taken back after it is still on time (not folded)
        world = Beat(redis_url, server.url, lease=2)
        reader = RedisBroker(server.url)
        lease = int(world.store.settings.claim_lease * 1000)
        try:
            server.stop(kill=True)
            caplog.set_level(logging.INFO, logger="celery_periodiq")

            first = world.dispatcher.dispatch(now_ms=to_ms(FIRST))
            in_flight = world.dispatcher.dispatch(now_ms=to_ms(FIRST) + 100)
            # after the lease the claims are taken back, and the broker is still down
            retaken = world.dispatcher.dispatch(now_ms=to_ms(FIRST) + lease + 1)
            server.start()
            back = world.dispatcher.dispatch(now_ms=to_ms(FIRST) + 2 * lease + 2)

            assert (first.claimed, first.complete) == (7, False)
            assert in_flight.claimed == 0  # not settled: nobody else may take them yet
            assert (retaken.claimed, retaken.complete) == (7, False)
            assert (back.claimed, back.complete) == (7, True)
            assert reader.take() == sorted([*HEALTHY, "victim"])
            assert quarantined(world.api) == {}
            assert logged(caplog).count("broker unreachable") == 1
            assert "broker reachable again" in logged(caplog)
        finally:
            reader.client.close()
            world.close()


def test_a_failure_of_the_schedules_redis_while_publishing_is_named_so_not_as_the_broker(
    redis_server: LocalRedis, broker_url: str, broker: RedisBroker,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    # The schedule's Redis goes away while a chunk is published: the messages reach the
    # broker, then the settlements cannot be written. Before, that failure of an ack
    # (a Redis error, as a Redis broker's are) was logged as "broker unreachable".
    app = Celery("schedule-down", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_server.url
    api = periodiq(app)
    api.add("steady", TASK, every=1)
    scheduler = Scheduler(app)
    scheduler.tick()  # registered and reconciled: the next pass publishes "steady"

    def cut(**_: Any) -> None:
        if redis_server.running:
            redis_server.stop(kill=True)

    signals.before_task_publish.connect(cut, weak=False)
    caplog.set_level(logging.INFO, logger="celery_periodiq")
    try:
        sent: list[str] = []
        for _ in range(40):  # one tick a second: within a few passes it is due
            scheduler.tick()
            sent += broker.take()
            if not redis_server.running:
                break
    finally:
        signals.before_task_publish.disconnect(cut)
        redis_server.start()
        scheduler.close()
        api.store.client.close()

    assert "steady" in sent
    errors = logged(caplog, logging.ERROR)
    assert "the schedule's Redis unreachable" in errors
    assert "broker unreachable" not in logged(caplog)


def _rabbitmq() -> Connection:
    connection = Connection(RABBITMQ, connect_timeout=2)
    try:
        connection.ensure_connection(max_retries=1)
    except Exception as error:
        connection.release()
        reason = f"RabbitMQ is not reachable at 127.0.0.1:5672 ({error})"
        print(reason)
        pytest.skip(reason)
    return connection


def arrived(channel: Any, queue: str, got: list[tuple[str, int]], count: int) -> Callable[[], bool]:
    """A condition: the messages taken from RabbitMQ's ``queue`` so far (entry and tick of
    each appended to ``got``) number ``count`` at least."""

    def enough() -> bool:
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            got.append((message.headers["periodiq_entry"], message.headers["periodiq_tick"]))
        return len(got) >= count

    return enough


def test_on_rabbitmq_a_message_that_fails_quarantines_its_entry_and_the_others_go_out(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # kombu's AMQP transport publishes each message at once (no batch): the message
    # fails inside producer.publish, before anything reaches the broker. A queue of the
    # test's own on the shared server keeps other runs' messages apart.
    connection = _rabbitmq()
    queue = f"periodiq-test-{uuid.uuid4().hex}"
    world = Beat(redis_url, RABBITMQ, options={"queue": queue})
    try:
        world.rewrite("victim", options={"queue": queue, "serializer": "nosuch"})
        caplog.set_level(logging.INFO, logger="celery_periodiq")

        done = world.dispatcher.dispatch(now_ms=to_ms(FIRST))

        got: list[tuple[str, int]] = []
        # published without confirms: RabbitMQ routes them a moment later
        wait_for(arrived(connection.default_channel, queue, got, len(HEALTHY)), 10,
                 "the healthy messages in the queue")  # fmt: skip
        assert sorted(name for name, _ in got) == HEALTHY
        assert done.complete
        assert "No encoder installed for nosuch" in quarantined(world.api)["victim"]
        assert "broker unreachable" not in logged(caplog)
    finally:
        with connection.channel() as cleanup:
            cleanup.queue_delete(queue)
        connection.release()
        world.close()


def test_on_rabbitmq_an_exchange_that_does_not_exist_quarantines_its_entry_alone(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # RabbitMQ answers a publish to a missing exchange by closing the channel (404
    # NOT_FOUND), asynchronously: the publish itself returns, and whatever the beat
    # publishes on that channel afterwards is dropped by the broker until it notices.
    connection = _rabbitmq()
    queue = f"periodiq-test-{uuid.uuid4().hex}"
    missing = f"periodiq-missing-{uuid.uuid4().hex}"
    world = Beat(redis_url, RABBITMQ, options={"queue": queue})
    try:
        world.rewrite("victim", options={"exchange": missing, "routing_key": queue})
        caplog.set_level(logging.INFO, logger="celery_periodiq")

        done = world.dispatcher.dispatch(now_ms=to_ms(FIRST))

        got: list[tuple[str, int]] = []
        wait_for(arrived(connection.default_channel, queue, got, len(HEALTHY)), 10,
                 "the healthy messages in the queue")  # fmt: skip
        assert sorted(name for name, _ in got) == HEALTHY  # its neighbours in the same pass
        assert done.complete
        reason = quarantined(world.api)["victim"]
        assert "could not be published" in reason
        assert missing in reason
        assert "broker unreachable" not in logged(caplog)
        assert "broker refused" not in logged(caplog)
        for name in HEALTHY:
            assert world.api.get(name).next_run == FIRST + timedelta(seconds=60)
    finally:
        with connection.channel() as cleanup:
            cleanup.queue_delete(queue)
        connection.release()
        world.close()


def test_on_rabbitmq_an_exchange_deleted_while_the_beat_runs_costs_its_chunk_a_lease_only(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The victim's exchange exists, then goes: the broker closes the channel at the
    # victim's next message. That chunk stays in flight; after the lease, the lookup on
    # a new channel finds the exchange missing: the victim alone is quarantined.
    connection = _rabbitmq()
    queue = f"periodiq-test-{uuid.uuid4().hex}"
    doomed = f"periodiq-doomed-{uuid.uuid4().hex}"
    world = Beat(redis_url, RABBITMQ, lease=2, options={"queue": queue})
    cut_off: list[str] = []  # what the beat would be cut off from its broker for
    world.dispatcher = Dispatcher(world.app, world.store, "test-beat", on_cut_off=cut_off.append)
    channel = connection.default_channel
    try:
        Exchange(doomed, "direct", channel=channel).declare()
        Queue(queue, Exchange(queue), queue, channel=channel).declare()
        channel.queue_bind(queue, doomed, routing_key=queue)
        world.rewrite("victim", options={"exchange": doomed, "routing_key": queue})
        got: list[tuple[str, int]] = []
        world.dispatcher.dispatch(now_ms=to_ms(FIRST))
        wait_for(arrived(channel, queue, got, len(HEALTHY) + 1), 10,
                 "the first ticks, the victim's too")  # fmt: skip
        channel.exchange_delete(doomed)
        caplog.set_level(logging.INFO, logger="celery_periodiq")
        second = to_ms(FIRST + timedelta(seconds=60))

        refused = world.dispatcher.dispatch(now_ms=second)
        after_the_lease = world.dispatcher.dispatch(now_ms=second + 2100)

        wait_for(arrived(channel, queue, got, 2 * len(HEALTHY) + 1), 10,
                 "the healthy ticks of the second pass")  # fmt: skip
        assert not refused.complete  # that chunk stayed in flight
        assert cut_off == []  # a channel refused is not a broker out of reach
        assert after_the_lease.complete
        assert {name for name, tick in got if tick == second} == set(HEALTHY)
        assert "the broker has no exchange" in quarantined(world.api)["victim"]
        assert list(quarantined(world.api)) == ["victim"]
        for name in HEALTHY:
            assert world.api.get(name).counters == {"enqueued": 2}
    finally:
        with connection.channel() as cleanup:
            cleanup.queue_delete(queue)
            with contextlib.suppress(Exception):
                cleanup.exchange_delete(doomed)
        connection.release()
        world.close()
