"""Maintenance windows on a real Redis Cluster (three masters): the windows' key lives in
the schedule's own slot, and the beat's claim/settle path (real Lua, an injected clock)
skips and defers there as on one Redis; the audit reads every partition's trails and the
windows' there."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis.cluster import LocalRedisCluster
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import to_ms
from tests.processes import wait_for
from tests.test_cluster import redis_cluster  # noqa: F401  (the module's cluster)
from tests.test_windows import T0, tick_of, utc

pytestmark = pytest.mark.slow


@pytest.fixture
def clustered(redis_cluster: LocalRedisCluster) -> Iterator[Celery]:  # noqa: F811
    app = Celery(f"windows-{time.monotonic_ns()}", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_cluster.url
    app.conf.periodiq_redis_cluster = True
    yield app
    periodiq(app).store.client.close()


def test_windows_skip_and_defer_on_a_redis_cluster(clustered: Celery) -> None:
    api = periodiq(clustered)
    store = api.store
    names = [f"w{n}" for n in range(6)]  # spread over the cluster's partitions
    entries = [build_entry(name, "A", every=60, start_at=T0 + timedelta(seconds=30),
                           owner="skipped" if n % 2 else "deferred")
               for n, name in enumerate(names)]  # fmt: skip
    store.put("add", entries, now_ms=to_ms(T0))
    api.add_window("s", scope="owner:skipped", start="2027-01-01T10:02:00Z",
                   end="2027-01-01T10:04:00Z")  # fmt: skip
    api.add_window("d", scope="owner:deferred", policy="defer", start="2027-01-01T10:02:00Z",
                   end="2027-01-01T10:04:45Z")  # fmt: skip
    assert store.keys.windows == "{" + store.keys.prefix + "}:windows"
    dispatcher = Dispatcher(clustered, store, "cluster-beat")
    sent: dict[str, list[tuple[str, int]]] = {name: [] for name in names}

    def beat(hhmmss: str) -> None:
        dispatcher.dispatch(now_ms=to_ms(utc(f"2027-01-01T{hhmmss}Z")))
        with clustered.connection_for_read() as connection:
            queue = connection.SimpleQueue("celery")
            while queue.qsize():
                headers: dict[str, Any] = queue.get(timeout=1).headers
                sent[headers["periodiq_entry"]].append(
                    (tick_of(headers), int(headers["periodiq_missed"]))
                )
            queue.close()

    for hhmmss in ("10:01:30", "10:02:30", "10:03:30", "10:04:30", "10:04:45", "10:05:30"):
        beat(hhmmss)

    for n, name in enumerate(names):
        ticks = [tick for tick, _ in sent[name]]
        if n % 2:  # skipped: nothing inside, on time after
            assert ticks == ["10:01:30", "10:04:30", "10:05:30"], name
        else:  # deferred: one run at the end for three
            assert sent[name][1:] == [("10:04:30", 3), ("10:05:30", 1)], name


def test_the_audit_reads_each_partitions_index_and_the_windows_on_a_redis_cluster(
    clustered: Celery,
) -> None:
    api = periodiq(clustered)
    names = [f"audited-{n}" for n in range(8)]  # spread over the cluster's partitions
    for name in names:
        api.add(name, "A", every=60, actor="alice")

    def later() -> None:  # the next record a millisecond after the last
        after = api.now() + timedelta(milliseconds=2)
        wait_for(lambda: api.now() > after, 5, "the Redis clock to move on")

    later()
    api.add_window("audited-window", start="2030-01-01T00:00:00Z", end="2030-01-02T00:00:00Z",
                   actor="bob")  # fmt: skip
    later()
    api.pause("audited-3", actor="carol")

    newest = [(r.name, r.action, r.actor) for r in api.audit(limit=2)]
    assert newest == [("audited-3", "pause", "carol"), ("audited-window", "add_window", "bob")]
    every = {r.name for r in api.audit(limit=None) if r.name.startswith("audited")}
    assert every == {*names, "audited-window"}
    api.reindex()  # the trails' index written afresh, the same read
    assert [(r.name, r.action, r.actor) for r in api.audit(limit=2)] == newest
