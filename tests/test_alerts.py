"""Alerts: overdue, failing, recovered, pause_on_failure, and their delivery once.

Real Redis and a real Redis broker; runs through PeriodicTask eagerly (begin.lua,
finish.lua) with ticks on an injected clock; overdue through the beat's Dispatcher
(ack.lua decides it on the Redis clock).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from kombu.exceptions import OperationalError

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.beat.alerts import Alerts
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError, EntryError
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from tests.processes import wait_for
from tests.proxy import Proxy
from tests.test_cli import cli

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def app(redis_url: str, broker_url: str) -> Iterator[Celery]:
    app = Celery("alerting", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_alert_task = "proj.alert"
    yield app
    periodiq(app).store.client.close()


def pending(api: Periodiq, name: str) -> list[list[Any]]:
    """The transitions waiting on the alerts list of ``name``'s partition."""
    client = api.store.client
    return [json.loads(raw) for raw in client.lrange(api.store.keys.of(name).alerts, 0, -1)]


def runs_of(app: Celery, outcomes: list[str]) -> Any:
    """A guarded task whose runs fail or succeed in the order of ``outcomes``."""
    left = list(outcomes)

    @app.task(base=PeriodicTask, name="proj.flaky", shared=False)
    def flaky() -> None:
        if left.pop(0) == "fail":
            raise ValueError("boom")

    return flaky


def run_ticks(task: Any, name: str, count: int, first: int = 1) -> None:
    for n in range(first, first + count):
        tick = to_ms(START + timedelta(minutes=n))
        task.apply(headers={HEADER_ENTRY: name, HEADER_TICK: tick})


def test_failing_after_the_threshold_once_then_recovered(app: Celery) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=3)
    task = runs_of(app, ["fail", "fail", "fail", "fail", "ok"])

    run_ticks(task, "flaky", 2)
    before = api.get("flaky")
    run_ticks(task, "flaky", 2, first=3)
    failing = api.get("flaky")
    run_ticks(task, "flaky", 1, first=5)
    recovered = api.get("flaky")

    assert before.failing_since is None
    assert failing.failing_since is not None
    assert failing.alerts == ["failing"]
    assert failing.state["fails"] == "4"
    assert recovered.failing_since is None
    assert recovered.last_success is not None
    assert [(item[0], item[1]) for item in pending(api, "flaky")] == [
        ("flaky", "failing"),
        ("flaky", "recovered"),
    ]  # one "failing" although four failed in a row
    assert pending(api, "flaky")[0][3] == "3 failed runs in a row, the last: ValueError: boom"
    kinds = [event.kind for event in api.history("flaky", limit=20)]
    assert kinds.count("failing") == 1
    assert kinds[0] == "recovered"


def test_pause_on_failure_pauses_with_a_note(app: Celery) -> None:
    api = periodiq(app)
    api.add("fragile", "proj.flaky", every=60, start_at=START, failure_threshold=2,
            pause_on_failure=True)  # fmt: skip
    task = runs_of(app, ["fail", "fail"])

    run_ticks(task, "fragile", 2)

    paused = api.get("fragile")
    assert paused.paused
    assert paused.note == "paused after 2 failed runs in a row, the last: ValueError: boom"
    assert api.store.client.zscore(api.store.keys.of("fragile").due, "fragile") is None


def test_overdue_is_decided_by_a_beat_once_and_recovered_by_a_success(app: Celery) -> None:
    api = periodiq(app)
    stuck = api.add("stuck", "proj.flaky", every=60, start_at=START, alert_after=0.001).entry
    assert stuck is not None
    api.store.put("update", [stuck], now_ms=to_ms(START))  # its ticks from START on
    dispatcher = Dispatcher(app, api.store, "beat")
    created_ms = int(api.get("stuck").state["created"])
    while api.store.now_ms() <= created_ms + 1:  # the Redis clock passes alert_after
        pass

    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=1)))  # no run: overdue
    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=2)))  # still: said once
    overdue = api.get("stuck")
    runs_of(app, ["ok"]).apply(
        headers={HEADER_ENTRY: "stuck", HEADER_TICK: to_ms(START + timedelta(minutes=2))}
    )

    assert overdue.alerts == ["overdue"]
    assert [item[1] for item in pending(api, "stuck")] == ["overdue", "recovered"]
    assert pending(api, "stuck")[0][3].startswith("no successful run for ")
    assert api.get("stuck").alerts == []


