"""On RabbitMQ, the beat's Publisher sends what ``app.send_task`` would, byte for byte,
while its later messages of a kind are encoded by amqp_publish.py, not by kombu.

Each case publishes the same ticks twice to queues of its own on the RabbitMQ at
127.0.0.1:5672: once through Celery's ``send_task`` (``publish.send``), once through the
Publisher. Both are fetched back with py-amqp; every property, every header and the
body's bytes must be equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from kombu import Connection, Queue

from celery_periodiq.beat import amqp_publish
from celery_periodiq.beat.publish import Publisher, send
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.instants import to_ms
from celery_periodiq.protocol.headers import HEADER_TICK
from tests.test_publish import ticks_of
from tests.test_publish_failures import RABBITMQ, _rabbitmq


@pytest.fixture
def rabbit() -> Iterator[tuple[Celery, Connection, str]]:
    """An app whose queues (its default, and ``<tag>-reports`` with priorities) are its
    own on the RabbitMQ, and a connection to read them; the queues deleted after."""
    connection = _rabbitmq()
    tag = f"periodiq-test-{uuid.uuid4().hex[:8]}"
    app = Celery("published", broker=RABBITMQ, set_as_current=False)
    app.conf.task_default_queue = tag
    app.conf.task_queues = [
        Queue(tag),
        Queue(f"{tag}-reports", queue_arguments={"x-max-priority": 9}),
    ]
    for queue in app.conf.task_queues:
        queue(connection.default_channel).declare()
    try:
        yield app, connection, tag
    finally:
        channel = connection.channel()
        for queue in (tag, f"{tag}-reports"):
            channel.queue_delete(queue)
        connection.release()


def fetched(connection: Connection, queues: list[str]) -> list[tuple[dict[str, Any], Any]]:
    """Every message in ``queues``, in order: its properties (headers included) and body."""
    channel, found = connection.channel(), []
    for queue in queues:
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            found.append((dict(message.properties), message.body))
    return found


def cases(tag: str) -> dict[str, list[Entry]]:
    reports = {"queue": f"{tag}-reports", "priority": 7}
    return {
        "plain": [build_entry(f"plain-{n}", "proj.noop", every=60) for n in range(3)],
        "arguments": [
            build_entry("tenant-1", "proj.poll", every=60, args=[1, "a"], kwargs={"box": "x"}),
            build_entry("tenant-2", "proj.poll", every=60, args=[2, "<b>"], kwargs={"box": "y"}),
            build_entry("tenant-3", "proj.poll", every=60),
        ],
        "options": [
            build_entry(f"opts-{n}", "proj.noop", every=60, options=reports) for n in range(2)
        ],
        "no limits, no expiry": [
            build_entry(f"bare-{n}", "proj.noop", every=60, timebox=None, expires=None)
            for n in range(2)
        ],
        "cron": [
            build_entry("cron-1", "proj.noop", cron="*/5 * * * * *", catchup="all"),
            build_entry("cron-2", "proj.noop", cron="*/10 * * * * *"),
        ],
    }


@pytest.mark.parametrize("case", ["plain", "arguments", "options", "no limits, no expiry", "cron"])
@pytest.mark.parametrize("confirmed", [False, True], ids=["", "confirm_publish"])
def test_on_rabbitmq_the_publisher_sends_what_send_task_sends(
    rabbit: tuple[Celery, Connection, str], case: str, confirmed: bool
) -> None:
    app, connection, tag = rabbit
    app.conf.broker_transport_options = {"confirm_publish": confirmed}
    queues = [tag, f"{tag}-reports"]
    work = [(entry, tick) for entry in cases(tag)[case] for tick in ticks_of(entry, 5)]
    publisher = Publisher(app)
    with app.producer_or_acquire() as producer:
        for entry, tick in work:
            send(app, entry, tick, producer)
        expected = fetched(connection, queues)
        transport = producer.channel.connection.transport
        writes: list[int] = []  # the socket calls amqp_publish.Frames makes
        write = transport.write
        transport.write = lambda data: (writes.append(len(data)), write(data))[1]
        try:
            with publisher.batch(producer):
                for entry, tick in work:
                    publisher.send(entry, tick, producer)
        finally:
            del transport.write

    got = fetched(connection, queues)

    assert len(expected) == len(work)
    assert got == expected
    # some were encoded by amqp_publish.py: those of a template whose first message it
    # encodes as py-amqp did, after the template's queue was declared on the channel
    wires = [template.wire for template in publisher._templates.values() if template]
    assert wires
    assert all(isinstance(wire, amqp_publish.AmqpTemplate) for wire in wires)
    assert len(work) > 2 * len(publisher._templates)
    if confirmed:  # py-amqp publishes each, and waits for its confirmation
        assert writes == []
    else:  # the encoded messages' frames went out together, not one by one
        assert 0 < len(writes) < len(work) / 2


def test_on_rabbitmq_a_batch_that_fails_sends_none_of_its_buffered_frames(
    rabbit: tuple[Celery, Connection, str],
) -> None:
    # A pass whose lease check fails before a flush (a beat frozen mid-chunk) leaves
    # the batch with an error: the encoded messages' frames buffered in it are dropped,
    # not written by the next batch's flush.
    app, connection, tag = rabbit
    entry = build_entry("frozen", "proj.noop", every=60)
    first, declared, *buffered, later = ticks_of(entry, 7)
    publisher = Publisher(app)

    def a_chunk_whose_lease_ran_out(producer: Any) -> None:
        with publisher.batch(producer):
            for tick in buffered:
                publisher.send(entry, tick, producer)
            raise RuntimeError("the lease ran out while this chunk was built")

    with app.producer_or_acquire() as producer:
        with publisher.batch(producer):  # the template learned, its queue declared
            publisher.send(entry, first, producer)
            publisher.send(entry, declared, producer)
        assert len(fetched(connection, [tag])) == 2
        with pytest.raises(RuntimeError):
            a_chunk_whose_lease_ran_out(producer)
        with publisher.batch(producer):
            publisher.send(entry, later, producer)

    got = fetched(connection, [tag])

    assert [properties["application_headers"][HEADER_TICK] for properties, _ in got] == [
        to_ms(later.nominal)
    ]
