"""``celery -A guarded_app periodiq ...`` through the real ``celery`` executable.

One real beat and one real prefork worker (``tests/apps/guarded_app.py``) run
for the whole module against private Redis servers: ``ok`` succeeds every
second and ``broken`` fails every two (its argument is not a number), so the
history the commands print is the one real runs wrote.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from celery_periodiq import Periodiq
from celery_periodiq.localredis import LocalRedis
from tests.processes import APPS, CELERY, Cluster, api_for, cluster, wait_for

pytestmark = pytest.mark.slow

TYPE_ERROR = "TypeError: 'str' object cannot be interpreted as an integer"


def periodiq_cli(
    running: Cluster, *args: str, input: str | None = None, prefix: list[str] | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``celery -A guarded_app periodiq ARGS`` in a subprocess, as a user would type it."""
    return running.cli(*args, input=input, prefix=prefix, **env)


def on_a_terminal(running: Cluster, *args: str, **env: str) -> str:
    """What ``celery ... periodiq ARGS`` prints when its output is a terminal."""
    base = {key: value for key, value in running.env.items() if key != "NO_COLOR"}
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [CELERY, "-A", running.app, "periodiq", *args], env={**base, **env}, cwd=APPS,
        stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
    )  # fmt: skip
    os.close(secondary)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1)
        try:
            chunk = os.read(primary, 4096) if ready else b"-"
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        output += chunk if ready else b""
    process.wait(timeout=10)
    os.close(primary)
    return output.decode()


def last_status(api: Periodiq, name: str) -> str | None:
    return api.get(name).state.get("last_status")


def failures(api: Periodiq, name: str) -> int:
    return api.get(name).counters.get("failed", 0)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cli")
    with (
        LocalRedis(tmp / "redis") as schedule,
        LocalRedis(tmp / "broker") as broker,
        cluster(tmp, schedule.url, broker.url, app="guarded_app") as procs,
    ):
        worker = procs.worker(pool="prefork")
        procs.beat()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        api = api_for(schedule.url, broker.url, "guarded_app")
        api.add("ok", "plain", every=1, timebox=None)
        api.add("broken", "slow", every=2, args=["x"], owner="demo")
        wait_for(lambda: last_status(api, "ok") == "succeeded", 30, "a run of ok")
        wait_for(lambda: failures(api, "broken") >= 3, 30, "three failed runs of broken")
        api.store.client.close()
        api.app.close()
        yield procs


@pytest.fixture
def api(running: Cluster) -> Iterator[Periodiq]:
    client = api_for(running.redis_url, running.env["TEST_BROKER_URL"], "guarded_app")
    yield client
    client.store.client.close()
    client.app.close()


def runs_of(running: Cluster, entry: str) -> list[dict[str, Any]]:
    return [run for run in running.runs() if run.get("entry") == entry]


# reading


def test_list_shows_the_runs_of_a_real_beat_and_worker(running: Cluster) -> None:
    result = periodiq_cli(running, "list")

    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line[:1].isalnum()}
    assert rows["ok"].split()[1] == "active"
    assert "succeeded" in rows["ok"]
    assert "failed" in rows["broken"]
    assert "  owner demo · " in result.stdout


def test_show_has_the_real_history(running: Cluster) -> None:
    result = periodiq_cli(running, "show", "broken")

    assert result.returncode == 0, result.stderr
    assert '  task        slow\n  args        ["x"]\n' in result.stdout
    assert f"  last error  {TYPE_ERROR}\n" in result.stdout
    assert re.search(r"\nLast \d+ events\n  AT \(UTC\) ", result.stdout)


def test_history_failures_shows_the_workers_error(running: Cluster) -> None:
    result = periodiq_cli(running, "history", "broken", "--failures", "--limit", "2")

    rows = [line.split() for line in result.stdout.splitlines()[1:] if line[:1].isdigit()]
    assert result.returncode == 0, result.stderr
    assert [row[2] for row in rows] == ["failed", "failed"]
    assert result.stdout.count(f"\n  {TYPE_ERROR}\n") == 2
    assert f"on {socket.gethostname()}" in result.stdout


def test_failures_lists_them_across_entries_as_json(running: Cluster) -> None:
    result = periodiq_cli(running, "failures", "--limit", "3", "--json")

    failures = json.loads(result.stdout)
    assert [item["entry"] for item in failures] == ["broken"] * 3
    assert {(item["error_type"], item["error_message"]) for item in failures} == {
        ("TypeError", "'str' object cannot be interpreted as an integer")
    }


