"""The schedule on a real Redis Cluster: three masters with a replica each, on loopback.

Partitions spread the keys over every master; every Lua script runs there (each
touches one slot, all its keys in KEYS); and beats and a worker carry on across a
master killed with SIGKILL while its replica takes over, with replica acks running
no tick twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.errors import ConfigurationError, StoreUnavailableError
from celery_periodiq.localredis import LocalRedis, LocalRedisCluster
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from tests.processes import cluster, wait_for
from tests.test_cli import free_port

pytestmark = pytest.mark.slow

START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisCluster]:
    """Three masters and three replicas, formed once for this module's tests."""
    with LocalRedisCluster(tmp_path_factory.mktemp("cluster")) as formed:
        yield formed


@pytest.fixture
def cluster_api(redis_cluster: LocalRedisCluster, broker_url: str) -> Iterator[Periodiq]:
    app = Celery(f"clustered-{time.monotonic_ns()}", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_cluster.url
    app.conf.periodiq_redis_cluster = True
    api = periodiq(app)
    yield api
    api.delete_owner("tests")
    api.store.client.close()


def keys_per_master(redis_cluster: LocalRedisCluster, prefix: str) -> dict[int, int]:
    counts = {}
    for port in redis_cluster.master_ports():
        client = redis.Redis(port=port, decode_responses=True)
        counts[port] = sum(1 for _ in client.scan_iter(match=f"{{{prefix}*"))
        client.close()
    return counts


def test_partitions_spread_the_schedule_over_every_master(
    cluster_api: Periodiq, redis_cluster: LocalRedisCluster
) -> None:
    for n in range(64):
        cluster_api.add(f"tenant-{n}", "proj.t", every=60, owner="tests")

    counts = keys_per_master(redis_cluster, cluster_api.settings.key_prefix)

    assert len(counts) == 3
    assert all(count > 0 for count in counts.values()), counts
    assert len(cluster_api.list(owner="tests")) == 64


def test_doctor_counts_the_replicas_of_every_master_for_replica_acks(
    redis_cluster: LocalRedisCluster, broker_url: str
) -> None:
    def report(acks: int) -> tuple[str, str] | None:
        app = Celery(f"acks-{acks}", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_cluster.url
        app.conf.periodiq_redis_cluster = True
        app.conf.periodiq_replica_acks = acks
        store = periodiq(app).store
        try:
            return store.replica_report()
        finally:
            store.client.close()

    asking_two, asking_one = report(2), report(1)

    assert asking_two == (
        "fail",
        "periodiq_replica_acks = 2, but a primary has 1 replica attached: nothing is "
        "published and runs wait until 2 are",
    )
    assert asking_one is not None
    assert asking_one[0] == "ok"
    assert "(at least 1 per primary)" in asking_one[1]


def test_every_script_runs_on_the_cluster(cluster_api: Periodiq) -> None:
    api, store = cluster_api, cluster_api.store
    app = api.app

    @app.task(base=PeriodicTask, name="proj.guarded")
    def guarded() -> None:
        """A guarded task, run eagerly: begin.lua and finish.lua."""

    api.add("nightly", "proj.guarded", every=60, start_at=START, owner="tests")  # put.lua
    entry = api.get("nightly").entry
    assert entry is not None
    store.put("update", [entry], now_ms=to_ms(START))  # put.lua, update
    api.pause("nightly", note="maintenance")  # pause.lua
    assert api.get("nightly").paused
    api.resume("nightly")  # pause.lua, resume
    store.put("update", [entry], now_ms=to_ms(START))
    pulse = store.scripts.heartbeat("cluster-beat", "start", 10_000, {"host": "h"})  # beat.lua
    store.alive("cluster-beat", pulse.now_ms + 10_000, pulse.now_ms)
    dispatcher = Dispatcher(app, store, "cluster-beat")
    first_tick = START + timedelta(seconds=60)
    done = dispatcher.dispatch(now_ms=to_ms(first_tick))  # claim.lua, ack.lua
    result = guarded.apply(  # begin.lua, finish.lua
        task_id="run-1", headers={HEADER_ENTRY: "nightly", HEADER_TICK: to_ms(first_tick)}
    )
    task_id = api.trigger("nightly")  # record.lua
    kinds = [event.kind for event in reversed(api.history("nightly", limit=10))]
    removed = store.remove(["nightly"])  # remove.lua
    store.scripts.heartbeat("cluster-beat", "stop", 0, {})  # beat.lua, stop

    assert pulse.flag is True
    assert done.claimed == 1
    assert result.state == "SUCCESS"
    assert kinds == ["enqueued", "started", "succeeded", "triggered"]
    assert task_id
    assert removed == ["nightly"]
    assert api.list(owner="tests") == []


def test_an_entry_lost_from_the_due_set_is_found_and_scheduled_again_on_the_cluster(
    cluster_api: Periodiq,
) -> None:
    # doctor's "due" check reads each partition in one MULTI, and index.lua gets the due
    # set and the ticks: on a cluster both must name keys of one slot only
    api, store = cluster_api, cluster_api.store
    names = [f"lost-{n}" for n in range(12)]
    for name in names:
        api.add(name, "proj.t", every=60, owner="tests")
    lost = names[::3]
    for name in lost:
        store.client.zrem(store.keys.of(name).due, name)

    (check,) = [check for check in api.diagnose() if check.name == "due"]
    api.reindex()
    (after,) = [check for check in api.diagnose() if check.name == "due"]

    assert check.status == "fail"
    assert check.detail.startswith(f"{len(lost)} entries are neither due nor in flight")
    assert all(name in check.detail for name in lost[:4])
    assert after.status == "ok"
    assert all(store.client.zscore(store.keys.of(name).due, name) for name in names)


def test_history_and_counters_on_the_cluster(cluster_api: Periodiq) -> None:
    api, store, app = cluster_api, cluster_api.store, cluster_api.app

    @app.task(base=PeriodicTask, name="proj.counted")
    def counted() -> None:
        """A guarded task."""

    api.add("counted", "proj.counted", every=60, start_at=START, owner="tests")
    entry = api.get("counted").entry
    assert entry is not None
    store.put("update", [entry], now_ms=to_ms(START))
    tick = START + timedelta(seconds=60)
    Dispatcher(app, store, "cluster-beat-2").dispatch(now_ms=to_ms(tick))
    counted.apply(task_id="run-1", headers={HEADER_ENTRY: "counted", HEADER_TICK: to_ms(tick)})
    counted.apply(task_id="run-2", headers={HEADER_ENTRY: "counted", HEADER_TICK: to_ms(tick)})

    kinds = [event.kind for event in reversed(api.history("counted", limit=10))]
    assert kinds == ["enqueued", "started", "succeeded", "duplicate"]
    assert api.get("counted").counters == {
        "enqueued": 1, "started": 1, "succeeded": 1, "duplicate": 1
    }  # fmt: skip


def test_a_url_of_several_nodes_connects_through_any_that_answers(
    redis_cluster: LocalRedisCluster, broker_url: str
) -> None:
    app = Celery("several-nodes", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_cluster = True
    app.conf.periodiq_redis_url = f"redis://127.0.0.1:{free_port()};{redis_cluster.urls}"
    api = periodiq(app)

    api.add("reached", "proj.t", every=60, owner="tests")

    assert [item.name for item in api.list(owner="tests")] == ["reached"]
    api.delete_owner("tests")
    api.store.client.close()


def test_with_no_node_answering_the_api_is_made_and_its_calls_fail_as_unreachable(
    broker_url: str,
) -> None:
    app = Celery("no-node", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_cluster = True
    app.conf.periodiq_redis_url = f"redis://127.0.0.1:{free_port()}"
    api = periodiq(app)  # made without connecting, as a beat or worker is at start

    with pytest.raises(StoreUnavailableError, match="is unreachable: Redis Cluster cannot"):
        api.list()


def test_several_urls_need_a_cluster() -> None:
    app = Celery("several-urls", set_as_current=False)
    app.conf.periodiq_redis_url = "redis://:pw@h1:7000;redis://h2:7001"

    with pytest.raises(ConfigurationError) as caught:
        periodiq(app)

    assert "only with periodiq_redis_cluster" in str(caught.value)
    assert "pw" not in str(caught.value)


def test_beats_and_a_worker_carry_on_across_a_killed_master_running_no_tick_twice(
    tmp_path: Path, redis_cluster: LocalRedisCluster
) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        LocalRedis(tmp_path / "runs") as runs,
        cluster(tmp_path, redis_cluster.urls, broker.url, TEST_REDIS_CLUSTER="1",
                TEST_RUNS_URL=runs.url, TEST_REPLICA_ACKS="1") as running,
    ):  # fmt: skip
        names = [f"every-second-{n}" for n in range(12)]
        api = running.firing(names, task="guarded_record")

        victim = redis_cluster.master_ports()[0]  # the master of slots 0-5460
        on_victim = [
            name
            for name in names
            if api.store.client.keyslot(api.store.keys.of(name).entries) <= 5460
        ]
        assert on_victim, "no entry lives on the master this test kills"
        redis_cluster.node_on(victim).stop(kill=True)
        killed_at = time.time()
        wait_for(
            lambda: (
                victim not in redis_cluster.master_ports()
                and len(redis_cluster.master_ports()) == 3
            ),
            30,
            "the replica to take over",
        )
        # Restarted (as a process manager would), the node rejoins as the new master's
        # replica: until then that master has none to acknowledge its writes, and with
        # periodiq_replica_acks = 1 its entries wait.
        redis_cluster.node_on(victim).start()
        wait_for(
            lambda: all(any(r["at"] > killed_at + 1 for r in running.runs_of(name))
                        for name in names),
            60, "every entry to fire again after the failover",
        )  # fmt: skip
        failed_over = time.time() - killed_at

        assert running.twice() == []
        assert all(process.running for process in running.processes), running.logs()
        assert failed_over < 30
        # the beats did meet the failover
        assert any("Redis unreachable" in process.output() for process in running.processes)
        api.delete_owner("tests")
        api.store.client.close()
