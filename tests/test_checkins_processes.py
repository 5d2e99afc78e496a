"""Check-ins sent by real workers to a real local monitor: what sentry-sdk sends (its
envelopes' check_in items) and the Healthchecks-style pings."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from tests.monitors import Received, monitor_server, silent_monitor
from tests.processes import Cluster, cluster, wait_for

pytestmark = pytest.mark.slow


def _statuses(received: Received, slug: str, check_id: str) -> list[str]:
    return [
        item["status"]
        for item in received.checkins_of(slug)
        if item["check_in_id"] == check_id.replace("-", "")
    ]


def _ended(received: Received, slug: str) -> list[dict[str, object]]:
    """The end check-ins of ``slug`` whose run also checked in when it started."""
    items = received.checkins_of(slug)
    started = {item["check_in_id"] for item in items if item["status"] == "in_progress"}
    return [
        item for item in items if item["status"] != "in_progress" and item["check_in_id"] in started
    ]


@contextlib.contextmanager
def monitored(
    tmp_path: Path, redis_url: str, broker_url: str
) -> Iterator[tuple[Cluster, Received]]:
    """The check-in app's cluster, telling Sentry and pings to one local monitor: the
    cluster and what the monitor received."""
    with (
        monitor_server() as (port, received),
        cluster(
            tmp_path, redis_url, broker_url, "checkin_app",
            TEST_SENTRY_DSN=f"http://key@127.0.0.1:{port}/1",
            TEST_CHECKIN_URL=f"http://127.0.0.1:{port}/ping/{{entry}}",
        ) as running,
    ):  # fmt: skip # the app's settings, one a line
        yield running, received


def _worker_ready(running: Cluster, *extra: str, pool: str = "prefork") -> None:
    worker = running.worker("worker", *extra, pool=pool)
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")


def test_runs_check_in_to_sentry_and_pings_from_prefork_children_that_exit(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with monitored(tmp_path, redis_url, broker_url) as (running, received):
        api = running.api()
        api.add("Nightly Report", "fine", every=2)
        api.add("broken-job", "broken", every=2)
        api.add("plain-job", "plain_fine", every=2)
        api.add("overrun", "fine", every=2, args=[5], timebox=1)
        api.add("quarterly", "fine", cron="*/15 * * * *", tz="Europe/Paris", grace=90)
        # every child ends after one task: each end check-in must leave before it exits
        _worker_ready(running, "--max-tasks-per-child=1")
        running.beat()
        ok = wait_for(lambda: _ended(received, "nightly-report"), 30, "a run's end check-in")
        error = wait_for(lambda: _ended(received, "broken-job"), 30, "a failed run's check-in")
        plain = wait_for(lambda: _ended(received, "plain-job"), 30, "a plain task's check-in")
        overrun = wait_for(lambda: _ended(received, "overrun"), 30, "a timeboxed run's check-in")
        for name in ("Nightly Report", "broken-job", "plain-job", "overrun"):
            api.pause(name)
        api.trigger("quarterly")
        quarterly = wait_for(lambda: _ended(received, "quarterly"), 30, "a manual run's check-in")

        assert ok[0]["status"] == "ok"
        assert 0 <= float(ok[0]["duration"]) < 5  # type: ignore[arg-type]
        assert error[0]["status"] == "error"
        assert plain[0]["status"] == "ok"
        assert overrun[0]["status"] == "error"
        assert 0.5 < float(overrun[0]["duration"]) < 4  # type: ignore[arg-type]
        assert quarterly[0]["status"] == "ok"
        assert received.checkins_of("quarterly")[0]["monitor_config"] == {
            "schedule": {"type": "crontab", "value": "*/15 * * * *"},
            "timezone": "Europe/Paris",
            "failure_issue_threshold": 3,
            "checkin_margin": 2,
            "max_runtime": 8,
        }
        assert "monitor_config" not in ok[0]  # every 2 s: Sentry cannot say it
        run_id = next(
            run["task_id"]
            for run in map(json.loads, running.client.lrange("runs", 0, -1))
            if run["entry"] == "Nightly Report" and run["kind"] == "end"
        )
        wait_for(lambda: len(received.pings_of(run_id)) == 2, 10, "both pings of the run")
        assert received.pings_of(run_id) == [
            "/ping/Nightly%20Report/start",
            "/ping/Nightly%20Report",
        ]
        failed = str(error[0]["check_in_id"])
        assert any(path == "/ping/broken-job/fail" for path, _ in received.pings)
        assert _statuses(received, "broken-job", failed) == ["in_progress", "error"]


def test_a_manual_run_of_a_plain_task_checks_in_and_is_recorded_like_a_scheduled_one(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    # trigger() (the CLI's run, the admin's Run now) of a plain task sent no check-in and
    # recorded no outcome: its history said "triggered" only, its counters enqueued: 1.
    with monitored(tmp_path, redis_url, broker_url) as (running, received):
        api = running.api()
        api.add("plain-manual", "plain_fine", cron="@yearly")  # never due during the test
        _worker_ready(running, pool="threads")

        task_id = api.trigger("plain-manual")
        wait_for(lambda: running.runs_of("plain-manual") or [r for r in running.runs()
                 if r["task_id"] == task_id], 20, "the manual run")  # fmt: skip
        wait_for(lambda: api.get("plain-manual").counters.get("succeeded"), 10, "its outcome")
        wait_for(lambda: len(received.pings_of(task_id)) == 2, 10, "both pings of the run")

        assert _statuses(received, "plain-manual", task_id) == ["in_progress", "ok"]
        assert received.pings_of(task_id) == ["/ping/plain-manual/start", "/ping/plain-manual"]
        kinds = [event.kind for event in api.history("plain-manual", limit=10)]
        assert kinds == ["succeeded", "started", "triggered"]
        assert api.get("plain-manual").counters == {"enqueued": 1, "started": 1, "succeeded": 1}


def test_a_dropped_duplicate_sends_nothing_and_a_skipped_tick_reports_ok(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with monitored(tmp_path, redis_url, broker_url) as (running, received):
        api = running.api()
        api.add("once", "fine", cron="@yearly")  # stored, never due during the test
        api.add("long", "fine", cron="@yearly", args=[3], timebox=None)
        _worker_ready(running, pool="threads")
        tick = int(time.time() * 1000)
        first = "6f0c9e0e-0000-4000-8000-000000000001"
        api.app.send_task("fine", task_id=first, headers={HEADER_ENTRY: "once", HEADER_TICK: tick})
        wait_for(lambda: "ok" in _statuses(received, "once", first), 20, "the first copy's end")
        api.app.send_task("fine", task_id=first, headers={HEADER_ENTRY: "once", HEADER_TICK: tick})
        wait_for(lambda: api.get("once").counters.get("duplicate"), 20, "the copy to be dropped")

        busy = "6f0c9e0e-0000-4000-8000-000000000002"
        skipped = "6f0c9e0e-0000-4000-8000-000000000003"
        api.app.send_task(
            "fine", args=[3], task_id=busy, headers={HEADER_ENTRY: "long", HEADER_TICK: tick}
        )
        wait_for(lambda: "in_progress" in _statuses(received, "long", busy), 20, "the long run")
        api.app.send_task(
            "fine", args=[3], task_id=skipped,
            headers={HEADER_ENTRY: "long", HEADER_TICK: tick + 1000},
        )  # fmt: skip
        wait_for(lambda: _statuses(received, "long", skipped), 20, "the skipped tick's check-in")
        wait_for(lambda: "ok" in _statuses(received, "long", busy), 20, "the long run's end")

        assert _statuses(received, "once", first) == ["in_progress", "ok"]  # once: no copy
        assert received.pings_of(first) == ["/ping/once/start", "/ping/once"]
        assert api.get("long").counters.get("skipped_overlap") == 1
        assert _statuses(received, "long", skipped) == ["ok"]  # handled, not missed
        assert received.pings_of(skipped) == ["/ping/long"]

        stale = "6f0c9e0e-0000-4000-8000-000000000004"
        api.app.send_task(
            "fine", task_id=stale, expires=-5,
            headers={HEADER_ENTRY: "once", HEADER_TICK: tick - 60_000},
        )  # fmt: skip
        wait_for(lambda: _statuses(received, "once", stale), 20, "the expired run's check-in")
        assert _statuses(received, "once", stale) == ["error"]
        assert received.pings_of(stale) == ["/ping/once/fail"]


def test_a_copy_expired_in_the_queue_while_its_tick_runs_leaves_the_run_and_its_check_in(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    # The copy (the same task id) cleared the run's marker, set its status to "expired"
    # while it ran, and checked the run in as an error before the run's own "ok".
    with monitored(tmp_path, redis_url, broker_url) as (running, received):
        api = running.api()
        api.add("long", "fine", cron="@yearly", args=[3], timebox=None)
        _worker_ready(running, pool="threads")
        tick = int(time.time() * 1000)
        live = "6f0c9e0e-0000-4000-8000-000000000005"
        headers = {HEADER_ENTRY: "long", HEADER_TICK: tick}
        api.app.send_task("fine", args=[3], task_id=live, headers=headers)
        wait_for(lambda: "in_progress" in _statuses(received, "long", live), 20, "the run")
        api.app.send_task("fine", args=[3], task_id=live, expires=-5, headers=headers)
        counted = wait_for(
            lambda: {"duplicate", "expired"} & set(api.get("long").counters), 20, "the copy"
        )
        during = api.get("long")
        wait_for(lambda: "ok" in _statuses(received, "long", live), 20, "the run's end")

        assert (during.running, during.state["last_status"]) == (live, "running")
        assert counted == {"duplicate"}
        assert _statuses(received, "long", live) == ["in_progress", "ok"]
        assert received.pings_of(live) == ["/ping/long/start", "/ping/long"]
        assert len(running.runs_of("long")) == 2  # the run's start and end: once


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"TEST_CHECKIN_URL": "ftp://x/{entry}"}, "setting periodiq_checkin_url='ftp://x/{entry}'"),
        ({"TEST_CHECKINS": '"ping"'}, "setting periodiq_checkins='ping' is invalid"),
    ],
    ids=["ftp-url", "checkins-a-string"],
)
def test_a_worker_whose_check_in_setting_it_cannot_use_stops_with_one_line(
    tmp_path: Path, redis_url: str, broker_url: str, setting: dict[str, str], said: str
) -> None:
    # It started silently, and every periodic run then failed with ConfigurationError.
    with cluster(tmp_path, redis_url, broker_url, "checkin_app", **setting) as running:
        worker = running.worker()
        wait_for(lambda: not worker.running or " ready." in worker.output(), 60,
                 "the worker to stop, or to be ready")  # fmt: skip
        output = worker.output()
        stopped = not worker.running

    assert stopped, output
    assert worker.process is not None
    assert worker.process.returncode == 1
    assert "Traceback" not in output
    assert " ready." not in output  # it took no task
    assert "[config]" not in output  # nor printed its banner
    (line,) = [line for line in output.splitlines() if "periodiq" in line or "ERROR" in line]
    assert "CRITICAL" in line, line
    assert said in line
    assert line.endswith("; the worker cannot start"), line


def test_a_monitor_that_never_answers_costs_a_run_less_than_the_timeout(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with (
        silent_monitor() as silent,
        monitor_server() as (port, received),
        cluster(
            tmp_path, redis_url, broker_url, "checkin_app",
            TEST_CHECKIN_URL=f"http://127.0.0.1:{port}/ping/{{entry}}",
            TEST_CHECKIN_URLS=json.dumps({"stuck": f"http://127.0.0.1:{silent}/ping"}),
            TEST_CHECKIN_TIMEOUT="1.5",
        ) as running,
    ):  # fmt: skip
        api = running.api()
        api.add("stuck", "fine", every=1)
        api.add("other", "fine", every=1)
        _worker_ready(running, pool="threads")
        running.beat()
        wait_for(
            lambda: sum(e.kind == "succeeded" for e in api.history("stuck", limit=50)) >= 3,
            30,
            "three runs of the entry whose monitor never answers",
        )
        api.pause("stuck")
        durations = [
            int(event.fields["duration"])
            for event in api.history("stuck", limit=50)
            if event.kind == "succeeded"
        ]
        assert len(durations) >= 3
        assert max(durations) < 1500  # the check-ins' time is in it
        # its own URL (per entry) wins over the template: the template never heard of it
        assert not any("stuck" in path for path, _ in received.pings)
        # after one timeout, the silent monitor is left alone and the others' pings go on
        wait_for(lambda: any(path == "/ping/other" for path, _ in received.pings), 10, "a ping")
