"""Group limits with real beats and workers: a limit of 2 holds under 3 workers with 10
entries of the group due at once, and a SIGKILLed worker's slots free when their markers
end (the runs' hard time limit), as its running markers do."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Cluster, cluster, wait_for

pytestmark = pytest.mark.slow

LIMITS = json.dumps({"periodiq_group_limits": {"reports": 2}})


def most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most runs whose bodies overlapped, from when each began and ended."""
    edges = sorted([(run["began"], 1) for run in runs] + [(run["at"], -1) for run in runs])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def counted(running: Cluster, reason: str) -> int:
    return sum(item.counters.get(reason, 0) for item in running.api().list())


def test_a_group_limit_of_two_holds_under_three_workers_with_ten_entries_due_at_once(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, TEST_CONF=LIMITS) as running:
        api = running.api()
        anchor = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
        for n in range(10):  # every tick of each is due at the same instants
            api.add(
                f"report-{n}", "guarded_hold", every=6, start_at=anchor, group="reports",
                kwargs={"seconds": 1.5}, overlap="buffer_one" if n % 2 else "skip",
            )  # fmt: skip
        workers = [running.worker(f"w{n}") for n in range(3)]
        wait_for(lambda: all("ready" in w.output() for w in workers), 60, "3 workers ready")
        running.beat()

        wait_for(lambda: len(running.runs()) >= 8, 90, "8 runs of the group")
        runs = running.runs()

        assert most_at_once(runs) <= 2, runs
        assert most_at_once(runs) == 2  # the limit is used, not only respected
        assert len({run["entry"] for run in runs}) > 2
        assert counted(running, "dropped_group_limit") > 0
        assert all(w.running for w in workers)


def test_a_sigkilled_workers_slots_free_when_their_markers_end(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, TEST_CONF=LIMITS) as running:
        api = running.api()
        for name, seconds in (("long-1", 60), ("long-2", 60), ("after", 0)):
            # no beat: each runs when triggered; a run's hard limit (its marker) is 8 s
            api.add(
                name, "guarded_hold", every=3600, timebox=7, grace=1, group="reports",
                kwargs={"seconds": seconds},
            )  # fmt: skip
        doomed = running.worker("doomed")
        wait_for(lambda: "ready" in doomed.output(), 60, "the first worker to be ready")
        api.trigger("long-1")
        api.trigger("long-2")
        holding = wait_for(
            lambda: (lambda seen: seen if len(seen) == 2 else None)(
                running.client.lrange("holding", 0, -1)
            ),
            30,
            "both long runs to begin",
        )
        began = max(json.loads(item)["at"] for item in holding)
        doomed.kill()
        spare = running.worker("spare")
        wait_for(lambda: "ready" in spare.output(), 60, "the second worker to be ready")

        api.trigger("after")  # both slots held by the dead worker's runs
        wait_for(lambda: api.get("after").counters.get("dropped_group_limit"), 30,
                 "the run over the limit to be refused")  # fmt: skip
        wait_for(lambda: time.time() > began + 8.5, 15, "the dead runs' markers to end")
        api.trigger("after")
        ran = wait_for(lambda: running.runs_of("after"), 30, "a run once the slots freed")

        assert ran[0]["began"] >= began + 8
        assert api.get("after").counters.get("started") == 1
        assert running.runs_of("long-1") == running.runs_of("long-2") == []