def test_an_entry_without_alert_after_or_paused_is_never_overdue(app: Celery) -> None:
    api = periodiq(app)
    for name, after in (("quiet", None), ("resting", 0.001)):
        entry = api.add(name, "proj.flaky", every=60, start_at=START, alert_after=after).entry
        assert entry is not None
        api.store.put("update", [entry], now_ms=to_ms(START))
    api.pause("resting")
    dispatcher = Dispatcher(app, api.store, "beat")

    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=1)))

    assert api.get("quiet").alerts == []
    assert api.get("resting").alerts == []
    assert pending(api, "quiet") + pending(api, "resting") == []


def test_each_transition_is_sent_once_to_the_alert_task(app: Celery, broker_url: str) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail", "ok"]), "flaky", 2)
    parts = api.store.keys.all()
    one, other = Alerts(app, api.store, "proj.alert"), Alerts(app, api.store, "proj.alert")

    sent = [one.send(parts), other.send(parts), one.send(parts)]  # two beats, in turn

    broker = redis.Redis.from_url(broker_url)
    messages = [json.loads(raw) for raw in reversed(broker.lrange("celery", 0, -1))]
    broker.close()
    assert sent == [2, 0, 0]
    assert [message["headers"]["task"] for message in messages] == ["proj.alert"] * 2
    payloads = [json.loads(base64.b64decode(message["body"]))[0][0] for message in messages]
    assert [(p["entry"], p["transition"]) for p in payloads] == [
        ("flaky", "failing"), ("flaky", "recovered")
    ]  # fmt: skip
    assert payloads[0]["schedule"] == api.settings.key_prefix
    assert datetime.fromisoformat(payloads[0]["at"]).tzinfo is not None


