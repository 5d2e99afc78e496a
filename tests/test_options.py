"""Publish options kombu can check are refused where they come in, and nothing is written.

An entry's ``options`` (queue, routing_key, exchange, priority, serializer,
compression) go into every message the beat publishes. What kombu can check
without the broker is checked when the entry is given (``add``, ``update``,
``add_many``, ``@periodic``, ``beat_schedule``, the CLI, an import): the types, the
priority's range (0-255, AMQP's), a serializer and a compression kombu has an
encoder for in this process (the app's modules imported: serializers they register
count), and that the serializer can encode the entry's arguments. Each refusal is
one EntryError naming the option and what is allowed, and Redis is left as it was.
What still fails at publish time quarantines its entry alone
(tests/test_publish_failures.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from celery import Celery
from kombu.serialization import register, unregister

from celery_periodiq import EntryError, Periodiq, Scheduler, periodic, periodiq
from celery_periodiq.declare import registry
from tests.test_cli import cli, one_error_line

TASK = "proj.tasks.report"
START = datetime(2090, 1, 1, tzinfo=UTC)

# (options, words the error says): one of each kind of refusal
REFUSED = [
    pytest.param(
        {"serializer": "nosuch"},
        ["options['serializer']='nosuch' is invalid", "allowed: ", "json", "pickle",
         "kombu.serialization.register"],
        id="serializer-not-installed",
    ),
    pytest.param(
        {"serializer": "raw"},
        ["options['serializer']='raw' is invalid", "json", "pickle"],
        id="serializer-raw",  # bytes as they are: a task message is no bytes
    ),
    pytest.param(
        {"compression": "nosuch"},
        ["options['compression']='nosuch' is invalid", "bzip2", "gzip", "zlib"],
        id="compression-not-installed",
    ),
    pytest.param(
        {"priority": 256}, ["options['priority']=256 is invalid", "0-255"], id="priority-256"
    ),
    pytest.param(
        {"priority": -1}, ["options['priority']=-1 is invalid", "0-255"], id="priority-negative"
    ),
    pytest.param(
        {"priority": "5"}, ["options['priority']='5' is invalid", "priority: int"], id="prio-str"
    ),
    pytest.param({"queue": 5}, ["options['queue']=5 is invalid", "queue: str"], id="queue-int"),
    pytest.param(
        {"routing_key": ["a"]},
        ["options['routing_key']=['a'] is invalid", "routing_key: str"],
        id="routing-key-list",
    ),
    pytest.param(
        {"exchange": None}, ["options['exchange']=None is invalid", "exchange: str"], id="exchange"
    ),
    pytest.param(
        {"serializer": 1}, ["options['serializer']=1 is invalid", "serializer: str"], id="ser-int"
    ),
    pytest.param(
        {"compression": True},
        ["options['compression']=True is invalid", "compression: str"],
        id="compression-bool",
    ),
    pytest.param(
        {"countdown": 5},
        ["options['countdown']=5 is invalid", "queue: str, routing_key: str"],
        id="unknown-option",
    ),
]  # fmt: skip


def contents(client: redis.Redis) -> dict[str, Any]:
    """Every key of the schedule's Redis with its serialized value."""
    return {key: client.dump(key) for key in sorted(client.scan_iter())}


def says(error: BaseException | str, words: list[str]) -> None:
    text = str(error)
    for word in words:
        assert word in text, (word, text)


