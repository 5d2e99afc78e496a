"""Alerts with real processes: two beats, a worker, an alert task.

An entry whose queue no worker consumes becomes overdue (decided by a beat, on the
Redis clock); a task that always raises becomes failing after 3 runs and, with
pause_on_failure, pauses; the alert task gets exactly one payload per transition
although two beats run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from celery_periodiq.localredis import LocalRedis
from tests.processes import cluster, wait_for

pytestmark = pytest.mark.slow


def test_overdue_and_failing_reach_the_alert_task_once_each(tmp_path: Path, redis_url: str) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url, TEST_ALERT_TASK="alert") as running,
    ):
        api = running.api()
        # the worker first: "fine"'s first ticks waited for it to boot, and went overdue
        worker = running.worker()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        api.add("unheard", "record", every=1, options={"queue": "nobody"}, alert_after=2,
                owner="tests")  # fmt: skip
        api.add("doomed", "guarded_fail", every=1, failure_threshold=3, pause_on_failure=True,
                alert_after=None, owner="tests")  # fmt: skip
        # its default alert_after (a few intervals) is a deadline a loaded machine missed:
        # the worker started its first runs late, and "fine" was overdue, then recovered
        api.add("fine", "guarded_record", every=1, owner="tests", alert_after=30)
        running.beat("beat-1")
        running.beat("beat-2")

        def received() -> list[dict[str, object]]:
            return [json.loads(raw) for raw in running.client.lrange("alerts", 0, -1)]

        wait_for(lambda: {(a["entry"], a["transition"]) for a in received()}
                 >= {("unheard", "overdue"), ("doomed", "failing")}, 60,
                 "an overdue and a failing alert")  # fmt: skip
        settle_until = time.monotonic() + 3  # more ticks: nothing may be said again
        wait_for(lambda: time.monotonic() > settle_until, 5, "three more seconds of ticks")

        said = [(a["entry"], a["transition"]) for a in received()]
        assert sorted(said) == [("doomed", "failing"), ("unheard", "overdue")], said
        failing = next(a for a in received() if a["transition"] == "failing")
        assert failing["note"] == (
            "3 failed runs in a row, the last: RuntimeError: this task always fails"
        )
        assert failing["schedule"] == api.settings.key_prefix
        doomed, unheard, fine = api.get("doomed"), api.get("unheard"), api.get("fine")
        assert doomed.paused
        assert doomed.note is not None
        assert doomed.note.startswith("paused after 3 failed runs in a row, the last: Runtime")
        assert len(running.runs_of("doomed")) == 3  # paused: no fourth run
        assert unheard.alerts == ["overdue"]
        assert fine.alerts == []
        assert all(process.running for process in running.processes), running.logs()
        api.delete_owner("tests")
        api.store.client.close()