def test_without_an_alert_task_transitions_are_logged(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail"]), "flaky", 1)

    with caplog.at_level(logging.WARNING, logger="celery_periodiq.alerts"):
        sent = Alerts(app, api.store, None).send(api.store.keys.all())

    assert sent == 1
    assert "entry 'flaky' is failing: 1 failed runs in a row" in caplog.text


def test_garbage_on_an_alerts_list_is_dropped_and_the_rest_sent(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail"]), "flaky", 1)
    alerts = api.store.keys.of("flaky").alerts
    api.store.client.lpush(alerts, "{not json", json.dumps(["x", "overdue", "soon", ""]))

    with caplog.at_level(logging.WARNING, logger="celery_periodiq.alerts"):
        sent = Alerts(app, api.store, "proj.alert").send(api.store.keys.all())

    assert sent == 1
    assert caplog.text.count("an unreadable alert was dropped") == 2
    assert api.store.client.llen(alerts) == 0


def test_a_transition_whose_message_fails_goes_back_first(app: Celery) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail", "ok"]), "flaky", 2)
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # the broker is down
    app.conf.broker_connection_retry = False
    app.conf.broker_connection_timeout = 0.2
    app.conf.broker_transport_options = {"max_retries": 0}

    with pytest.raises(OperationalError):
        Alerts(app, api.store, "proj.alert").send(api.store.keys.all())

    assert [item[1] for item in pending(api, "flaky")] == ["failing", "recovered"]


def delivered(broker_url: str) -> list[tuple[str, str]]:
    """(entry, transition) of every alert message on the broker, oldest first."""
    broker = redis.Redis.from_url(broker_url)
    try:
        raw = list(reversed(broker.lrange("celery", 0, -1)))
    finally:
        broker.close()
    payloads = [json.loads(base64.b64decode(json.loads(item)["body"]))[0][0] for item in raw]
    return [(p["entry"], p["transition"]) for p in payloads]


def test_no_transition_is_lost_when_the_broker_fails_midway_through_several_partitions(
    tmp_path: Path, redis_url: str
) -> None:
    names = ["flaky-a", "flaky-b", "flaky-c"]
    with LocalRedis(tmp_path / "failing-broker", persist=True) as broker:
        app = Celery("alerting-outage", broker=broker.url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_url
        app.conf.broker_connection_retry = False
        app.conf.broker_connection_timeout = 0.2
        app.conf.broker_transport_options = {"max_retries": 0}
        api = periodiq(app)
        parts = {api.store.keys.partition_of(name) for name in names}
        assert len(parts) == len(names)  # three partitions, each with its transitions
        task = runs_of(app, ["fail", "ok"] * len(names))
        for name in names:
            api.add(name, "proj.flaky", every=60, start_at=START, failure_threshold=1)
            run_ticks(task, name, 2)  # failing, then recovered
        published = []

        def broker_dies_at_the_second(**_: Any) -> None:
            published.append(1)
            if len(published) == 2:
                broker.stop(kill=True)  # the second message finds no broker

        before_task_publish.connect(broker_dies_at_the_second, weak=False)
        try:
            with pytest.raises(OperationalError):
                Alerts(app, api.store, "proj.alert").send(api.store.keys.all())
        finally:
            before_task_publish.disconnect(broker_dies_at_the_second)
        broker.start()
        sent = Alerts(app, api.store, "proj.alert").send(api.store.keys.all())

        said = delivered(broker.url)
        api.store.client.close()
    assert sent == 2 * len(names) - 1  # all but the one that went out before the failure
    assert sorted(said) == sorted((name, kind) for name in names
                                  for kind in ("failing", "recovered"))  # fmt: skip
    for name in names:  # each entry's in the order they happened
        assert [kind for entry, kind in said if entry == name] == ["failing", "recovered"]


def test_a_partition_whose_pop_fails_does_not_cost_the_others_their_transitions(
    app: Celery, broker_url: str
) -> None:
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail"]), "flaky", 1)
    other = next(p for p in api.store.keys.all() if p != api.store.keys.of("flaky"))
    api.store.client.set(other.alerts, "not a list")  # that partition's pop fails

    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        Alerts(app, api.store, "proj.alert").send(api.store.keys.all())

    assert delivered(broker_url) == [("flaky", "failing")]
    assert pending(api, "flaky") == []


def test_a_transition_whose_pop_reply_was_lost_is_sent_by_a_beat_after_the_lease(
    redis_server: LocalRedis, broker_url: str
) -> None:
    # Redis hands one beat the transitions, and the reply never reaches it (the
    # connection cut after the command ran): after the lease, a beat sends them.
    with Proxy(redis_server.port) as proxy:
        app = Celery("alerting-cut", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = proxy.url
        app.conf.periodiq_claim_lease = 1
        api = periodiq(app)
        api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
        run_ticks(runs_of(app, ["fail", "ok"]), "flaky", 2)
        api.store.load_scripts()  # the reply lost is the pop's own
        parts = api.store.keys.all()
        proxy.lose_next_reply(api.store.keys.of("flaky").alerts.encode())

        with contextlib.suppress(redis.RedisError):
            Alerts(app, api.store, "proj.alert").send(parts)
        assert proxy.lost.is_set()
        other = Alerts(app, api.store, "proj.alert")

        def both_sent() -> bool:
            other.send(parts)
            return len(delivered(broker_url)) >= 2

        wait_for(both_sent, 15, "both transitions sent by a beat")
        api.store.client.close()
    assert delivered(broker_url) == [("flaky", "failing"), ("flaky", "recovered")]


def test_a_beat_stopped_right_after_sending_costs_one_duplicate_of_the_same_payload(
    app: Celery, broker_url: str
) -> None:
    # The cost of sending each transition at least once: a beat stopped between its
    # message and saying it was sent; after the lease another beat sends it again.
    app.conf.periodiq_claim_lease = 1
    api = periodiq(app)
    api.add("flaky", "proj.flaky", every=60, start_at=START, failure_threshold=1)
    run_ticks(runs_of(app, ["fail"]), "flaky", 1)
    parts = api.store.keys.all()

    def stopped(**_: Any) -> None:
        raise KeyboardInterrupt  # as a beat killed the moment its message went out

    after_task_publish.connect(stopped, weak=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            Alerts(app, api.store, "proj.alert").send(parts)
    finally:
        after_task_publish.disconnect(stopped)
    other = Alerts(app, api.store, "proj.alert")

    def sent_again() -> bool:
        other.send(parts)
        return len(delivered(broker_url)) >= 2

    wait_for(sent_again, 15, "the transition sent again after the lease")
    other.send(parts)  # and not a third time

    assert delivered(broker_url) == [("flaky", "failing")] * 2
    assert len(set(queued_payloads(broker_url))) == 1  # the same payload, its "at" too


def queued_payloads(broker_url: str) -> list[str]:
    """The alert payloads on the broker, as JSON text."""
    broker = redis.Redis.from_url(broker_url)
    try:
        raw = broker.lrange("celery", 0, -1)
    finally:
        broker.close()
    return [
        json.dumps(json.loads(base64.b64decode(json.loads(item)["body"]))[0][0]) for item in raw
    ]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"alert_after": -1}, "alert_after=-1 is invalid"),
        ({"alert_after": "soon"}, "alert_after='soon' is invalid"),
        ({"failure_threshold": 0}, "failure_threshold=0 is invalid"),
        ({"failure_threshold": True}, "failure_threshold=True is invalid"),
        ({"failure_threshold": "3"}, "failure_threshold='3' is invalid"),
        ({"pause_on_failure": "yes"}, "pause_on_failure='yes' is invalid"),
    ],
)
def test_bad_alert_options_are_refused_and_nothing_is_written(
    app: Celery, options: dict[str, Any], words: str
) -> None:
    api = periodiq(app)

    with pytest.raises(EntryError, match=words):
        api.add("bad", "proj.t", every=60, **options)

    assert api.count() == 0


@pytest.mark.parametrize("value", ["", 3, ["proj.alert"]])
def test_a_bad_alert_task_setting_is_refused(value: object) -> None:
    app = Celery("bad-alert-task", set_as_current=False)
    app.conf.periodiq_redis_url = "redis://127.0.0.1:1/0"
    app.conf.periodiq_alert_task = value

    with pytest.raises(ConfigurationError, match="periodiq_alert_task"):
        Settings.from_app(app)


def test_the_cli_sets_the_alert_options_and_show_prints_them(app: Celery) -> None:
    added = cli(app, "add", "tuned", "proj.t", "--every", "60", "--alert-after", "600",
                "--failure-threshold", "5", "--pause-on-failure")  # fmt: skip
    shown = cli(app, "show", "tuned")
    as_json = json.loads(cli(app, "show", "tuned", "--json").stdout)

    assert added.exit_code == 0, added.output
    entry = periodiq(app).get("tuned").entry
    assert entry is not None
    assert (entry.alert_after, entry.failure_threshold, entry.pause_on_failure) == (600, 5, True)
    assert periodiq(app).get("tuned").state["alert"] == "600000"
    assert "overdue     after 10m00s without a successful run" in shown.stdout
    assert "failing     after 5 failed or timeboxed runs in a row; then paused" in shown.stdout
    assert as_json["effective"]["alert_after"] == 600.0
    assert (as_json["overdue_since"], as_json["failing_since"]) == (None, None)


def test_the_cli_refuses_a_bad_failure_threshold_and_writes_nothing(app: Celery) -> None:
    result = cli(app, "add", "bad", "proj.t", "--every", "60", "--failure-threshold", "0")

    assert result.exit_code == 2
    assert "--failure-threshold" in result.output
    assert periodiq(app).count() == 0


def test_an_entry_quarantined_is_an_alert_once(app: Celery) -> None:
    api = periodiq(app)
    entry = api.add("victim", "proj.t", every=60, start_at=START).entry
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))
    part = api.store.keys.of("victim")
    api.store.client.delete(part.history("victim"))
    api.store.client.set(part.history("victim"), "not a list")  # damage, by someone else
    dispatcher = Dispatcher(app, api.store, "beat")

    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=1)))
    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=2)))

    said = pending(api, "victim")
    assert [(item[0], item[1]) for item in said] == [("victim", "quarantined")]
    assert "history" in said[0][3]
    assert api.get("victim").status == "quarantined"