@pytest.fixture
def app(redis_url: str, broker_url: str) -> Iterator[Celery]:
    app = Celery("options", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    yield app
    periodiq(app).store.client.close()
    app.close()


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


@pytest.mark.parametrize(("options", "words"), REFUSED)
def test_add_refuses_an_option_kombu_cannot_publish_and_writes_nothing(
    api: Periodiq, redis_client: redis.Redis, options: dict[str, Any], words: list[str]
) -> None:
    before = contents(redis_client)

    with pytest.raises(EntryError) as refused:
        api.add("bad", TASK, every=60, options=options)

    says(refused.value, ["entry 'bad': ", *words])
    assert contents(redis_client) == before


@pytest.mark.parametrize(("options", "words"), REFUSED)
def test_update_refuses_an_option_kombu_cannot_publish_and_changes_nothing(
    api: Periodiq, redis_client: redis.Redis, options: dict[str, Any], words: list[str]
) -> None:
    api.add("report", TASK, every=60, start_at=START, options={"queue": "reports"})
    before = contents(redis_client)

    with pytest.raises(EntryError) as refused:
        api.update("report", options=options)

    says(refused.value, ["entry 'report': ", *words])
    assert contents(redis_client) == before


def test_add_many_refuses_a_batch_with_one_bad_option_and_writes_nothing(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    before = contents(redis_client)
    good = {"task": TASK, "every": 60, "options": {"serializer": "json"}}

    with pytest.raises(EntryError) as refused:
        api.add_many([
            {"name": "a", **good},
            {"name": "b", **good, "options": {"serializer": "nosuch"}},
            {"name": "c", **good},
        ])  # fmt: skip

    says(refused.value, ["1 bad entries, nothing written", "#1: entry 'b': ",
                         "options['serializer']='nosuch' is invalid"])  # fmt: skip
    assert contents(redis_client) == before


def test_a_serializer_the_app_registers_is_accepted(api: Periodiq, picky: str) -> None:
    stored = api.add("custom", TASK, every=60, args=[1, "two"], options={"serializer": picky})

    assert stored.entry is not None
    assert stored.entry.options == {"serializer": "picky"}


def test_a_serializer_that_cannot_encode_the_entrys_arguments_is_refused(
    api: Periodiq, redis_client: redis.Redis, picky: str
) -> None:
    before = contents(redis_client)

    with pytest.raises(EntryError) as refused:
        api.add("custom", TASK, every=60, kwargs={"word": "boom"}, options={"serializer": picky})

    says(refused.value, ["entry 'custom': options['serializer']='picky' cannot encode its "
                         "args and kwargs", "picky cannot encode 'boom'"])  # fmt: skip
    assert contents(redis_client) == before


def test_update_refuses_arguments_the_entrys_serializer_cannot_encode(
    api: Periodiq, redis_client: redis.Redis, picky: str
) -> None:
    api.add("custom", TASK, every=60, start_at=START, options={"serializer": picky})
    before = contents(redis_client)

    with pytest.raises(EntryError) as refused:
        api.update("custom", args=["boom"])

    says(refused.value, ["options['serializer']='picky' cannot encode", "'boom'"])
    assert contents(redis_client) == before


def task_body() -> None:
    """A task body."""


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"priority": 256}, ["options['priority']=256 is invalid", "0-255"]),
        ({"priority": 1.5}, ["options['priority']=1.5 is invalid", "priority: int"]),
        ({"queue": 5}, ["options['queue']=5 is invalid", "queue: str"]),
        ({"routing_key": 5}, ["options['routing_key']=5 is invalid", "routing_key: str"]),
        ({"exchange": b"x"}, ["options['exchange']=b'x' is invalid", "exchange: str"]),
    ],
)
def test_the_decorator_refuses_a_bad_routing_option_and_declares_nothing(
    options: dict[str, Any], words: list[str]
) -> None:
    declared_before = len(registry._DECLARED)

    with pytest.raises(EntryError) as refused:
        periodic(every=60, **options)(task_body)

    says(refused.value, [f"entry '{__name__}.task_body': ", *words])
    assert len(registry._DECLARED) == declared_before


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--priority", "256"], ["256 is not in the range 0<=x<=255"]),
        (["--priority", "-1"], ["-1 is not in the range 0<=x<=255"]),
        (["--priority", "high"], ["'high' is not a valid integer"]),
    ],
)
def test_cli_add_refuses_a_bad_option_and_writes_nothing(
    app: Celery, redis_client: redis.Redis, args: list[str], words: list[str]
) -> None:
    before = contents(redis_client)

    result = cli(app, "add", "bad", TASK, "--every", "60", *args)

    assert result.exit_code == 2
    says(one_error_line(result), words)
    assert contents(redis_client) == before


def _document(options: dict[str, Any]) -> dict[str, Any]:
    definition = {"name": "imported", "task": TASK, "schedule": "@every 60s", "form": "every",
                  "options": options}  # fmt: skip
    return {"format": "celery-periodiq", "version": 1, "entries": [{"definition": definition}]}


@pytest.mark.parametrize(("options", "words"), REFUSED)
def test_an_import_refuses_an_option_kombu_cannot_publish_and_writes_nothing(
    api: Periodiq, redis_client: redis.Redis, options: dict[str, Any], words: list[str]
) -> None:
    before = contents(redis_client)

    with pytest.raises(EntryError) as refused:
        api.import_schedule(_document(options))

    says(refused.value, ["#0: entry 'imported': ", *words])
    assert contents(redis_client) == before


def test_cli_import_refuses_a_serializer_not_installed_and_writes_nothing(
    app: Celery, redis_client: redis.Redis
) -> None:
    before = contents(redis_client)

    result = cli(app, "import", "-", input=json.dumps(_document({"serializer": "nosuch"})))

    assert result.exit_code == 2
    says(one_error_line(result), ["entry 'imported': options['serializer']='nosuch' is invalid"])
    assert contents(redis_client) == before


def test_a_beat_schedule_entry_with_a_bad_option_is_skipped_with_the_reason_and_not_written(
    app: Celery, api: Periodiq, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "good": {"task": TASK, "schedule": 60.0, "options": {"serializer": "json"}},
        "bad": {"task": TASK, "schedule": 60.0, "options": {"serializer": "nosuch"}},
        "worse": {"task": TASK, "schedule": 60.0, "options": {"compression": "nosuch"}},
    }
    caplog.set_level(logging.INFO, logger="celery_periodiq")
    scheduler = Scheduler(app)  # a real beat: reads beat_schedule, connects, reconciles
    try:
        scheduler.tick()
    finally:
        scheduler.close()

    assert [stored.name for stored in api.list()] == ["good"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, errors
    says(errors[0], ["beat_schedule 'bad' is skipped: entry 'bad': ",
                     "options['serializer']='nosuch' is invalid"])  # fmt: skip
    says(errors[1], ["beat_schedule 'worse' is skipped: entry 'worse': ",
                     "options['compression']='nosuch' is invalid"])  # fmt: skip
