"""What a beat does when it starts and stops: reconcile declarations, fire cluster events,
quarantine bad data; and nothing at all when Celery builds it lazily."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import Scheduler
from tests.processes import Cluster, api_for, cluster, wait_for
from tests.test_beat_cluster import ticks_of

pytestmark = pytest.mark.slow


def run_beat_once(
    running: Cluster, name: str, schedule: dict[str, Any], removes: str | None = None
) -> None:
    """Start a beat with ``schedule`` as its beat_schedule, let it reconcile (and remove
    ``removes``: a beat that stopped a moment ago keeps what it declared for its lease),
    stop it."""
    beat = running.beat(name, TEST_BEAT_SCHEDULE=json.dumps(schedule))
    wait_for(lambda: "reconciled" in beat.output(), 30, f"{name} to reconcile")
    if removes is not None:
        wait_for(lambda: f": {removes}" in beat.output(), 30, f"{name} to remove {removes}")
    beat.stop()


def test_redeploy_adds_updates_and_removes_declared_entries_and_leaves_runtime_ones(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("runtime-made", "record", every=86400, owner="tests")
        run_beat_once(running, "deploy1", {
            "kept": {"task": "record", "every": 86400},
            "changed": {"task": "record", "every": 60},
            "dropped": {"task": "record", "every": 60},
        })  # fmt: skip
        part = api.store.keys.of("kept")  # seven runs succeeded, as finish.lua counts them
        state = json.loads(api.store.client.hget(part.state, "kept"))
        state["n"] = {**state.get("n", {}), "succeeded": 7}
        api.store.client.hset(part.state, "kept", json.dumps(state))
        kept_before = api.get("kept").state
        runtime_before = api.get("runtime-made")

        run_beat_once(running, "deploy2", {
            "kept": {"task": "record", "every": 86400},
            "changed": {"task": "record", "every": 30},
            "new": {"task": "record", "every": 60},
        }, removes="dropped")  # fmt: skip
        names = {stored.name for stored in api.list()}
        kept, changed = api.get("kept"), api.get("changed")
    assert names == {"kept", "changed", "new", "runtime-made"}
    # unchanged: version, counters and next tick all kept; the new deployment declares it now
    assert {**kept.state, "gen": ""} == {**kept_before, "gen": ""}
    assert int(kept.state["gen"]) > int(kept_before["gen"])
    assert kept.counters["succeeded"] == 7
    assert changed.entry is not None
    assert changed.entry.schedule == "@every 30s"
    assert changed.version == 2
    assert api.get("runtime-made") == runtime_before


def test_beats_starting_together_create_each_declared_entry_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    schedule = {f"entry-{i}": {"task": "record", "every": 60} for i in range(50)}
    with cluster(tmp_path, redis_url, broker_url, beat_schedule=schedule) as running:
        beats = [running.beat(f"beat{i}") for i in range(3)]
        for beat in beats:
            wait_for(lambda beat=beat: "reconciled" in beat.output(), 30, "reconciliation")
        api = api_for(redis_url, broker_url)
        stored = api.list()
    assert sorted(s.name for s in stored) == sorted(schedule)
    assert {s.version for s in stored} == {1}


def test_reboot_entries_fire_once_when_beats_start_together_and_shutdown_when_the_last_stops(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("on-boot", "record", cron="@reboot")
        api.add("on-stop", "record", cron="@shutdown")
        worker = running.worker()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        beats = [running.beat(f"beat{i}") for i in range(3)]
        wait_for(lambda: len(api.beats()) == 3, 30, "three live beats")
        wait_for(lambda: any(r["entry"] == "on-boot" for r in running.runs()), 10, "the boot run")
        beats[0].stop()
        beats[1].stop()
        wait_for(lambda: len(api.beats()) == 1, 10, "one live beat")
        stopped_two = [r for r in running.runs() if r["entry"] == "on-stop"]
        beats[2].stop()
        wait_for(lambda: any(r["entry"] == "on-stop" for r in running.runs()), 10, "the stop run")
        runs = running.runs()
    assert [r["entry"] for r in runs].count("on-boot") == 1
    assert stopped_two == []
    assert [r["entry"] for r in runs].count("on-stop") == 1


def test_garbage_in_one_entry_quarantines_it_and_the_others_keep_firing(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("healthy", "record", every=1)
        api.add("spoiled", "record", every=1)
        api.add("bad-schedule", "record", every=1)
        keys = api.store.keys
        api.store.client.hset(keys.of("spoiled").entries, "spoiled", "{not json")
        entries = keys.of("bad-schedule").entries
        broken = json.loads(api.store.client.hget(entries, "bad-schedule"))
        broken["schedule"] = "61 * * * *"
        broken["form"] = "cron"
        api.store.client.hset(entries, "bad-schedule", json.dumps(broken))
        worker = running.worker()
        running.beat()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: len(ticks_of(running, "healthy")) >= 4, 15, "healthy runs")
        statuses = {stored.name: stored.status for stored in api.list()}
        logs = running.logs()
    assert statuses == {
        "healthy": "active",
        "spoiled": "quarantined",
        "bad-schedule": "quarantined",
    }
    assert ticks_of(running, "spoiled") == []
    assert ticks_of(running, "bad-schedule") == []
    assert "'spoiled' quarantined" in logs
    assert "minute field: 61 is out of range" in logs


def test_lazy_scheduler_touches_nothing(redis_client: redis.Redis, redis_url: str) -> None:
    app = Celery("lazy", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.beat_schedule = {"declared": {"task": "t", "schedule": 5.0}}
    threads_before = threading.active_count()
    scheduler = Scheduler(app, lazy=True)
    assert redis_client.keys("*") == []
    assert threading.active_count() == threads_before
    assert "lazy" in scheduler.info
