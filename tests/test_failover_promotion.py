"""Which replica a failover promotes, with ``periodiq_replica_acks``.

``WAIT N`` says that N replicas have a write; it does not say which, and Sentinel (or a
Redis Cluster election) does not promote "the one that has it": it promotes by
``replica-priority``, then by the replication offset it last read from each replica's
INFO (which can be seconds old), then by run id. On a loaded machine one replica lags:
the other acknowledges a run's start, the primary dies, the lagging one is promoted
without the start, and a copy of the tick runs again.

Here that interleaving is chosen, not hoped for: a real primary, two replicas and three
sentinels on loopback; one replica is never promoted (``replica-priority 0``), the other
hears its primary through a proxy that stops delivering, so it stays attached to the
primary (as a lagging replica does) but never receives the start.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_periodiq import periodiq
from celery_periodiq.localredis import LocalRedis, LocalSentinel
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_EXPIRES, HEADER_TICK
from celery_periodiq.store.topology import replicas
from tests.processes import wait_for
from tests.proxy import Proxy
from tests.test_replica_acks import acked_app

MASTER = "mymaster"


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[LocalSentinel]:
    with LocalSentinel(tmp_path / "sentinel", master_name=MASTER) as running:
        yield running


def client_of(node: LocalRedis) -> Any:
    return redis.Redis(port=node.port, decode_responses=True, socket_timeout=5)


def replication_of(node: LocalRedis) -> dict[str, Any]:
    with client_of(node) as client:
        return client.info("replication")


def started_on(node: LocalRedis, state: str) -> bool:
    """Whether ``node`` has the start of the run "the-tick"."""
    with client_of(node) as client:
        return "the-tick" in (client.hget(state, "acked") or "")


def never_promoted(sentinel: LocalSentinel, node: LocalRedis) -> None:
    """Make ``node`` a replica Sentinel never promotes, and wait until every sentinel
    has read so (they read a replica's INFO every 10 s)."""
    with client_of(node) as client:
        client.config_set("replica-priority", 0)

    def seen() -> bool:
        for port in sentinel.sentinel_ports:
            watcher: Any = redis.Redis(port=port, decode_responses=True, socket_timeout=1)
            try:
                known = watcher.sentinel_slaves(MASTER)
            finally:
                watcher.close()
            if not any(r["port"] == node.port and r["slave-priority"] == 0 for r in known):
                return False
        return True

    wait_for(seen, 40, f"the sentinels to see replica {node.port} as never promoted")


def replicating_through(sentinel: LocalSentinel, node: LocalRedis, link: Proxy) -> None:
    """Make ``node`` replicate its primary through ``link``, and wait until it is attached
    (online) again. The sentinels would put it back on its primary's own address after
    their failover-timeout: it is made longer than this test."""
    for port in sentinel.sentinel_ports:
        watcher: Any = redis.Redis(port=port, decode_responses=True, socket_timeout=1)
        watcher.execute_command("SENTINEL", "SET", MASTER, "failover-timeout", 60000)
        watcher.close()
    with client_of(node) as client:
        client.replicaof("127.0.0.1", link.port)
    primary = sentinel.nodes[0]

    def attached() -> bool:
        info = replication_of(node)
        online = replicas(replication_of(primary), "online")
        return (
            info.get("master_port") == link.port
            and info.get("master_link_status") == "up"
            and len(online) == len(sentinel.nodes) - 1
        )

    wait_for(attached, 30, f"replica {node.port} to replicate through the proxy")


def test_a_failover_to_the_replica_that_lacks_a_runs_start_runs_its_tick_once(
    sentinel: LocalSentinel, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    primary, acknowledging, lagging = sentinel.nodes
    never_promoted(sentinel, acknowledging)
    app, acked, bodies = acked_app(sentinel.url, broker_url, "promoted", master_name=MASTER)
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60)
    now = api.store.now_ms()
    tick = now - now % 60_000
    message = {HEADER_ENTRY: "acked", HEADER_TICK: tick, HEADER_EXPIRES: now + 60_000}
    assert api.store.client.wait(2, 5000) == 2  # both replicas have the entry

    with Proxy(primary.port) as link:
        replicating_through(sentinel, lagging, link)
        link.drop_replies()  # attached, but it receives nothing more: it lags
        state = api.store.keys.of("acked").state
        taken_up = threading.Thread(
            target=lambda: acked.apply(args=[tick], task_id="the-tick", headers=message)
        )
        taken_up.start()  # a worker takes the tick up
        # WAIT 1 was answered (the body ran), or the run waits for the lagging replica
        wait_for(lambda: bodies or "run the-tick waits" in caplog.text, 30,
                 "the run to start or to wait for the replicas")  # fmt: skip
        wait_for(lambda: started_on(acknowledging, state), 10, "one replica to have the start")
        assert not started_on(lagging, state)  # and the other not
        sentinel.kill_primary()
        promoted = wait_for(lambda: sentinel.primary() not in (None, primary)
                            and sentinel.primary(), 30, "a promotion")  # fmt: skip
        assert promoted is lagging, "the sentinels promoted the replica chosen not to be"
        # the tick is published again (its claim or settlement was lost with the primary)
        acked.apply(args=[tick], task_id="the-tick", headers=message)
        taken_up.join(60)

    assert not taken_up.is_alive()
    assert bodies == [tick]  # once: not twice, not lost
    api.store.client.close()


def test_a_failover_to_the_replica_that_lacks_a_runs_refusal_records_the_refusal_there(
    sentinel: LocalSentinel, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the refusal was returned at once and its message let go while only the
    # primary had its record; the promoted replica knew nothing of the copy: lost silently.
    primary, acknowledging, lagging = sentinel.nodes
    never_promoted(sentinel, acknowledging)
    app, acked, bodies = acked_app(sentinel.url, broker_url, "refusal-promoted",
                                   master_name=MASTER)  # fmt: skip
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60)
    now = api.store.now_ms()
    tick = now - now % 60_000
    message = {HEADER_ENTRY: "acked", HEADER_TICK: tick, HEADER_EXPIRES: now + 60_000}
    assert acked.apply(args=[tick], task_id="the-tick", headers=message).state == "SUCCESS"
    assert api.store.client.wait(2, 5000) == 2  # both replicas have the run

    with Proxy(primary.port) as link:
        replicating_through(sentinel, lagging, link)
        link.drop_replies()  # attached, but it receives nothing more: it lags
        outcome: list[str] = []
        copy = threading.Thread(
            target=lambda: outcome.append(
                acked.apply(args=[tick], task_id="the-copy", headers=message).state
            )
        )
        copy.start()  # a worker takes up a copy of the tick: a duplicate
        wait_for(lambda: "run the-copy waits" in caplog.text or not copy.is_alive(), 30,
                 "the refused copy to wait for the replicas")  # fmt: skip
        assert copy.is_alive()  # its message is not let go while the lagging one lacks it
        sentinel.kill_primary()
        promoted = wait_for(lambda: sentinel.primary() not in (None, primary)
                            and sentinel.primary(), 30, "a promotion")  # fmt: skip
        assert promoted is lagging, "the sentinels promoted the replica chosen not to be"
        copy.join(60)

    assert not copy.is_alive()
    assert outcome == ["IGNORED"]
    assert bodies == [tick]  # once
    with client_of(lagging) as client:  # the new primary records why the copy did not run
        events = client.lrange(api.store.keys.of("acked").history("acked"), 0, -1)
    assert [event for event in events if '"duplicate"' in event and "the-copy" in event]
    api.store.client.close()
