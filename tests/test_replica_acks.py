"""periodiq_replica_acks: a beat publishes only claims a replica has, and a worker runs
a body only once a replica has its start (``WAIT``).

A real primary and a real replica on loopback. With the replica gone the claims are
refused (ReplicasBehindError) and nothing reaches the broker; with it back, the
claims are taken over after their lease and published, each tick once. A run whose
start no replica acknowledged is not run, and says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.config import Settings
from celery_periodiq.dispatch import Dispatcher
from celery_periodiq.errors import ConfigurationError, ReplicasBehindError
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.plan import to_ms
from celery_periodiq.publish import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.scripts import RunStart
from tests.processes import wait_for

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[LocalRedis]:
    with LocalRedis(tmp_path / "primary", persist=True) as server:
        yield server


def replica_of(tmp_path: Path, primary: LocalRedis) -> LocalRedis:
    return LocalRedis(
        tmp_path / "replica", extra_args=["--replicaof", "127.0.0.1", str(primary.port)]
    )


def in_sync(primary: LocalRedis) -> bool:
    client = redis.Redis(port=primary.port, decode_responses=True)
    try:
        info = client.info("replication")
    finally:
        client.close()
    return info.get("connected_slaves") == 1 and info.get("slave0", {}).get("state") == "online"


def test_with_a_replica_missing_no_claim_is_published_and_with_it_back_each_once(
    tmp_path: Path, primary: LocalRedis, broker_url: str
) -> None:
    replica = replica_of(tmp_path, primary).start()
    wait_for(lambda: in_sync(primary), 30, "the replica to sync")
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


def test_a_run_starts_only_once_a_replica_has_its_start_and_is_refused_without_one(
    tmp_path: Path, primary: LocalRedis, broker_url: str
) -> None:
    replica = replica_of(tmp_path, primary).start()
    wait_for(lambda: in_sync(primary), 30, "the replica to sync")
    app = Celery("acked-runs", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = primary.url
    app.conf.periodiq_replica_acks = 1
    app.conf.periodiq_replica_timeout = 0.2
    bodies: list[int] = []

    @app.task(base=PeriodicTask, name="proj.acked")
    def acked(tick: int) -> None:
        bodies.append(tick)

    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    api.store.client.script_flush()  # the first begin meets NOSCRIPT and loads it
    first, second = to_ms(START + timedelta(seconds=60)), to_ms(START + timedelta(seconds=120))

    ran = acked.apply(args=[first], headers={HEADER_ENTRY: "acked", HEADER_TICK: first})
    replica.stop(kill=True)
    refused = acked.apply(args=[second], headers={HEADER_ENTRY: "acked", HEADER_TICK: second})

    assert ran.state == "SUCCESS"
    assert bodies == [first]  # the second body never ran
    assert refused.state == "IGNORED"
    last = api.history("acked", limit=1)[0]
    assert last.kind == "revoked"
    assert "0 of the 1 replicas required" in last.fields.get("error", "")
    assert api.get("acked").running is None  # its marker is cleared
    replica.close()
    api.store.client.close()


def test_a_begin_sent_again_with_its_token_is_its_own_not_a_duplicate(
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
    again = api.store.scripts.begin("resent", start("a1"), tick + 5)  # its reply was lost
    copy = api.store.scripts.begin("resent", start("b2"), tick + 10)  # a re-published copy

    assert (first.outcome, again.outcome, copy.outcome) == ("started", "started", "duplicate")
    assert api.get("resent").counters == {"started": 1, "duplicate": 1}
    api.store.client.close()
