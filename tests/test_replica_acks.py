"""periodiq_replica_acks: a beat publishes only claims its replicas have, and a worker
runs a body only once they have its start (``WAIT``): every replica attached to the
primary, and at least ``periodiq_replica_acks``.

A real primary and real replicas on loopback. With the replica gone the claims are
refused (ReplicasBehindError) and nothing reaches the broker; with it back, the
claims are taken over after their lease and published, each tick once. A run whose
start the replicas did not acknowledge waits (its start written again) until they have
it, and is refused only once its tick expired, saying why.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError, ReplicasBehindError
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_EXPIRES, HEADER_TICK
from celery_periodiq.protocol.records import RunStart
from celery_periodiq.worker.plain import install
from tests.processes import wait_for

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[LocalRedis]:
    with LocalRedis(tmp_path / "primary", persist=True) as server:
        yield server


def replica_of(tmp_path: Path, primary: LocalRedis, name: str = "replica") -> LocalRedis:
    return LocalRedis(tmp_path / name, extra_args=["--replicaof", "127.0.0.1", str(primary.port)])


def synced_replica(tmp_path: Path, primary: LocalRedis) -> LocalRedis:
    """A replica of ``primary``, started and in sync with it."""
    replica = replica_of(tmp_path, primary).start()
    wait_for(lambda: in_sync(primary), 30, "the replica to sync")
    return replica


def in_sync(primary: LocalRedis, replicas: int = 1) -> bool:
    client = redis.Redis(port=primary.port, decode_responses=True)
    try:
        info = client.info("replication")
    finally:
        client.close()
    return info.get("connected_slaves") == replicas and all(
        info.get(f"slave{n}", {}).get("state") == "online" for n in range(replicas)
    )


def test_with_a_replica_missing_no_claim_is_published_and_with_it_back_each_once(
    tmp_path: Path, primary: LocalRedis, broker_url: str
) -> None:
    replica = synced_replica(tmp_path, primary)
    app = Celery("acked", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url
    app.conf.periodiq_replica_acks = 1
    app.conf.periodiq_replica_timeout = 0.2
    app.conf.periodiq_claim_lease = 2
    api = periodiq(app)
    names = [f"tenant-{n}" for n in range(40)]
    for name in names:
        entry = api.add(name, "proj.t", every=60, start_at=START).entry
        assert entry is not None
        api.store.put("update", [entry], now_ms=to_ms(START))
    dispatcher = Dispatcher(app, api.store, "beat")
    broker = redis.Redis.from_url(broker_url)
    due = to_ms(START + timedelta(seconds=60))

    replica.stop(kill=True)
    with pytest.raises(ReplicasBehindError, match="0 of the 1 replicas required"):
        dispatcher.dispatch(now_ms=due)
    assert broker.llen("celery") == 0

    replica.start()
    wait_for(lambda: in_sync(primary), 30, "the replica to sync again")
    early = dispatcher.dispatch(now_ms=due + 1000)  # the refused claims still hold
    later = dispatcher.dispatch(now_ms=due + 2500)  # their lease is over: taken over

    assert (early.claimed, later.claimed) == (0, len(names))
    assert broker.llen("celery") == len(names)
    assert all(api.get(name).counters == {"enqueued": 1} for name in names)
    replica.close()
    broker.close()
    api.store.client.close()


def test_without_replica_acks_nothing_waits_for_replicas(
    primary: LocalRedis, broker_url: str
) -> None:
    app = Celery("unacked", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url  # no replica at all
    api = periodiq(app)
    entry = api.add("alone", "proj.t", every=60, start_at=START).entry
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))

    done = Dispatcher(app, api.store, "beat").dispatch(now_ms=to_ms(START + timedelta(seconds=60)))

    assert done.claimed == 1
    api.store.client.close()


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"periodiq_replica_acks": -1}, ["periodiq_replica_acks=-1", "0 to 16"]),
        ({"periodiq_replica_acks": "1"}, ["periodiq_replica_acks='1'"]),
        ({"periodiq_replica_timeout": 0}, ["periodiq_replica_timeout=0", "0.01 to 60"]),
        ({"periodiq_replica_acks": 17}, ["periodiq_replica_acks=17", "0 to 16"]),
    ],
)
def test_bad_replica_settings_are_refused(settings: dict[str, object], words: list[str]) -> None:
    app = Celery("bad-acks", set_as_current=False)
    app.conf.periodiq_redis_url = "redis://127.0.0.1:1/0"
    app.conf.update(settings)

    with pytest.raises(ConfigurationError) as caught:
        Settings.from_app(app)

    assert all(word in str(caught.value) for word in words), str(caught.value)


def acked_app(
    primary: LocalRedis | str, broker_url: str, name: str, **redis_options: Any
) -> tuple[Celery, Any, list[int]]:
    """An app with replica acks 1 (200 ms) and a guarded task recording its bodies, its
    schedule on ``primary`` (a server, or a URL: a Sentinel's, with ``redis_options``)."""
    app = Celery(name, broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary if isinstance(primary, str) else primary.url
    app.conf.periodiq_redis_options = redis_options
    app.conf.periodiq_replica_acks = 1
    app.conf.periodiq_replica_timeout = 0.2
    bodies: list[int] = []

    @app.task(base=PeriodicTask, name="proj.acked", shared=False)
    def acked(tick: int) -> None:
        bodies.append(tick)

    return app, acked, bodies


def test_a_run_waits_while_no_replica_has_its_start_and_runs_once_one_has(
    tmp_path: Path, primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celery_periodiq.task")
    replica = synced_replica(tmp_path, primary)
    app, acked, bodies = acked_app(primary, broker_url, "acked-runs")
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    api.store.client.script_flush()  # the first begin meets NOSCRIPT and loads it
    first, second = to_ms(START + timedelta(seconds=60)), to_ms(START + timedelta(seconds=120))
    ran = acked.apply(args=[first], headers={HEADER_ENTRY: "acked", HEADER_TICK: first})
    replica.stop(kill=True)

    def replica_returns_while_the_run_waits() -> None:
        wait_for(lambda: "run second waits: 0 of the 1 replicas required" in caplog.text, 30,
                 "the second run to wait for a replica")  # fmt: skip
        replica.start()  # a new, empty replica: it syncs from the primary

    returning = threading.Thread(target=replica_returns_while_the_run_waits)
    returning.start()
    waited = time.monotonic()
    later = acked.apply(args=[second], task_id="second",
                        headers={HEADER_ENTRY: "acked", HEADER_TICK: second})  # fmt: skip
    waited = time.monotonic() - waited
    returning.join(30)

    assert ran.state == "SUCCESS"
    assert later.state == "SUCCESS", later.state
    assert bodies == [first, second]  # each once
    assert waited > 0.2  # it waited past one replica timeout, and was not refused
    assert "run second: the replicas have its start after " in caplog.text
    kinds = [event.kind for event in api.history("acked", limit=10)]
    assert kinds.count("started") == 2
    assert "revoked" not in kinds
    assert api.get("acked").counters.get("started") == 2
    replica.close()
    api.store.client.close()


def test_a_run_no_replica_acknowledges_is_refused_only_once_its_tick_expired(
    primary: LocalRedis, broker_url: str
) -> None:
    app, acked, bodies = acked_app(primary, broker_url, "acked-refused")  # no replica at all
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))
    expires = api.store.now_ms() + 1500  # on the Redis clock, as the beat sets it

    began = time.monotonic()
    refused = acked.apply(
        args=[tick], headers={HEADER_ENTRY: "acked", HEADER_TICK: tick, HEADER_EXPIRES: expires}
    )
    waited = time.monotonic() - began

    assert refused.state == "IGNORED"
    assert bodies == []
    assert 1.3 < waited < 5, waited  # until its expiry, not one replica timeout
    assert api.store.now_ms() >= expires
    last = api.history("acked", limit=1)[0]
    assert last.kind == "revoked"
    error = last.fields.get("error", "")
    assert "0 of the 1 replicas required" in error
    assert "when its tick expired: it is not run" in error
    assert api.get("acked").running is None  # its marker is cleared
    api.store.client.close()


def test_a_waiting_run_refused_when_it_writes_its_start_again_says_no_replica_has_it(
    primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The begin written again was refused (here: its entry deleted meanwhile), and the
    # log still said "the replicas have its start" just before the refusal.
    caplog.set_level(logging.INFO, logger="celery_periodiq.task")
    app, acked, bodies = acked_app(primary, broker_url, "acked-deleted")  # no replica at all
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))

    def deleted_while_the_run_waits() -> None:
        wait_for(lambda: "waits: 0 of the 1 replicas required" in caplog.text, 30,
                 "the run to wait for a replica")  # fmt: skip
        api.delete("acked")

    deleting = threading.Thread(target=deleted_while_the_run_waits)
    deleting.start()
    refused = acked.apply(args=[tick], headers={HEADER_ENTRY: "acked", HEADER_TICK: tick})
    deleting.join(30)

    assert refused.state == "IGNORED"
    assert bodies == []
    assert "the replicas have its start" not in caplog.text
    assert caplog.records[-1].getMessage().endswith(" deleted")
    api.store.client.close()