def test_next_previews_a_schedule(running: Cluster) -> None:
    result = periodiq_cli(
        running, "next", "0 9 * * MON-FRI", "--from", "2026-01-02T10:00", "-n", "1"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("  1  Mon 2026-01-05 09:00:00 UTC  in 2d23h\n")


def test_beats_lists_the_live_beat(running: Cluster) -> None:
    result = periodiq_cli(running, "beats", "--json")

    beats = json.loads(result.stdout)
    assert [beat["host"] for beat in beats] == [socket.gethostname()]
    assert beats[0]["ticks_claimed"] > 0


def test_doctor_finds_nothing_wrong_but_the_overdue_failing_entry(running: Cluster) -> None:
    api = api_for(running.redis_url, running.env["TEST_BROKER_URL"], "guarded_app")
    wait_for(lambda: api.get("broken").overdue_since, 30, "broken to be overdue")
    api.store.client.close()

    result = periodiq_cli(running, "doctor", "--json")

    # "broken" raises on every run: after 3 in a row it is failing, and as none succeeds
    # it is overdue too (2 intervals + the timebox: 5 s); nothing else is wrong
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert result.returncode == 1, result.stdout
    assert [name for name, check in checks.items() if check["status"] != "ok"] == ["alerts"]
    assert checks["alerts"]["detail"] == "1 overdue: broken; 1 failing: broken"


@pytest.mark.skipif(
    shutil.which("faketime") is None, reason="faketime is not installed (make test installs it)"
)
def test_doctor_fails_on_a_host_whose_clock_is_off(running: Cluster) -> None:
    result = periodiq_cli(
        running, "doctor", "--json", prefix=["faketime", "-f", "+2m"],
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )  # fmt: skip

    clock = next(check for check in json.loads(result.stdout)["checks"] if check["name"] == "clock")
    assert result.returncode == 1
    assert clock["status"] == "fail"
    assert clock["detail"].startswith("this host's clock is 1")  # about 120 s ahead


def test_colour_only_on_a_terminal_and_never_with_no_color(running: Cluster) -> None:
    coloured = on_a_terminal(running, "list")
    plain = on_a_terminal(running, "list", NO_COLOR="1")
    piped = periodiq_cli(running, "list")

    assert "\x1b[32mactive\x1b[0m" in coloured
    assert "\x1b[" not in plain
    assert "\x1b[" not in piped.stdout
    assert "active" in plain


# steering


def test_an_entry_added_with_the_cli_runs_on_the_live_beat(running: Cluster, api: Periodiq) -> None:
    added = periodiq_cli(running, "add", "added", "plain", "--every", "1", "--timebox", "none")

    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("Added added: @every 1s (every 1 second); next run ")
    wait_for(lambda: runs_of(running, "added"), 10, "a run of the added entry")


def test_a_paused_entry_stops_and_a_resumed_one_runs_again(running: Cluster, api: Periodiq) -> None:
    api.add("pausable", "plain", every=1, timebox=None)
    wait_for(lambda: runs_of(running, "pausable"), 10, "a first run")

    paused_at = time.time()
    paused = periodiq_cli(running, "pause", "pausable", "--note", "deploying")
    wait_for(lambda: time.time() > paused_at + 5, 6, "five seconds to pass")
    resumed_at = time.time()
    resumed = periodiq_cli(running, "resume", "pausable")

    assert (paused.returncode, resumed.returncode) == (0, 0)
    assert paused.stdout == "Paused pausable (note: deploying).\n"
    ticks = [run["tick"] / 1000 for run in runs_of(running, "pausable")]
    assert [tick for tick in ticks if paused_at + 2 < tick < resumed_at] == []
    wait_for(
        lambda: [run for run in runs_of(running, "pausable") if run["tick"] > resumed_at * 1000],
        10, "a run after resume",
    )  # fmt: skip


def test_run_sends_a_run_the_worker_executes(running: Cluster, api: Periodiq) -> None:
    api.add("manual", "plain", cron="@yearly")

    result = periodiq_cli(running, "run", "manual")

    task_id = result.stdout.split()[-1].rstrip(".")
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: [run for run in runs_of(running, "manual") if run["task_id"] == task_id],
        20, "the manual run",
    )  # fmt: skip


def test_update_changes_the_stored_definition(running: Cluster, api: Periodiq) -> None:
    api.add("changing", "plain", cron="@yearly")

    result = periodiq_cli(running, "update", "changing", "--cron", "@monthly", "--queue", "low")

    assert result.returncode == 0, result.stderr
    entry = api.get("changing").entry
    assert entry is not None
    assert (entry.schedule, entry.options) == ("@monthly", {"queue": "low"})


def test_delete_asks_and_delete_owner_removes_every_entry_of_the_owner(
    running: Cluster, api: Periodiq
) -> None:
    for name in ("temp-a", "temp-b"):
        api.add(name, "plain", cron="@yearly", owner="temp")

    declined = periodiq_cli(running, "delete", "temp-a", input="n\n")
    one = periodiq_cli(running, "delete", "temp-a", "--yes")
    owner = periodiq_cli(running, "delete", "--owner", "temp", input="y\n")

    assert (declined.returncode, one.returncode, owner.returncode) == (1, 0, 0)
    assert owner.stdout == "Deleted temp-b.\n"
    assert api.list(owner="temp") == []


def test_a_user_error_is_one_line_without_a_traceback(running: Cluster) -> None:
    result = periodiq_cli(running, "add", "x", "plain", "--every", "1", "--kwargs", "[1]")

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: Invalid value for '--kwargs': expected a JSON object")
