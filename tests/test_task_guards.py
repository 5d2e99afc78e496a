"""PeriodicTask on a real prefork worker: no overlap, timebox, dead runs, retries,
checkpoints, duplicate messages, and @periodic in both of its forms."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from tests.processes import Cluster, api_for, cluster, wait_for

pytestmark = pytest.mark.slow


def runs(running: Cluster, entry: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [
        r for r in running.runs()
        if r.get("entry") == entry and (kind is None or r["kind"] == kind)
    ]  # fmt: skip


def started(running: Cluster, **env: str) -> None:
    running.env.update(env)
    worker = running.worker(pool="prefork")
    running.beat()
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")


@pytest.fixture
def guarded(tmp_path: Path, redis_url: str, broker_url: str) -> Any:
    with cluster(tmp_path, redis_url, broker_url, app="guarded_app") as running:
        yield running


def test_a_task_slower_than_its_interval_never_overlaps(guarded: Cluster) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("slow", "slow", every=1, args=[2.5], timebox=None)
    wait_for(lambda: len(runs(guarded, "slow", "end")) >= 3, 30, "three finished runs")
    api.pause("slow")
    spans = []
    for start in runs(guarded, "slow", "start"):
        end = [r for r in runs(guarded, "slow", "end") if r["task_id"] == start["task_id"]]
        spans.append((start["at"], end[0]["at"] if end else float("inf")))
    counters = api.get("slow").counters
    spans.sort()
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert counters["skipped_overlap"] >= 3  # the beat held back ticks while a run was unfinished


def test_soft_limit_fires_at_half_the_interval_and_the_hard_limit_after_grace(
    guarded: Cluster,
) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("overrun", "overrun", every=4, grace=1)
    wait_for(lambda: runs(guarded, "overrun", "soft"), 20, "the soft limit")
    wait_for(lambda: "Hard time limit" in guarded.logs(), 10, "the hard limit")
    api.pause("overrun")
    first = runs(guarded, "overrun", "start")[0]
    soft = next(r for r in runs(guarded, "overrun", "soft") if r["task_id"] == first["task_id"])
    assert soft["at"] - first["at"] == pytest.approx(2.0, abs=0.5)  # timebox = 4 s / 2
    assert first["deadline"] - first["at"] == pytest.approx(2.0, abs=0.5)
    assert "Hard time limit (3.0s) exceeded" in guarded.logs()  # soft 2 s + grace 1 s
    assert not runs(guarded, "overrun", "end")


def test_a_run_killed_with_sigkill_blocks_later_runs_only_until_its_marker_expires(
    guarded: Cluster,
) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    # every 2 s with a 1 s timebox and 1 s grace: the marker lives 2 s after the crash
    api.add("crash_once", "crash_once", every=2, timebox=1, grace=1)
    wait_for(lambda: runs(guarded, "crash_once", "end"), 30, "a run after the crash")
    api.pause("crash_once")
    crashed = runs(guarded, "crash_once", "start")[0]
    recovered = runs(guarded, "crash_once", "end")[0]
    blocked = recovered["tick"] - crashed["tick"]
    assert not [r for r in runs(guarded, "crash_once", "end") if r["task_id"] == crashed["task_id"]]
    assert 2000 <= blocked <= 6000  # the next tick or two were held back, then runs resumed


def test_retries_keep_the_run_unfinished_until_the_last_attempt(guarded: Cluster) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("flaky", "flaky", every=1, timebox=None)
    wait_for(lambda: runs(guarded, "flaky", "end"), 30, "a run that succeeded after retries")
    api.pause("flaky")
    first_id = runs(guarded, "flaky", "attempt")[0]["task_id"]
    attempts = [r for r in runs(guarded, "flaky", "attempt") if r["task_id"] == first_id]
    between = [
        r for r in runs(guarded, "flaky", "attempt")
        if r["task_id"] != first_id and attempts[0]["at"] < r["at"] < attempts[-1]["at"]
    ]  # fmt: skip
    assert [r["retries"] for r in attempts] == [0, 1, 2]
    assert between == []  # no other run started while this one was retrying
    kinds = [event.kind for event in api.history("flaky", limit=100)]
    assert "retrying" in kinds
    assert api.get("flaky").counters["skipped_overlap"] >= 1


def test_a_checkpoint_saved_by_a_timeboxed_run_is_loaded_by_the_next(guarded: Cluster) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("resumable", "resumable", every=2)
    wait_for(lambda: len(runs(guarded, "resumable", "end")) >= 2, 30, "two runs")
    api.pause("resumable")
    ends = runs(guarded, "resumable", "end")
    starts = runs(guarded, "resumable", "start")
    assert starts[0]["count"] == 0
    assert starts[1]["count"] == ends[0]["count"] > 0  # resumed where the first stopped
    assert starts[0]["time_left"] == pytest.approx(1.0, abs=0.3)  # half of 2 s


@pytest.mark.compat
def test_a_duplicate_message_for_one_tick_runs_once(guarded: Cluster) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("plain", "plain", cron="@yearly")  # scheduled, but not due during the test
    tick = int(time.time() * 1000)
    for _ in range(2):
        api.app.send_task(
            "plain", task_id="same-tick", headers={HEADER_ENTRY: "plain", HEADER_TICK: tick}
        )
    wait_for(lambda: api.get("plain").counters.get("duplicate"), 20, "the duplicate to be dropped")
    # the copy that began first may still be on its way to its record when the other drops
    wait_for(lambda: runs(guarded, "plain", "start"), 20, "the run of the copy that began")
    assert len(runs(guarded, "plain", "start")) == 1


def test_periodic_creates_a_task_or_guards_an_existing_one(guarded: Cluster) -> None:
    started(guarded, TEST_DECLARE="1")
    wait_for(lambda: len(runs(guarded, "declared-plain")) >= 2, 30, "runs of the created task")
    wait_for(lambda: len(runs(guarded, "declared-existing")) >= 2, 30, "runs of the existing task")
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    sources = {stored.name: stored.entry.source for stored in api.list() if stored.entry}
    assert sources == {"declared-plain": "code", "declared-existing": "code"}
    assert all(r["guarded"] for r in runs(guarded, "declared-existing"))
    assert api.get("declared-existing").counters["started"] >= 2


def test_expired_and_terminated_runs_are_recorded(guarded: Cluster) -> None:
    started(guarded)
    api = api_for(guarded.redis_url, guarded.env["TEST_BROKER_URL"], "guarded_app")
    api.add("slow", "slow", cron="@yearly", args=[30], timebox=None)
    stale = int(time.time() * 1000) - 60_000
    api.app.send_task(
        "slow", args=[30], task_id="stale-tick", expires=-5,
        headers={HEADER_ENTRY: "slow", HEADER_TICK: stale},
    )  # fmt: skip
    wait_for(lambda: api.get("slow").counters.get("expired"), 20, "the expired message")
    assert api.get("slow").state.get("last_status") is None  # it never ran

    task_id = api.trigger("slow")
    wait_for(lambda: runs(guarded, "slow", "start"), 20, "the triggered run to start")
    assert api.get("slow").running == task_id
    api.app.control.revoke(task_id, terminate=True)
    wait_for(lambda: api.get("slow").state.get("last_status") == "revoked", 20, "the revocation")
    assert api.get("slow").running is None
    assert not runs(guarded, "slow", "end")