def test_a_plain_run_no_replica_acknowledges_waits_like_a_guarded_one_then_is_refused(
    primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A plain task (no PeriodicTask) ran at once "without its duplicate check": after a
    # failover that lost its start, a copy of the same tick ran again.
    app = Celery("acked-plain", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url  # no replica at all
    app.conf.periodiq_replica_acks = 1
    app.conf.periodiq_replica_timeout = 0.2
    bodies: list[int] = []

    @app.task(name="proj.plain_acked", shared=False)
    def plain_acked(tick: int) -> None:
        bodies.append(tick)

    install(app)
    api = periodiq(app)
    api.add("plain-acked", "proj.plain_acked", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))
    expires = api.store.now_ms() + 1500  # on the Redis clock, as the beat sets it
    headers = {HEADER_ENTRY: "plain-acked", HEADER_TICK: tick, HEADER_EXPIRES: expires}

    began = time.monotonic()
    refused = plain_acked.apply(args=[tick], headers=headers)
    waited = time.monotonic() - began

    assert bodies == []
    assert refused.state == "IGNORED"
    assert 1.3 < waited < 5, waited  # until its expiry, not one replica timeout
    assert "without its duplicate check" not in caplog.text
    last = api.history("plain-acked", limit=1)[0]
    assert last.kind == "revoked"
    assert "when its tick expired: it is not run" in last.fields.get("error", "")
    assert api.get("plain-acked").state["last_status"] == "revoked"
    api.store.client.close()


def test_a_begin_sent_again_with_its_token_writes_its_start_again_for_the_replicas(
    tmp_path: Path, primary: LocalRedis, broker_url: str
) -> None:
    # A begin whose reply was lost is sent again on another connection (one that has
    # written nothing): WAIT there counts nothing unless the begin writes again.
    replica = synced_replica(tmp_path, primary)
    app, _, _ = acked_app(primary, broker_url, "acked-resent")
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))
    start = RunStart(
        task_id="same-id", tick_ms=tick, min_gap_ms=0, overlap="skip", ttl_ms=60_000,
        retries=0, host="h", history_length=10, attempt="a1",
    )  # fmt: skip
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)  # connected, but it acknowledges nothing
    try:
        with pytest.raises(ReplicasBehindError):
            api.store.scripts.begin("acked", start)
        fresh = acked_app(primary, broker_url, "acked-resent")[0]  # another client
        with pytest.raises(ReplicasBehindError, match="0 of the 1 replicas required"):
            periodiq(fresh).store.scripts.begin("acked", start)  # its reply was lost
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    patient = acked_app(primary, broker_url, "acked-resent")[0]  # a third client
    patient.conf.periodiq_replica_timeout = 5  # the replica catches up, on a loaded machine too
    again = periodiq(patient).store.scripts.begin("acked", start)  # now a replica has it

    assert again.outcome == "started"
    assert api.get("acked").counters == {"started": 1}
    replica_client = redis.Redis(port=replica.port, decode_responses=True)
    assert '"a1"' in (replica_client.hget(api.store.keys.of("acked").state, "acked") or "")
    replica_client.close()
    for client in (fresh, patient):
        periodiq(client).store.client.close()
    replica.close()
    api.store.client.close()


