"""The example project: every entry is valid and is its seed's example; compose and demo work.

The project is imported in subprocesses only: importing it declares
``@periodic`` entries and shared tasks process-wide, which other tests must
not see.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from celery_periodiq import parse_schedule

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "example_project"
SUNDAY = datetime(2026, 1, 4, tzinfo=UTC)

DUMP_ENTRIES = """
import json
import example_project
from celery_periodiq.declare import registry
from celery_periodiq.config import Settings

app = example_project.app
settings = Settings.from_app(app)
entries = registry.declared(settings) + registry.from_beat_schedule(app, settings)
print(json.dumps({
    "entries": {entry.name: entry.to_dict() for entry in entries},
    "sensor_queue": example_project.sensors.read_sensor.queue,
    "tasks": sorted(name for name in app.tasks if name.startswith("example_project.")),
}))
"""

CHANNELS = """
import json
import example_project
from celery_periodiq import periodiq
from example_project import channels

api = periodiq(example_project.app)
channels.connect_channel(example_project.app, 1, "one@example.com")
channels.connect_channel(example_project.app, 2, "two@example.com")
owned = {s.name: s.entry.owner for s in api.list(owner="channel:1")}
deleted = channels.disconnect_channel(example_project.app, 1)
left = {s.name: s.entry.owner for s in api.list()}
print(json.dumps({"owned": owned, "deleted": deleted, "left": left}))
"""


def run_python(code: str, **env: str) -> Any:
    """Run ``code`` with the repository on the path; its last output line is JSON."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PERIODIQ_DEMO", "REDIS_URL")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def declared() -> dict[str, Any]:
    """The example project's entries with production schedules."""
    return run_python(DUMP_ENTRIES)  # type: ignore[no-any-return]


def fires(entry: dict[str, Any], count: int, start: datetime = SUNDAY) -> list[datetime]:
    schedule = parse_schedule(entry["schedule"], tz=entry["tz"], key=entry["name"])
    return schedule.upcoming(start, count)


