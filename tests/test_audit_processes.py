"""The audit trail with real beats: a redeploy's reconcile records each entry it adds,
updates (with what changed) and removes, once, by the beat that wrote it and its
declaration set; an unchanged declaration records nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.processes import api_for, cluster, wait_for
from tests.test_beat_reconcile import run_beat_once

pytestmark = pytest.mark.slow


def test_a_redeploy_records_each_entry_it_adds_updates_and_removes_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("runtime-made", "record", every=86400, actor="alice")
        run_beat_once(running, "deploy1", {
            "kept": {"task": "record", "every": 86400},
            "changed": {"task": "record", "every": 60},
            "dropped": {"task": "record", "every": 60},
        })  # fmt: skip
        run_beat_once(running, "deploy2", {
            "kept": {"task": "record", "every": 86400},
            "changed": {"task": "record", "every": 30},
            "new": {"task": "record", "every": 60},
        }, removes="dropped")  # fmt: skip
        trails = {name: api.audit(name) for name in ("kept", "changed", "dropped", "new")}
        runtime = api.audit("runtime-made")

    assert {name: [r.action for r in records] for name, records in trails.items()} == {
        "kept": ["add"],
        "changed": ["update", "add"],
        "dropped": ["delete", "add"],
        "new": ["add"],
    }
    first, second = trails["kept"][0], trails["new"][0]
    records = [record for found in trails.values() for record in found]
    assert {record.via for record in records} == {"reconcile"}
    assert all(record.actor.startswith(f"{socket.gethostname()}:") for record in records)
    assert first.actor != second.actor  # each deploy's own beat
    assert {r.actor for r in records if r.action == "add" and r.name != "new"} == {first.actor}
    assert {r.actor for r in records} == {first.actor, second.actor}
    assert first.note.startswith("declaration set ")
    assert first.note != second.note  # another declaration set
    assert trails["changed"][0].changes == {"schedule": ("@every 1m", "@every 30s")}
    assert [(r.action, r.actor) for r in runtime] == [("add", "alice")]


def test_a_timed_pause_a_running_beat_ends_is_recorded_once_as_that_beats(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = api_for(redis_url, broker_url)
        api.add("nap", "record", every=3600, actor="alice")
        running.beat("b1")
        running.beat("b2")
        api.pause("nap", note="short nap", until=2, actor="alice")
        wait_for(lambda: not api.get("nap").paused, 30, "a beat to end the pause")
        trail = api.audit("nap")

    assert [(r.action, r.actor, r.via, r.note) for r in reversed(trail)][:2] == [
        ("add", "alice", "api", ""),
        ("pause", "alice", "api", "short nap"),
    ]
    assert len(trail) == 3  # two beats running: the pause ended once
    ended = trail[0]
    assert (ended.action, ended.via, ended.note) == ("resume", "beat", "its timed pause ended")
    assert ended.actor.startswith(f"{socket.gethostname()}:")