def test_a_begin_sent_again_with_its_token_is_its_own_and_writes_its_start_again(
    primary: LocalRedis, broker_url: str
) -> None:
    app = Celery("resent", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url
    api = periodiq(app)
    api.add("resent", "proj.t", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))

    def start(attempt: str) -> RunStart:
        return RunStart(
            task_id="same-id", tick_ms=tick, min_gap_ms=0, overlap="skip", ttl_ms=60_000,
            retries=0, host="h", history_length=10, attempt=attempt,
        )  # fmt: skip

    first = api.store.scripts.begin("resent", start("a1"), tick)
    api.store.client.config_set("notify-keyspace-events", "Kh")
    events = api.store.client.pubsub(ignore_subscribe_messages=True)
    events.subscribe(f"__keyspace@0__:{api.store.keys.of('resent').state}")
    wait_for(lambda: events.get_message(timeout=0.1) is None and events.subscribed, 5,
             "the subscription")  # fmt: skip
    again = api.store.scripts.begin("resent", start("a1"), tick + 5)  # its reply was lost
    written = events.get_message(timeout=2.0)
    events.close()
    copy = api.store.scripts.begin("resent", start("b2"), tick + 10)  # a re-published copy

    assert (first.outcome, again.outcome, copy.outcome) == ("started", "started", "duplicate")
    assert api.get("resent").counters == {"started": 1, "duplicate": 1}
    # written again (unchanged): a WAIT after it counts a write of its own connection
    assert written is not None
    assert written["data"] == "hset"
    api.store.client.close()


