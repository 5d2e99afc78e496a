"""The beat's Publisher sends what ``app.send_task`` would, byte for byte.

Each case publishes the same ticks twice to a private Redis broker: once through
Celery's own ``send_task`` (``publish.send``), once through the Publisher, which
builds its first message of a kind with ``send_task`` and every later one from
that template, put straight into the broker's list (redis_publish.py). Both are
read back and decoded with kombu; every header,
every property but the per-message delivery tag and the decoded body must be equal.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery, signals
from kombu import Connection, Queue
from kombu.common import Broadcast
from kombu.utils.json import dumps

from celery_periodiq.beat import redis_publish
from celery_periodiq.beat.publish import Publisher, send
from celery_periodiq.beat.redis_publish import NotStagedError
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import Tick, plan_tick, to_ms

START = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)


@pytest.fixture
def app(broker_url: str) -> Celery:
    app = Celery("published", broker=broker_url, set_as_current=False)
    app.conf.task_queues = [Queue("celery"), Queue("reports"), Queue("routed")]
    app.conf.task_routes = {"proj.routed": {"queue": "routed"}}

    @app.task(name="proj.registered", queue="reports", priority=3, ignore_result=True, shared=False)
    def registered() -> None:  # pragma: no cover - never runs
        pass

    return app


def ticks_of(entry: Entry, count: int = 1) -> list[Tick]:
    """The newest ``count`` ticks a beat would publish for ``entry`` with catch-up "all",
    claimed now."""
    plan = plan_tick(
        entry.evolve(catchup="all"), START, START + timedelta(minutes=5), running=False,
        queued=False, prefix="periodiq:test", catchup_cap=100, default_grace=10.0,
    )  # fmt: skip
    assert plan.publish
    return plan.publish[-count:]


def messages(app: Celery, broker_url: str) -> dict[str, list[dict[str, Any]]]:
    """Every message in the broker, per queue, decoded by kombu; the lists are emptied."""
    client = redis.Redis.from_url(broker_url)
    found: dict[str, list[dict[str, Any]]] = {}
    with Connection(broker_url) as connection:
        channel = connection.default_channel
        # every list: kombu keeps a queue's messages of priority p in "<queue>\x06\x16<p>"
        lists = [key for key in client.scan_iter() if client.type(key) == b"list"]
        for queue in sorted(key.decode() for key in lists):
            raw = client.lrange(queue, 0, -1)
            client.delete(queue)
            for payload in reversed(raw):  # LPUSH: the oldest is last
                # written as kombu writes it, byte for byte (order, spacing, escapes)
                assert dumps(json.loads(payload)) == payload.decode()
                message = channel.Message(json.loads(payload), channel=channel)
                properties = dict(message.properties)
                found.setdefault(queue, []).append(
                    {
                        "delivery_tag": properties.pop("delivery_tag"),
                        "headers": message.headers,
                        "properties": properties,
                        "content_type": message.content_type,
                        "content_encoding": message.content_encoding,
                        "body": message.decode(),
                    }
                )
    client.close()
    return found


def assert_same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    expected, got = json.loads(json.dumps(expected)), json.loads(json.dumps(got))
    del expected["delivery_tag"], got["delivery_tag"]  # a new uuid4 per message
    assert got == expected


ENTRIES = {
    "plain": [build_entry("plain", "proj.noop", every=60)],
    "arguments": [
        build_entry("tenant-1", "proj.poll", every=60, args=[1, "a"], kwargs={"box": "x"}),
        build_entry("tenant-2", "proj.poll", every=60, args=[2, "<b>"], kwargs={"box": "y"}),
        build_entry("tenant-3", "proj.poll", every=60),
    ],
    "options": [
        build_entry("opts", "proj.noop", every=60, options={"queue": "reports", "priority": 7}),
        build_entry("opts-2", "proj.noop", every=60, options={"queue": "reports", "priority": 7}),
    ],
    "registered task": [
        build_entry("reg-1", "proj.registered", every=60),
        build_entry("reg-2", "proj.registered", every=30, args=[5]),
    ],
    "routed": [build_entry("routed", "proj.routed", every=60, kwargs={"k": [1, 2]})],
    "no limits, no expiry": [
        build_entry("bare", "proj.noop", every=60, timebox=None, expires=None),
        build_entry("bare-2", "proj.noop", every=60, timebox=None, expires=None),
    ],
    "cron": [
        build_entry("cron-1", "proj.noop", cron="*/5 * * * * *", catchup="all"),
        build_entry("cron-2", "proj.noop", cron="0 9,17 * * *"),
    ],
}


@pytest.mark.parametrize("case", ENTRIES)
def test_the_publisher_sends_what_send_task_sends(app: Celery, broker_url: str, case: str) -> None:
    compare(app, broker_url, ENTRIES[case])


def test_with_a_global_key_prefix_the_publisher_sends_what_send_task_sends(
    app: Celery, broker_url: str
) -> None:
    app.conf.broker_transport_options = {"global_keyprefix": "tenant-a:"}

    lists = compare(app, broker_url, ENTRIES["options"] + ENTRIES["arguments"])

    assert len(lists) == 2
    assert all(key.startswith("tenant-a:") for key in lists)


def compare(app: Celery, broker_url: str, entries: list[Entry]) -> list[str]:
    """Publish ``entries``' ticks both ways and check the messages are the same; returns
    the lists they went to."""
    work = [(entry, tick) for entry in entries for tick in ticks_of(entry, 3)]
    publisher = Publisher(app)

    with app.producer_or_acquire() as producer:
        for entry, tick in work:
            send(app, entry, tick, producer)
    expected = messages(app, broker_url)
    with app.producer_or_acquire() as producer, publisher.batch(producer) as flush:
        for position, (entry, tick) in enumerate(work):
            publisher.send(entry, tick, producer)
            if position % 2:
                flush()
    got = messages(app, broker_url)

    assert sorted(got) == sorted(expected)
    tags = [message["delivery_tag"] for sent in got.values() for message in sent]
    assert len(set(tags)) == len(tags) == len(work)
    assert all(isinstance(tag, str) and len(tag) == 36 for tag in tags)
    for queue, sent in expected.items():
        assert len(got[queue]) == len(sent)
        for want, have in zip(sent, got[queue], strict=True):
            assert_same(want, have)
    assert len(work) > len(publisher._templates)  # some were filled in from a template
    # and put straight into the broker's list (kombu rebuilt exactly: see redis_publish)
    assert all(t is not None and t.raw is not None for t in publisher._templates.values())
    return sorted(got)


def test_a_ticks_message_gives_celery_no_expiry_and_the_broker_a_ttl_on_the_redis_clock(
    app: Celery, broker_url: str
) -> None:
    # Celery judges its `expires` on the worker's clock, and a TTL counted from the beat's
    # clock depends on that one: the worker's guard judges the expiry (periodiq_expires,
    # on the Redis clock), and the broker holds the message for as long as the tick may
    # wait from when it is sent (on the Redis clock too), plus a margin.
    entry = build_entry("ttl", "proj.noop", every=60)
    (tick,) = ticks_of(entry)
    assert tick.expires is not None
    sent_at_ms = to_ms(tick.nominal) + 5_000
    publisher = Publisher(app)

    with app.producer_or_acquire() as producer, publisher.batch(producer):
        publisher.send(entry, tick, producer, sent_at_ms)  # send_task builds it
        publisher.send(entry, tick, producer, sent_at_ms)  # from its template

    sent = messages(app, broker_url)["celery"]
    waits = max(to_ms(tick.expires) - sent_at_ms, 0)  # a tick sent past its expiry: 0
    assert [message["headers"]["expires"] for message in sent] == [None, None]
    assert [message["headers"]["periodiq_expires"] for message in sent] == [to_ms(tick.expires)] * 2
    assert [message["properties"]["expiration"] for message in sent] == [str(waits + 60_000)] * 2


def test_with_a_publish_signal_receiver_every_tick_goes_through_send_task(
    app: Celery, broker_url: str
) -> None:
    seen: list[str] = []

    def receiver(headers: dict[str, Any], **_: Any) -> None:
        seen.append(headers["id"])

    signals.before_task_publish.connect(receiver)
    try:
        entry = build_entry("signalled", "proj.noop", every=60)
        publisher = Publisher(app)
        with app.producer_or_acquire() as producer:
            ids = [publisher.send(entry, tick, producer) for tick in ticks_of(entry, 3)]
    finally:
        signals.before_task_publish.disconnect(receiver)

    assert seen == ids
    assert publisher._templates == {}
    assert len(messages(app, broker_url)["celery"]) == 3


def test_a_forked_child_does_not_repeat_its_parents_delivery_tags() -> None:
    # Tags come from a buffer of os.urandom: a child must not inherit what is left of it
    # (kombu's Redis transport keys unacknowledged messages by their delivery tag).
    from celery_periodiq.beat.redis_publish import _uuid4

    _uuid4()  # the buffer is filled
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write, json.dumps([_uuid4() for _ in range(3)]).encode())
        os._exit(0)
    os.waitpid(child, 0)
    in_child = json.loads(os.read(read, 4096))
    in_parent = [_uuid4() for _ in range(3)]
    os.close(read)
    os.close(write)

    assert not set(in_child) & set(in_parent)


def test_delivery_tags_are_version_4_uuids_as_kombu_makes_them() -> None:
    import uuid

    from celery_periodiq.beat.redis_publish import _uuid4

    tags = [_uuid4() for _ in range(2000)]

    parsed = [uuid.UUID(tag) for tag in tags]
    assert [str(tag) for tag in parsed] == tags
    assert {tag.version for tag in parsed} == {4}
    assert {tag.variant for tag in parsed} == {uuid.RFC_4122}
    assert {tag[19] for tag in tags} == set("89ab")  # every variant digit occurs
    assert len(set(tags)) == len(tags)


def test_entries_alike_but_for_their_arguments_share_one_shape(
    app: Celery, broker_url: str
) -> None:
    entries = [
        build_entry(f"tenant-{n}", "proj.poll", every=60, args=[n, "x" * n], kwargs={"n": n})
        for n in range(40)
    ]
    publisher = Publisher(app)

    compare(app, broker_url, entries)  # what send_task sends, byte for byte

    with app.producer_or_acquire() as producer, publisher.batch(producer):
        for entry in entries:
            publisher.send(entry, ticks_of(entry)[0], producer)
    messages(app, broker_url)  # emptied
    (template,) = publisher._templates.values()
    assert template is not None
    assert template.raw is not None
    assert len(template.raw.shapes) == 1


def test_each_message_names_its_entry_as_periodic_task_name_by_either_path(
    app: Celery, broker_url: str
) -> None:
    # django-celery-beat's scheduler puts the entry's name in this header, and
    # django-celery-results stores it (TaskResult.periodic_task_name). Entries alike share
    # one template: each message must still name its own entry.
    entries = [build_entry(f"report-{n}", "proj.registered", every=60) for n in range(3)]
    publisher = Publisher(app)

    with app.producer_or_acquire() as producer:
        send(app, entries[0], ticks_of(entries[0])[0], producer)  # send_task itself
    by_send_task = messages(app, broker_url)
    with app.producer_or_acquire() as producer, publisher.batch(producer):
        for entry in entries:
            for tick in ticks_of(entry, 2):
                publisher.send(entry, tick, producer)
    by_publisher = messages(app, broker_url)

    sent = [message["headers"] for found in (by_send_task, by_publisher) for
            queue in found.values() for message in queue]  # fmt: skip
    assert len(sent) == 7
    assert [headers["periodic_task_name"] for headers in sent] == [
        headers["periodiq_entry"] for headers in sent
    ]
    assert sorted({headers["periodic_task_name"] for headers in sent}) == [
        "report-0", "report-1", "report-2",
    ]  # fmt: skip
    assert len(publisher._templates) < 6  # most were filled in from a template
    raws = [t.raw for t in publisher._templates.values() if t is not None]
    assert len(raws) == len(publisher._templates)
    assert all(raw is not None and len(raw.shapes) == 1 for raw in raws)  # names: a tick's own


def test_a_message_staging_refuses_is_told_as_not_staged_not_as_its_entrys_failure(
    broker_url: str,
) -> None:
    # A fanout exchange's message cannot be rendered ahead: the beat sends it at its
    # instant instead. Told as a MessageError, it would have quarantined its entry.
    app = Celery("fanned", broker=broker_url, set_as_current=False)
    app.conf.task_queues = [Broadcast("bcast")]
    entry = build_entry("fanned", "proj.noop", every=60, options={"queue": "bcast"})
    publisher, staged = Publisher(app), []
    with app.producer_or_acquire() as producer, publisher.batch(producer):
        app.amqp.queues["bcast"](producer.channel).declare()  # as a worker's would
        publisher.staged = staged
        with redis_publish.diverting(producer.channel, staged), pytest.raises(NotStagedError):
            publisher.send(entry, ticks_of(entry)[0], producer)
    assert staged == []
