"""Containment with real processes: damaged entries, apps sharing a Redis, faults.

Real ``celery beat`` and ``celery worker`` processes against private Redis
servers: one entry's damaged keys leave the others on their cadence; two apps on
one Redis with no periodiq settings never touch each other; and the beat outlives
connections cut at random moments, a reconcile that fails after Redis returns,
and a broker that is down when @reboot entries are owed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.keys import Keys
from tests.processes import Cluster, api_for, cluster, wait_for
from tests.proxy import Proxy
from tests.test_beat_cluster import ticks_of

pytestmark = pytest.mark.slow

HEALTHY = ["healthy-1", "healthy-2", "healthy-3"]


def _wrong_type(kind: str) -> Callable[[redis.Redis, Keys, str], None]:
    def damage(client: redis.Redis, keys: Keys, name: str) -> None:
        key = getattr(keys.of(name), kind)(name)
        client.delete(key)
        client.set(key, "written by something else")

    return damage


DAMAGE: dict[str, Callable[[redis.Redis, Keys, str], None]] = {
    "v-history": _wrong_type("history"),
    "v-failures": _wrong_type("failures"),
    "v-garbage": lambda client, keys, name: client.hset(keys.of(name).entries, name, "{not"),
    "v-nostate": lambda client, keys, name: client.hdel(keys.of(name).state, name),
    "v-badstate": lambda client, keys, name: client.hset(keys.of(name).state, name, "{not"),
    "v-nodef": lambda client, keys, name: client.hdel(keys.of(name).entries, name),
}  # fmt: skip
REBUILT = ("v-nostate", "v-badstate")


def starts(running: Cluster, name: str, after: float = 0.0) -> list[float]:
    return sorted(
        run["at"]
        for run in running.runs()
        if run.get("entry") == name and run.get("kind") == "start" and run["at"] > after
    )


def largest_gap(moments: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(moments)), default=0.0)


def test_damaged_entries_leave_the_others_on_a_one_second_cadence(
    tmp_path: Path, redis_url: str, broker_url: str, redis_client: redis.Redis
) -> None:
    with cluster(tmp_path, redis_url, broker_url, app="guarded_app", TEST_DECLARE="1") as running:
        api = api_for(redis_url, broker_url, "guarded_app")
        keys = api.store.keys
        for name in [*HEALTHY, *DAMAGE]:
            api.add(name, "plain", every=1, timebox=None)
        worker = running.worker()
        beats = [running.beat("beat-1"), running.beat("beat-2")]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        # a beat that starts reconciles in full a lease later (it writes declared entries
        # again, which repairs them): the damage comes after that
        wait_for(lambda: all(" declared entries {" in beat.output() for beat in beats), 30,
                 "both beats to reconcile")  # fmt: skip
        every = [*HEALTHY, *DAMAGE, "declared-plain"]
        wait_for(lambda: all(starts(running, n) for n in every), 30, "a run of every entry")

        damaged_at = time.time()
        for name, damage in DAMAGE.items():
            damage(redis_client, keys, name)
        _wrong_type("history")(redis_client, keys, "declared-plain")
        try:
            wait_for(
                lambda: all(starts(running, n, damaged_at + 8) for n in [*HEALTHY, *REBUILT]),
                30, "eight more seconds of runs",
            )  # fmt: skip
        except AssertionError as late:
            ran = {n: starts(running, n, damaged_at - 1.5) for n in [*HEALTHY, *REBUILT]}
            raise AssertionError(f"{late}: {damaged_at=}, {ran}\n{running.logs()}") from None

        for name in HEALTHY:
            moments = starts(running, name, damaged_at - 1.5)
            assert largest_gap(moments) <= 2.5, (name, moments, running.logs())
            assert len(moments) >= 8
        for name in REBUILT:
            assert len(starts(running, name, damaged_at + 1)) >= 5  # rebuilt, still firing
        listed = running.cli("list", "--json")
        assert listed.returncode == 0, listed.stderr
        states = {item["name"]: item["state"] for item in json.loads(listed.stdout)}
        quarantined = sorted(set(DAMAGE) - set(REBUILT) | {"declared-plain"})
        assert sorted(n for n, state in states.items() if state == "quarantined") == quarantined
        assert {states[name] for name in [*HEALTHY, *REBUILT]} <= {"active", "running"}

        refused = running.cli("delete", "declared-plain", "--yes")
        assert refused.returncode == 2
        assert "declared in code" in refused.stderr
        for name in quarantined:
            deleted = running.cli("delete", name, "--force", "--yes")
            assert deleted.returncode == 0, deleted.stderr
            assert redis_client.keys(f"*:{name}") == [], name
            assert not redis_client.hexists(keys.of(name).state, name)
        assert sum(redis_client.hlen(part.quarantine) for part in keys.all()) == 0
        assert "Traceback" not in running.logs()
        api.store.client.close()


def test_an_entry_whose_message_cannot_be_encoded_costs_a_one_second_entry_no_tick(
    tmp_path: Path, redis_url: str, broker_url: str, redis_client: redis.Redis
) -> None:
    # Issue 20, case 2: an entry whose options name a serializer kombu does not have
    # (written into Redis by something else: add() refuses it) made the beat log "broker
    # unreachable" every lease and keep the whole chunk in flight; a healthy 1 s entry
    # on the same beat ran 12 of 20 ticks.
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("healthy", "record", every=1)
        api.add("bad", "record", every=1)
        worker = running.worker()
        beat = running.beat()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: ticks_of(running, "healthy") and ticks_of(running, "bad"), 30, "runs")
        part = api.store.keys.of("bad")
        definition = json.loads(redis_client.hget(part.entries, "bad") or "{}")
        redis_client.hset(part.entries, "bad", json.dumps(
            {**definition, "options": {"serializer": "nosuch"}}
        ))  # fmt: skip
        damaged_at = time.time()

        wait_for(lambda: time.time() > damaged_at + 20, 21, "twenty seconds to pass")
        with contextlib.suppress(AssertionError):  # what is missing by then is reported below
            wait_for(lambda: max(ticks_of(running, "healthy")) >= (damaged_at + 19) * 1000, 10,
                     "the healthy entry's run of the last tick")  # fmt: skip

        ticks = set(ticks_of(running, "healthy"))
        # one tick of slack at each edge of the 20 s
        every = range((int(damaged_at) + 2) * 1000, (int(damaged_at) + 19) * 1000 + 1, 1000)
        missed = [tick for tick in every if tick not in ticks]
        assert missed == [], (f"{len(missed)} of {len(every)} ticks missed", running.logs())
        assert api.get("bad").status == "quarantined"
        assert "No encoder installed for nosuch" in (api.get("bad").invalid or "")
        output = beat.output()
        assert "broker unreachable" not in output
        assert "entry 'bad' quarantined" in output
        assert "Traceback" not in output
        api.store.client.close()


def test_two_apps_on_one_redis_with_default_settings_never_touch_each_other(
    tmp_path: Path, redis_server: LocalRedis, redis_client: redis.Redis
) -> None:
    shared = redis_server.url  # broker and schedule of both apps: no periodiq settings
    with cluster(tmp_path, shared, shared, app="shared_app") as running:
        for name in ("a", "b"):
            running.worker(f"worker-{name}", TEST_APP_NAME=name)
            running.beat(f"beat-{name}", TEST_APP_NAME=name)
        wait_for(lambda: all(redis_client.llen(f"runs:{name}") >= 20 for name in ("a", "b")),
                 45, "20 runs of each app", interval=0.5)  # fmt: skip # every second each

        runs = {
            name: [json.loads(raw) for raw in redis_client.lrange(f"runs:{name}", 0, -1)]
            for name in ("a", "b")
        }
        for name in ("a", "b"):
            assert len(runs[name]) >= 20, running.logs()
            assert {run["entry"] for run in runs[name]} == {"heartbeat"}
            listed = running.cli("list", "--json", TEST_APP_NAME=name)
            assert listed.returncode == 0, listed.stderr
            assert [(item["name"], item["task"]) for item in json.loads(listed.stdout)] == [
                ("heartbeat", f"{name}.record")
            ]
        logs = running.logs()
        assert "unregistered" not in logs.lower()
        assert "removed" not in logs
        for name in ("a", "b"):
            entries = Keys(f"periodiq:{name}", 16).of("heartbeat").entries
            assert redis_client.hkeys(entries) == ["heartbeat"]


def test_the_beat_outlives_connections_to_redis_cut_at_random_moments(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str
) -> None:
    chance = random.Random(9)
    schedule = {"declared": {"task": "record", "every": 1}}
    with (
        Proxy(redis_server.port) as proxy,
        cluster(tmp_path, redis_server.url, broker_url, beat_schedule=schedule) as running,
    ):
        api = api_for(redis_server.url, broker_url)
        api.add("steady", "record", every=1)
        worker = running.worker()
        beat = running.beat(TEST_REDIS_URL=proxy.url)  # only the beat goes through the proxy
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        for round_ in range(12):
            seen = len(running.runs())
            # polled at a random pace, so each cut falls at another moment of the beat's pass
            pace = chance.uniform(0.01, 0.4)
            wait_for(lambda seen=seen: len(running.runs()) > seen, 30, "the next run", pace)
            if round_ % 4 == 3:
                proxy.refuse()
                wait_for(lambda: "Redis unreachable" in beat.output(), 30, "the beat to notice")
                proxy.accept()
            else:
                proxy.cut()
        faults_over = time.time()

        wait_for(
            lambda: len([r for r in running.runs() if r["at"] > faults_over + 3]) >= 4,
            30, "runs after the faults",
        )  # fmt: skip
        assert beat.running
        assert proxy.cuts >= 12
        ticks = [(run["entry"], run["tick"]) for run in running.runs()]
        assert len(ticks) == len(set(ticks)), "a tick ran twice"
        output = beat.output()
        assert "failed; retrying" not in output  # no failure but Redis's: nothing unexpected
        assert "Traceback" not in output
        api.store.client.close()


def test_a_reconcile_that_fails_after_redis_returns_does_not_end_the_beat(
    tmp_path: Path, redis_server: LocalRedis, broker_url: str, redis_client: redis.Redis
) -> None:
    schedule = {"declared": {"task": "record", "every": 1}}
    with cluster(tmp_path, redis_server.url, broker_url, beat_schedule=schedule) as running:
        api = api_for(redis_server.url, broker_url)
        api.add("steady", "record", every=1)
        running.worker()
        beat = running.beat()
        wait_for(lambda: len(running.runs()) >= 3, 60, "the first runs")
        # Something else writes a string where periodiq keeps its set of declared names;
        # only reconciliation reads it, and a beat reconciles after Redis comes back.
        declared = api.store.keys.of("declared").declared
        redis_client.delete(declared)
        redis_client.set(declared, "written by something else")
        redis_client.bgrewriteaof()
        wait_for(lambda: redis_client.info("persistence")["aof_rewrite_in_progress"] == 0, 10,
                 "the append-only file to hold the damage")  # fmt: skip
        redis_server.stop(kill=True)
        wait_for(lambda: "Redis unreachable" in beat.output(), 30, "the beat to notice")
        down = time.monotonic()  # its heartbeat noticed first; its passes (every second) too
        wait_for(lambda: time.monotonic() > down + 3, 4, "three seconds of outage")
        redis_server.restart()
        refused = re.compile(r"reconciling the declared entries failed: Redis refused a "
                             r"command: .*WRONGTYPE")  # fmt: skip
        wait_for(lambda: refused.search(beat.output()), 30, "the failed reconcile")
        back = time.time()

        wait_for(
            lambda: len([r for r in running.runs() if r["at"] > back and r["entry"] == "steady"])
            >= 3, 30, "runs after Redis returned",
        )  # fmt: skip
        assert beat.running
        api.store.client.close()


def test_reboot_entries_owed_while_the_broker_is_down_are_sent_when_it_returns(
    tmp_path: Path, redis_url: str
) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url) as running,
    ):
        api = api_for(redis_url, broker.url)
        api.add("on-reboot", "record", cron="@reboot")
        broker.stop(kill=True)
        beat = running.beat()
        wait_for(
            lambda: "@reboot entries are sent when it returns" in beat.output(), 60,
            "the beat to find the broker down",
        )  # fmt: skip
        broker.restart()
        running.worker()
        wait_for(lambda: running.runs(), 60, "the @reboot run")
        wait_for(lambda: "@reboot entries sent: ['on-reboot']" in beat.output(), 10, "log")

        assert [run["entry"] for run in running.runs()] == ["on-reboot"]
        assert beat.running
        # a plain task's run is recorded too (the workers' duplicate check)
        wait_for(lambda: api.get("on-reboot").counters.get("succeeded"), 10, "its end")
        assert api.get("on-reboot").counters == {"enqueued": 1, "started": 1, "succeeded": 1}
        api.store.client.close()