def start_of(attempt: str) -> RunStart:
    tick = to_ms(START + timedelta(seconds=60))
    return RunStart(
        task_id="same-id", tick_ms=tick, min_gap_ms=0, overlap="skip", ttl_ms=60_000,
        retries=0, host="h", history_length=10, attempt=attempt,
    )  # fmt: skip


def test_a_start_waits_for_every_attached_replica_however_few_replica_acks_asks_for(
    tmp_path: Path, primary: LocalRedis, broker_url: str
) -> None:
    # WAIT 1 would be answered by either replica; a failover may promote the other one
    # (tests/test_failover_promotion.py), so both must have the start.
    with (
        replica_of(tmp_path, primary, "answering"),
        replica_of(tmp_path, primary, "lagging") as lagging,
    ):
        wait_for(lambda: in_sync(primary, replicas=2), 30, "both replicas to sync")
        app, _, _ = acked_app(primary, broker_url, "acked-every-replica")  # replica acks 1
        app.conf.periodiq_replica_timeout = 2  # time enough for the answering one, loaded
        api = periodiq(app)
        api.add("acked", "proj.acked", every=60, start_at=START)
        assert lagging.pid is not None
        os.kill(lagging.pid, signal.SIGSTOP)  # attached, but it acknowledges nothing
        try:
            with pytest.raises(ReplicasBehindError, match="1 of the 2 replicas required"):
                api.store.scripts.begin("acked", start_of("a1"))
        finally:
            os.kill(lagging.pid, signal.SIGCONT)
        again = api.store.scripts.begin("acked", start_of("a1"))  # written again: both have it

        assert again.outcome == "started"
        assert api.get("acked").counters == {"started": 1}
        api.store.client.close()


def test_a_redis_user_without_info_waits_for_replica_acks_replicas_and_is_told_why(
    tmp_path: Path, primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with replica_of(tmp_path, primary):
        wait_for(lambda: in_sync(primary), 30, "the replica to sync")
        admin = redis.Redis(port=primary.port)
        admin.acl_setuser("runner", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                          commands=["+@all", "-info"])  # fmt: skip
        admin.close()
        app, _, _ = acked_app(primary, broker_url, "acked-no-info")
        app.conf.periodiq_redis_url = f"redis://runner:pw@127.0.0.1:{primary.port}/0"
        app.conf.periodiq_replica_timeout = 2  # time enough for the replica, loaded
        api = periodiq(app)
        api.add("acked", "proj.acked", every=60, start_at=START)

        started = api.store.scripts.begin("acked", start_of("a1"))

        assert started.outcome == "started"  # the one replica acks 1 asks for has it
        assert "INFO replication is refused (grant +info to this Redis user)" in caplog.text
        api.store.client.close()


@pytest.mark.parametrize(
    ("acks", "status", "words"),
    [
        (0, "warn", ["1 replica, and periodiq_replica_acks = 0", "run a tick twice"]),
        (1, "ok", ["wait for every replica attached (the primary has 1)"]),
        (2, "fail", ["periodiq_replica_acks = 2, but the primary has 1 replica attached"]),
    ],
)
def test_doctor_says_what_replica_acks_can_count_on(
    tmp_path: Path, primary: LocalRedis, broker_url: str, acks: int, status: str, words: list[str]
) -> None:
    with replica_of(tmp_path, primary):
        wait_for(lambda: in_sync(primary), 30, "the replica to sync")
        app = Celery("acked-doctor", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = primary.url
        app.conf.periodiq_replica_acks = acks
        api = periodiq(app)

        checks = api.diagnose()

        assert [check.name for check in checks[:2]] == ["redis", "replicas"]
        assert checks[1].status == status
        assert all(word in checks[1].detail for word in words), checks[1].detail
        api.store.client.close()


def test_doctor_says_nothing_of_replicas_without_replicas_or_replica_acks(
    primary: LocalRedis, broker_url: str
) -> None:
    app = Celery("alone-doctor", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url

    names = [check.name for check in periodiq(app).diagnose()]

    assert "replicas" not in names
