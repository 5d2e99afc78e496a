"""Which runs are timeboxed: a PeriodicTask's (half the interval unless its entry says
otherwise), and a plain task's only when its entry sets ``timebox``; otherwise a plain
task keeps its own time limits (Celery takes the limits on a message over the task's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import cluster, wait_for

pytestmark = pytest.mark.slow


def test_a_plain_task_keeps_its_own_time_limits_unless_its_entry_sets_a_timebox(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    schedule = {"from-config": {"task": "record", "every": 2}}  # a migrated beat_schedule
    with cluster(tmp_path, redis_url, broker_url, beat_schedule=schedule) as running:
        api = running.api()
        api.add("own-limits", "record_own_limits", every=2)
        api.add("timeboxed", "record", every=2, timebox=1.5)
        api.add("guarded", "guarded_record", every=2)
        worker = running.worker()
        running.beat()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        names = ["from-config", "own-limits", "timeboxed", "guarded"]
        wait_for(lambda: all(running.runs_of(name) for name in names), 30, "a run of each")
        limits = {name: running.runs_of(name)[0]["timelimit"] for name in names}
        shown = {name: running.cli("show", name).stdout for name in ("from-config", "guarded")}
    # [hard, soft], as the run's request has them
    assert limits == {
        "from-config": [None, None],  # the worker then applies the task's own (none)
        "own-limits": [120, 100],  # the task's own
        "timeboxed": [2.5, 1.5],  # what the entry asked for
        "guarded": [2.0, 1.0],  # a PeriodicTask: half the interval, a grace of 1 s
    }
    # and `show` says what the runs get
    assert (
        "timebox     auto: none, the plain task keeps its own time limits" in shown["from-config"]
    )
    assert "timebox     auto: half the interval (1 s, hard limit 1 s later)" in shown["guarded"]