def load_tally() -> ModuleType:
    """example_project/tally.py alone (it imports nothing from the example project)."""
    spec = importlib.util.spec_from_file_location("example_tally", PROJECT / "tally.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_project_declares_one_entry_per_seed_example(declared: dict[str, Any]) -> None:
    assert set(declared["entries"]) == {
        "make-report", "refresh-data", "restart-services", "read-sensor", "monthly-billing",
        "poll-mailbox", "housekeeping",
    }  # fmt: skip
    assert declared["tasks"] == [
        "example_project.billing.run_billing",
        "example_project.housekeeping.purge_stale_sessions",
        "example_project.inbox.poll_mailbox",
        "example_project.reports.make_report",
        "example_project.reports.refresh_data",
        "example_project.reports.restart_services",
        "example_project.sensors.read_sensor",
    ]


def test_the_report_runs_every_fifteen_minutes_at_its_own_hashed_minute(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["make-report"]
    assert (entry["schedule"], entry["args"]) == ("H/15 * * * *", ["foo", "bar", "zzzur"])
    times = fires(entry, 8)
    assert {b - a for a, b in pairwise(times)} == {timedelta(minutes=15)}
    assert len({t.minute % 15 for t in times}) == 1


def test_the_refresh_runs_three_times_in_the_first_half_of_each_hour(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["refresh-data"]
    assert (entry["schedule"], entry["timebox"], entry["overlap"]) == (
        "H(0-29)/10 * * * *", None, "skip"
    )  # fmt: skip
    first_hour = [t for t in fires(entry, 6) if t.hour == 0]
    assert len(first_hour) == 3
    assert all(t.minute < 30 for t in first_hour)
    assert [b.minute - a.minute for a, b in pairwise(first_hour)] == [10, 10]


def test_the_restart_runs_at_quarter_to_every_other_hour_on_weekdays_only(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["restart-services"]
    assert entry["schedule"] == "45 9-16/2 * * 1-5"
    week = [t for t in fires(entry, 30) if t < SUNDAY + timedelta(days=7)]
    assert len(week) == 20
    assert {t.strftime("%H:%M") for t in week} == {"09:45", "11:45", "13:45", "15:45"}
    assert {t.isoweekday() for t in week} == {1, 2, 3, 4, 5}


def test_the_sensor_reads_every_thirty_seconds_on_its_queue_and_skips_missed_ticks(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["read-sensor"]
    assert (entry["schedule"], entry["catchup"]) == ("*/30 * * * * *", "skip")
    times = fires(entry, 4)
    assert {b - a for a, b in pairwise(times)} == {timedelta(seconds=30)}
    assert declared["sensor_queue"] == "sensors"


def test_billing_runs_at_six_in_berlin_on_the_first_of_each_month(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["monthly-billing"]
    assert (entry["schedule"], entry["tz"], entry["catchup"]) == (
        "0 6 1 * *",
        "Europe/Berlin",
        "last",
    )
    berlin = [t.astimezone(ZoneInfo("Europe/Berlin")) for t in fires(entry, 12)]
    assert {(t.day, t.hour, t.minute) for t in berlin} == {(1, 6, 0)}
    # 05:00 UTC in winter, 04:00 UTC in summer: the wall clock is what counts.
    assert {t.astimezone(UTC).hour for t in berlin} == {4, 5}


def test_the_mailbox_poll_has_a_tolerance_and_a_timebox_within_its_minute(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["poll-mailbox"]
    assert (entry["form"], entry["schedule"]) == ("every", "@every 1m")
    assert (entry["tolerance"], entry["timebox"]) == (10.0, 30.0)
    assert entry["kwargs"] == {"address": "support@example.com"}


def test_housekeeping_comes_from_beat_schedule_as_a_calendar_event(
    declared: dict[str, Any],
) -> None:
    entry = declared["entries"]["housekeeping"]
    assert (entry["source"], entry["form"], entry["schedule"], entry["tz"]) == (
        "config", "calendar", "*-*-* 03:00:00", "Europe/Berlin"
    )  # fmt: skip
    assert entry["task"] == "example_project.housekeeping.purge_stale_sessions"
    assert entry["kwargs"] == {"older_than_days": 30}


def test_the_demo_switch_turns_every_schedule_into_seconds(declared: dict[str, Any]) -> None:
    demo = run_python(DUMP_ENTRIES, PERIODIQ_DEMO="1")
    assert set(demo["entries"]) == set(declared["entries"])
    for name, entry in demo["entries"].items():
        first, second = fires(entry, 2)
        assert second - first <= timedelta(minutes=1), name
        production = declared["entries"][name]
        assert (entry["catchup"], entry["overlap"]) == (
            production["catchup"], production["overlap"]
        ), name  # fmt: skip


def test_a_channel_deletes_exactly_the_entries_it_created(redis_url: str) -> None:
    outcome = run_python(CHANNELS, REDIS_URL=redis_url)
    assert outcome["owned"] == {"pop3-channel-1": "channel:1"}
    assert outcome["deleted"] == ["pop3-channel-1"]
    assert outcome["left"] == {"pop3-channel-2": "channel:2"}


def test_a_due_tick_is_executed_accounted_or_lost() -> None:
    tally = load_tally()
    every_second = parse_schedule("@every 1s")
    window = tally.Window(start_ms=1_000, end_ms=6_000)  # ticks 2000..6000
    records = [
        {"kind": "ran", "entry": "e", "tick": 2000},
        {"kind": "ran", "entry": "e", "tick": 3000},
        {"kind": "ran", "entry": "e", "tick": 3000},
        {"kind": "ran", "entry": "e", "tick": None, "manual": True},
        {"kind": "expired", "entry": "e", "tick": 5000},
        {"kind": "ran", "entry": "other", "tick": 6000},
    ]
    events = [("enqueued", 4000), ("dropped_too_soon", 4000), ("duplicate", 2000)]
    result = tally.tally("e", every_second, window, records, events)
    assert (result.due, result.executed, result.duplicates, result.manual) == (5, 2, 1, 1)
    assert dict(result.reasons) == {"dropped_too_soon": 1, "expired": 1}
    assert result.lost == [6000]
    assert result.refused_duplicates == 1


def test_docker_compose_runs_redis_two_beats_and_a_worker_of_the_example_project() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read docker-compose.yml")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"redis", "beat-1", "beat-2", "worker"} <= set(services)
    assert services["redis"]["image"].startswith("redis:")
    commands = {name: services[name]["command"] for name in ("beat-1", "beat-2", "worker")}
    assert [c[:4] for c in commands.values()] == [
        ["celery", "-A", "example_project", "beat"],
        ["celery", "-A", "example_project", "beat"],
        ["celery", "-A", "example_project", "worker"],
    ]
    worker = commands["worker"]
    assert set(worker[worker.index("-Q") + 1].split(",")) == {"celery", "sensors"}
    for name in commands:
        service = services[name]
        assert service["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        dockerfile = ROOT / service["build"]["context"] / service["build"]["dockerfile"]
        assert dockerfile.is_file()
    copied = re.findall(r"^COPY (.+) \S+$", dockerfile.read_text(), re.MULTILINE)
    sources = [source for line in copied for source in line.split()]
    assert sources
    assert all((ROOT / source).exists() for source in sources), sources
    for name, command in commands.items():
        result = subprocess.run(
            [sys.executable, "-m", *command, "--help"],
            env={**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": "redis://redis:6379/0"},
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{name}: {result.stderr}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_ends_with_no_duplicate_and_no_lost_tick(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PERIODIQ_DEMO", "REDIS_URL")}
    summary_file = tmp_path / "summary.json"
    result = subprocess.run(
        [sys.executable, str(PROJECT / "demo.py"), "--seconds", "20",
         "--json", str(summary_file), "--logs", str(tmp_path / "logs")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = json.loads(summary_file.read_text())
    assert (summary["ok"], summary["duplicates"], summary["lost"]) == (True, 0, 0), output
    assert set(summary["claims_at_kill"]) == {"beat-a", "beat-b"}, output
    assert summary["runtime_deleted"], output
    tallies = {item["entry"]: item for item in summary["entries"]}
    assert "pop3-channel-42" in tallies
    for name in ("read-sensor", "poll-mailbox", "housekeeping", "pop3-channel-42"):
        assert tallies[name]["executed"] > 0, output
    assert "$ celery -A example_project periodiq list" in output
    assert "$ celery -A example_project periodiq history make-report" in output
    # each count says what it counts; the list, read after the beats stopped, says so
    assert "since added: " in output, output
    assert "while a beat was alive" in output, output
    assert "list's counters count every run since the entry was added" in output, output
    assert "NAME              STATE   NEXT RUN (UTC) " in output, output
    assert "No beat is running: no run is sent" in output, output
    assert "(now)" not in output, output
    assert " CET " not in output, output
    assert re.search(r"OK: 0 duplicate runs, 0 lost ticks", output), output


def make_demo(tmp_path: Path, path: list[str], **env: str) -> list[str]:
    """Run ``make demo`` with a venv whose python records what it is asked to run (so
    nothing is installed), on ``PATH`` ``path``; returns the recorded command lines."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp_path / "calls"
    recorder = bin_dir / "python"
    recorder.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    recorder.chmod(0o755)
    venv, make = tmp_path / "venv", str(shutil.which("make"))
    result = subprocess.run(
        [make, "-s", "demo", f"VENV={venv}", f"PYTHON={sys.executable}"],
        env={"PATH": os.pathsep.join(path), "HOME": str(tmp_path), **env},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return calls.read_text().splitlines()


def without_redis_server(tmp_path: Path) -> list[str]:
    """A PATH with only what the recipe runs besides the venv's python: no redis-server."""
    tools = tmp_path / "tools"
    tools.mkdir(parents=True)
    (tools / "touch").symlink_to(str(shutil.which("touch")))
    return [str(tools)]


def test_make_demo_installs_the_package_alone_when_a_redis_server_is_on_path(
    tmp_path: Path,
) -> None:
    server = Path(str(shutil.which("redis-server")))
    calls = make_demo(tmp_path, [*without_redis_server(tmp_path), str(server.parent)])

    assert calls == ["-m pip install --quiet -e .", "example_project/demo.py"]


def test_make_demo_adds_the_embedded_redis_without_a_redis_server_or_redis_url(
    tmp_path: Path,
) -> None:
    bare = make_demo(tmp_path / "bare", without_redis_server(tmp_path))
    with_url = make_demo(
        tmp_path / "url", without_redis_server(tmp_path / "url"), REDIS_URL="redis://x:1/0"
    )

    assert bare == ["-m pip install --quiet -e .[embedded]", "example_project/demo.py"]
    assert with_url == ["-m pip install --quiet -e .", "example_project/demo.py"]
