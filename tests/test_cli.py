"""``celery periodiq`` through click's runner, against a private Redis and a private broker.

Entries start in 2090 (``start_at``) and ``--now`` fixes the clock where relative
times are printed, so what each command prints does not depend on today.
Runs are recorded with the worker's own Lua scripts at chosen instants.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import pytest
import redis
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner, Result

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.cli import periodiq as periodiq_command
from celery_periodiq.model.plan import task_id_for, to_ms
from celery_periodiq.present.terminal import Style
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.protocol.records import RunEnd, RunStart

START = datetime(2090, 1, 1, tzinfo=UTC)
NOW = "2089-12-31T23:00:00Z"
COMMANDS = (
    "add", "audit", "backfill", "beats", "delete", "doctor", "export", "failures", "history",
    "import", "list", "metrics", "next", "pause", "resume", "run", "serve", "show", "simulate",
    "update", "window",
)  # fmt: skip


KEYS = Keys("periodiq:cli-test", 16)  # the app "cli-test" below


def cli(app: Celery, *args: str, input: str | None = None, **env: str | None) -> Result:
    """Run ``celery periodiq ARGS`` for ``app`` as Celery would: the app in ``ctx.obj``."""
    return CliRunner().invoke(
        periodiq_command,
        list(args),
        obj=CLIContext(app=app, no_color=False, workdir=None),
        input=input,
        env={"COLUMNS": "80", "NO_COLOR": None, **env},
        catch_exceptions=False,
    )


def one_error_line(result: Result) -> str:
    """The single line a failed command printed on stderr (and nothing on stdout)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    return lines[0]


def record_run(
    api: Periodiq, name: str, tick: datetime, began: datetime, *, outcome: str | None,
    seconds: float = 0.5, error: str = "", host: str = "worker-1", min_gap: float = 0.0,
) -> str:  # fmt: skip
    """A worker's run of ``tick``, recorded by begin.lua and finish.lua at the given instants.

    ``outcome`` None leaves the run unfinished. Returns what begin.lua decided.
    """
    task_id = task_id_for(api.settings.key_prefix, name, to_ms(tick))
    start = RunStart(
        task_id=task_id, tick_ms=to_ms(tick), min_gap_ms=int(min_gap * 1000), overlap="skip",
        ttl_ms=600_000, retries=0, host=host, history_length=100,
    )  # fmt: skip
    admission = api.store.scripts.begin(name, start, now_ms=to_ms(began))
    if outcome is None or not admission.runs:
        return admission.outcome
    end = RunEnd(
        task_id=task_id, tick_ms=to_ms(tick), outcome=outcome, error=error,
        duration_ms=int(seconds * 1000), host=host, history_length=100,
    )  # fmt: skip
    api.store.scripts.finish(name, end, now_ms=to_ms(began + timedelta(seconds=seconds)))
    return admission.outcome


def snapshot(url: str) -> dict[Any, Any]:
    client = redis.Redis.from_url(url)
    try:
        return {key: (client.type(key), client.dump(key)) for key in client.scan_iter()}
    finally:
        client.close()


def client_for(redis_url: str, broker_url: str) -> Periodiq:
    """The API of a new app on these servers (close its Redis client and the app after)."""
    app = Celery("cli-test", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    return periodiq(app)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def app(redis_url: str, broker_url: str) -> Iterator[Celery]:
    app = Celery("cli-test", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    yield app
    periodiq(app).store.client.close()
    app.close()


@pytest.fixture
def offline(broker_url: str) -> Iterator[Celery]:
    """An app whose schedule Redis is not running."""
    app = Celery("cli-offline", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = f"redis://127.0.0.1:{free_port()}/0"
    yield app
    periodiq(app).store.client.close()
    app.close()


@pytest.fixture
def populated(api: Periodiq) -> Periodiq:
    """A report that ran twice (once failing), a paused sync, and a nightly cleanup."""
    api.add("report", "proj.report", every=60, start_at=START, owner="team")
    api.add("sync", "proj.sync", every=600, start_at=START, owner="team")
    api.pause("sync", note="migration")
    api.add("cleanup", "proj.cleanup", cron="0 3 * * *", tz="Europe/Berlin", start_at=START)
    tick = START - timedelta(hours=2)
    record_run(api, "report", tick, tick, outcome="succeeded")
    later = tick + timedelta(minutes=1)
    record_run(api, "report", later, later, outcome="failed", error="ValueError: no ledger")
    return api


# the command group


def test_help_lists_every_command_with_one_line_of_help(app: Celery) -> None:
    result = cli(app, "--help")

    listed = re.findall(r"^  (\w+)\s{2,}(\S.*)$", result.stdout, re.MULTILINE)
    assert [name for name, _ in listed] == sorted(COMMANDS)
    assert all(not text.endswith("...") for _, text in listed)  # nothing cut short
    assert "Exit codes:" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_documents_the_exit_codes(app: Celery, command: str) -> None:
    result = cli(app, command, "--help")

    assert result.exit_code == 0
    assert "3  no entry with that name" in result.stdout
    assert "4  Redis or the broker is unreachable" in result.stdout


def test_an_unknown_command_is_a_one_line_usage_error(app: Celery) -> None:
    result = cli(app, "lst")

    assert result.exit_code == 2
    assert "No such command 'lst'" in one_error_line(result)


# list


def test_list_shows_entries_soonest_first_with_state_schedule_and_counters(
    populated: Periodiq,
) -> None:
    result = cli(populated.app, "list", "--now", NOW)

    assert result.exit_code == 0
    names = re.findall(r"^(\S+)\s", result.stdout, re.MULTILINE)
    assert names == ["NAME", "report", "cleanup", "sync", "3"]  # last: the summary line
    assert "report   active  2090-01-01 00:00:00 (in 1h)  failed 59m ago\n" in result.stdout
    assert "  @every 1m — every 1 minute from 2090-01-01 00:00:00 UTC\n" in result.stdout
    assert "  owner team · since added: 2 runs, 1 failed\n" in result.stdout
    assert "  owner team · note: migration\n" in result.stdout
    assert result.stdout.endswith("3 entries: 2 active, 1 paused\n")


def test_list_shows_every_next_run_in_utc_and_each_entrys_zone_on_its_schedule_line(
    populated: Periodiq,
) -> None:
    result = cli(populated.app, "list", "--now", NOW)

    assert result.stdout.splitlines()[0].split()[:5] == ["NAME", "STATE", "NEXT", "RUN", "(UTC)"]
    # cleanup fires at 03:00 Berlin time, 02:00 UTC in winter
    assert "cleanup  active  2090-01-01 02:00:00 (in 3h)  never\n" in result.stdout
    assert "  0 3 * * * — at 03:00 every day, Europe/Berlin\n" in result.stdout
    assert " CET" not in result.stdout
    shown = cli(populated.app, "show", "cleanup", "--now", NOW).stdout
    assert "  next run    2090-01-01 03:00:00 CET (in 3h00m)\n" in shown


def test_list_says_a_next_run_is_due_not_now_once_it_is_past(populated: Periodiq) -> None:
    result = cli(populated.app, "list", "--now", "2090-01-01T00:00:05Z")
    exactly = cli(populated.app, "list", "--now", "2090-01-01T00:00:00Z")
    nearly = cli(populated.app, "list", "--now", "2089-12-31T23:59:59.500Z")

    assert "report   active  00:00:00 (due 5s ago)  failed 1h ago\n" in result.stdout
    assert "report   active  00:00:00 (due now)  failed 1h ago\n" in exactly.stdout
    assert "report   active  2090-01-01 00:00:00 (due now)  failed 1h ago\n" in nearly.stdout
    assert "(now)" not in result.stdout + exactly.stdout + nearly.stdout


def test_list_says_when_no_beat_is_running_to_send_the_runs_due(populated: Periodiq) -> None:
    without = cli(populated.app, "list")
    register_beat(populated)
    with_a_beat = cli(populated.app, "list")
    every_page = cli(populated.app, "list", "--all")

    no_beat = "No beat is running: no run is sent (start one: celery -A PROJ beat -S periodiq).\n"
    assert without.stdout.endswith("3 entries: 2 active, 1 paused\n" + no_beat)
    assert with_a_beat.stdout.endswith("3 entries: 2 active, 1 paused\n")
    assert every_page.stdout.endswith("3 entries: 2 active, 1 paused\n")


def test_list_fits_80_columns(populated: Periodiq) -> None:
    populated.add("a-rather-long-entry-name-for-a-report", "proj.report", every=60, start_at=START)

    result = cli(populated.app, "list", "--now", NOW)

    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_list_filters_by_owner_and_by_state(populated: Periodiq) -> None:
    by_owner = cli(populated.app, "list", "--owner", "team", "--json")
    by_state = cli(populated.app, "list", "--state", "paused", "--state", "running", "--json")

    assert [item["name"] for item in json.loads(by_owner.stdout)] == ["report", "sync"]
    assert [item["name"] for item in json.loads(by_state.stdout)] == ["sync"]


def test_list_json_has_the_documented_shape(populated: Periodiq) -> None:
    result = cli(populated.app, "list", "--json")

    report = json.loads(result.stdout)[0]
    assert list(report) == [
        "name", "state", "note", "paused_until", "in_window", "problem", "task", "schedule", "form",
        "description", "tz", "owner", "group", "source", "enabled", "next_run", "last_run",
        "last_status", "last_error",
        "last_duration_ms", "last_finished", "last_task_id", "running_task_id", "counters",
        "last_success", "overdue_since", "failing_since", "failures_in_a_row", "runs",
        "max_runs", "runs_left",
    ]  # fmt: skip
    assert report["next_run"] == "2090-01-01T00:00:00+00:00"
    assert report["last_run"] == "2089-12-31T22:01:00+00:00"
    assert (report["last_status"], report["last_error"]) == ("failed", "ValueError: no ledger")
    assert report["counters"] == {"failed": 1, "started": 2, "succeeded": 1}


def test_list_of_an_empty_schedule_says_so(app: Celery) -> None:
    result = cli(app, "list")

    assert (result.exit_code, result.stdout) == (0, "No entries.\n")


def test_list_output_has_no_colour_off_a_terminal(populated: Periodiq) -> None:
    result = cli(populated.app, "list")

    assert "\x1b[" not in result.output


# show


def test_show_prints_definition_policy_state_next_runs_and_history(populated: Periodiq) -> None:
    result = cli(populated.app, "show", "report", "--now", NOW)

    assert result.exit_code == 0
    out = result.stdout
    assert out.startswith("report  active\n")
    assert "  tolerance   auto: 10% of the interval (6 s)\n" in out
    assert "  timebox     auto: half the interval (30 s, hard limit 6 s later)\n" in out
    assert "  last error  ValueError: no ledger\n" in out
    assert "Next 10 runs (UTC)\n  Sun 2090-01-01 00:00:00 UTC  in 1h00m\n" in out
    assert "  Sun 2090-01-01 00:09:00 UTC  in 1h09m\n\nLast 4 events\n" in out
    assert "    ValueError: no ledger\n" in out  # the error under its failed run


def test_show_json_adds_definition_effective_policy_upcoming_and_history(
    populated: Periodiq,
) -> None:
    result = cli(populated.app, "show", "report", "--json", "--now", NOW)

    shown = json.loads(result.stdout)
    assert shown["definition"]["kwargs"] == {}
    assert shown["effective"] == {
        "interval": 60.0, "tolerance": 6.0, "timebox": 30.0, "time_limit": 36.0,
        "alert_after": 150.0,
    }  # fmt: skip
    assert shown["upcoming"][:2] == ["2090-01-01T00:00:00+00:00", "2090-01-01T00:01:00+00:00"]
    assert [event["kind"] for event in shown["history"]] == [
        "failed", "started", "succeeded", "started"
    ]  # fmt: skip
    assert (shown["checkpoint"], shown["raw_definition"]) == (False, None)


def test_show_marks_a_saved_checkpoint(populated: Periodiq) -> None:
    populated.store.client.set(
        populated.store.keys.of("report").checkpoint("report"), json.dumps({"page": 3})
    )

    result = cli(populated.app, "show", "report")

    assert "  checkpoint  saved: the next run resumes from it\n" in result.stdout


# history and failures


def test_history_lists_events_newest_first_with_errors_below(populated: Periodiq) -> None:
    result = cli(populated.app, "history", "report")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["AT", "(UTC)", "EVENT", "TICK", "TASK", "DETAIL"]
    assert lines[1].split()[2:4] == ["failed", "22:01:00"]
    assert lines[1].endswith("500 ms on worker-1")
    assert lines[2] == "  ValueError: no ledger"
    assert [line.split()[2] for line in lines[3:]] == ["started", "succeeded", "started"]


def test_history_failures_and_limit(populated: Periodiq) -> None:
    only_failures = cli(populated.app, "history", "report", "--failures", "--json")
    limited = cli(populated.app, "history", "report", "--limit", "1", "--json")

    assert [event["kind"] for event in json.loads(only_failures.stdout)] == ["failed"]
    assert [event["kind"] for event in json.loads(limited.stdout)] == ["failed"]
    event = json.loads(limited.stdout)[0]
    assert (event["error_type"], event["error_message"]) == ("ValueError", "no ledger")
    assert (event["duration_ms"], event["host"]) == (500, "worker-1")


def test_history_says_no_failures_when_only_failures_were_asked_for(api: Periodiq) -> None:
    api.add("quiet", "proj.quiet", every=60, start_at=START)

    failures = cli(api.app, "history", "quiet", "--failures")
    events = cli(api.app, "history", "quiet")

    assert (failures.exit_code, failures.stdout) == (0, "No failures.\n")
    assert (events.exit_code, events.stdout) == (0, "No events.\n")


def test_failures_lists_the_newest_failures_across_entries(populated: Periodiq) -> None:
    tick = START - timedelta(minutes=30)
    record_run(populated, "cleanup", tick, tick, outcome="timeboxed", seconds=2)

    result = cli(populated.app, "failures")
    as_json = json.loads(cli(populated.app, "failures", "--json").stdout)

    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [
        f"2090-01-01 00:30:02 CET  cleanup  timeboxed  {as_json[0]['task_id'][:8]}",
        "  stopped at its timebox",
        f"2089-12-31 22:01:00 UTC  report   failed     {as_json[1]['task_id'][:8]}",
        "  ValueError: no ledger",
    ]
    assert [(item["entry"], item["kind"]) for item in as_json] == [
        ("cleanup", "timeboxed"), ("report", "failed")
    ]  # fmt: skip


def test_failures_of_a_healthy_schedule_says_so(app: Celery) -> None:
    assert cli(app, "failures").stdout == "No failures.\n"


# next


def test_next_previews_a_schedule_on_its_zone_across_a_dst_change(app: Celery) -> None:
    result = cli(
        app, "next", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28T12:00Z", "-n", "2"
    )

    assert result.stdout == (
        "schedule  30 2 * * * (cron)\n"
        "means     at 02:30 every day, Europe/Berlin\n"
        "from      2026-03-28 13:00:00 CET\n"
        "\n"
        "  1  Sun 2026-03-29 03:00:00 CEST  in 13h00m\n"
        "  2  Mon 2026-03-30 02:30:00 CEST  in 1d12h\n"
    )


def test_next_hashes_h_with_the_key(app: Celery) -> None:
    result = cli(
        app, "next", "H/15 * * * *", "--key", "make-report", "--from", "2026-01-01T00:00", "-n",
        "3", "--json",
    )  # fmt: skip

    assert json.loads(result.stdout) == {
        "spec": "H/15 * * * *",
        "form": "cron",
        "description": "every 15 minutes (:10, :25, :40, :55), UTC",
        "tz": "UTC",
        "from": "2026-01-01T00:00:00+00:00",
        "runs": [
            "2026-01-01T00:10:00+00:00", "2026-01-01T00:25:00+00:00", "2026-01-01T00:40:00+00:00"
        ],
    }  # fmt: skip


def test_next_does_not_need_redis(offline: Celery) -> None:
    result = cli(offline, "next", "@every 90s", "-n", "1", "--from", "2026-01-01T00:00:00Z")

    assert result.exit_code == 0
    assert "  1  Thu 2026-01-01 00:01:30 UTC  in 1m30s\n" in result.stdout


def test_next_of_an_event_schedule_explains_it_has_no_clock_times(app: Celery) -> None:
    result = cli(app, "next", "@reboot")

    assert "  no clock times: fires when the beat cluster starts\n" in result.stdout


# pause, resume, run


def test_pause_and_resume(populated: Periodiq) -> None:
    paused = cli(populated.app, "pause", "report", "--note", "bank holiday")
    while_paused = populated.get("report")
    resumed = cli(populated.app, "resume", "report")

    assert paused.stdout == "Paused report (note: bank holiday).\n"
    assert (while_paused.status, while_paused.note) == ("paused", "bank holiday")
    assert resumed.stdout.startswith("Resumed report; next run 2090-01-01 00:00:00 UTC (in ")
    assert (populated.get("report").status, populated.get("report").note) == ("active", None)


def test_run_sends_a_run_to_the_broker_now(populated: Periodiq, broker_url: str) -> None:
    result = cli(populated.app, "run", "report")

    task_id = re.fullmatch(r"Sent a run of report as task (\S+)\.\n", result.stdout)
    assert task_id is not None
    broker = redis.Redis.from_url(broker_url)
    messages = [json.loads(raw) for raw in broker.lrange("celery", 0, -1)]
    broker.close()
    assert [message["headers"]["id"] for message in messages] == [task_id.group(1)]
    assert populated.history("report", limit=1)[0].kind == "triggered"


# delete


def test_delete_asks_first_and_a_no_changes_nothing(populated: Periodiq, redis_url: str) -> None:
    before = snapshot(redis_url)

    result = cli(populated.app, "delete", "report", input="n\n")

    assert result.exit_code == 1
    assert "Delete entry 'report' with its state and history? [y/N]" in result.stderr
    assert "not confirmed, nothing deleted" in result.stderr
    assert snapshot(redis_url) == before


def test_delete_with_yes_removes_the_entry(populated: Periodiq) -> None:
    result = cli(populated.app, "delete", "report", input="y\n")

    assert (result.exit_code, result.stdout) == (0, "Deleted report.\n")
    assert [stored.name for stored in populated.list()] == ["cleanup", "sync"]


def test_delete_owner_lists_what_it_will_delete_and_yes_skips_the_question(
    populated: Periodiq,
) -> None:
    asked = cli(populated.app, "delete", "--owner", "team", input="y\n")

    assert "Delete 2 entries with owner 'team': report, sync? [y/N]" in asked.stderr
    assert asked.stdout == "Deleted report, sync.\n"
    assert [stored.name for stored in populated.list()] == ["cleanup"]


def test_delete_without_a_terminal_answer_deletes_nothing(populated: Periodiq) -> None:
    result = cli(populated.app, "delete", "--owner", "team", input="")

    assert result.exit_code == 1
    assert len(populated.list(owner="team")) == 2


# add and update


def test_add_creates_an_entry_with_every_option(api: Periodiq) -> None:
    result = cli(
        api.app, "add", "report", "proj.report", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
        "--args", '[2090, "eu"]', "--kwargs", '{"full": true}', "--queue", "reports",
        "--priority", "5", "--owner", "billing", "--tolerance", "1m", "--timebox", "none",
        "--grace", "5", "--overlap", "allow", "--catchup", "all", "--catchup-window", "1h",
        "--jitter", "2.5", "--start-at", "2090-01-01T00:00", "--end-at", "2091-01-01T00:00:00Z",
        "--disabled",
    )  # fmt: skip

    assert result.stdout == (
        "Added report: 30 2 * * * (at 02:30 every day, Europe/Berlin); no next run (disabled).\n"
    )
    entry = api.get("report").entry
    assert entry is not None
    assert (entry.args, entry.kwargs) == ([2090, "eu"], {"full": True})
    assert (entry.options, entry.owner, entry.enabled) == (
        {"queue": "reports", "priority": 5}, "billing", False
    )  # fmt: skip
    assert (entry.tolerance, entry.timebox, entry.grace, entry.jitter) == (60.0, None, 5.0, 2.5)
    assert (entry.overlap, entry.catchup, entry.catchup_window) == ("allow", "all", 3600.0)
    assert entry.start_at == datetime(2089, 12, 31, 23, tzinfo=UTC)  # midnight in Berlin
    assert entry.end_at == datetime(2091, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("option", "value", "schedule"),
    [
        ("--every", "90", "@every 1m30s"),
        ("--every", "1h30m", "@every 1h30m"),
        ("--every", "@every 2d", "@every 2d"),
        ("--calendar", "Mon..Fri 09:00", "Mon..Fri 09:00"),
        ("--cron", "@reboot", "@reboot"),
        ("--at", "2090-01-01T09:00:00+01:00", "2090-01-01T08:00:00+00:00"),
        ("--at", "2090-01-01T08:00:00.5Z", "2090-01-01T08:00:00.500000+00:00"),
    ],
)
def test_add_takes_every_schedule_form(
    api: Periodiq, option: str, value: str, schedule: str
) -> None:
    result = cli(api.app, "add", "report", "proj.report", option, value)

    assert result.exit_code == 0, result.stderr
    entry = api.get("report").entry
    assert entry is not None
    assert entry.schedule == schedule


def test_update_changes_only_the_options_given(api: Periodiq) -> None:
    api.add(
        "report", "proj.report", every=60, start_at=START, owner="team",
        options={"queue": "reports", "priority": 5}, kwargs={"full": True},
    )  # fmt: skip

    result = cli(api.app, "update", "report", "--every", "2m", "--queue", "", "--owner", "")

    assert result.stdout.startswith(
        "Updated report: @every 2m (every 2 minutes from 2090-01-01 00:00:00 UTC); "
        "next run 2090-01-01 00:00:00 UTC (in "
    )
    entry = api.get("report").entry
    assert entry is not None
    assert (entry.schedule, entry.options, entry.owner) == ("@every 2m", {"priority": 5}, None)
    assert (entry.kwargs, entry.start_at) == ({"full": True}, START)


def test_update_clears_a_bound_with_none(api: Periodiq) -> None:
    api.add("report", "proj.report", every=60, start_at=START)

    cli(api.app, "update", "report", "--start-at", "none", "--task", "proj.other")

    entry = api.get("report").entry
    assert entry is not None
    assert (entry.start_at, entry.task) == (None, "proj.other")


def test_add_at_prints_the_one_off_and_its_run(api: Periodiq) -> None:
    result = cli(api.app, "add", "launch", "proj.t", "--at", "2090-01-01T09:00:00+01:00",
                 "--tz", "Europe/Berlin")  # fmt: skip

    assert result.stdout.startswith(
        "Added launch: 2090-01-01T08:00:00+00:00 (once at 2090-01-01 09:00:00 CET); "
        "next run 2090-01-01 09:00:00 CET (in "
    )
    shown = json.loads(cli(api.app, "show", "launch", "--json", "--now", NOW).stdout)
    assert (shown["form"], shown["state"]) == ("at", "active")
    assert shown["upcoming"] == ["2090-01-01T09:00:00+01:00"]
    assert (
        "schedule    2090-01-01T08:00:00+00:00 (one-off)\n"
        in cli(api.app, "show", "launch", "--now", NOW).stdout
    )


# beats and doctor


def register_beat(
    api: Periodiq, ticks: int = 7, pid: int = 4242, declares: dict[str, str] | None = None
) -> None:
    """What a starting beat writes (beat.lua), with a last tick, declaring ``declares``
    (entry name -> definition digest; none by default)."""
    beat_id = f"beat-host:{pid}:abc"
    names = declares or {}
    digest = "-".join(f"{name}={value}" for name, value in sorted(names.items())) or "none"
    api.store.declare(digest, names)
    info = {"host": "beat-host", "pid": pid, "version": "0.1.0", "ticks_claimed": ticks}
    api.store.scripts.heartbeat(beat_id, "start", 60_000, info, declared=digest)
    api.store.scripts.heartbeat(beat_id, "alive", 60_000, {"last_tick": api.store.now_ms()}, digest)


def test_beats_lists_live_beats(api: Periodiq) -> None:
    register_beat(api)

    text = cli(api.app, "beats")
    shapes = json.loads(cli(api.app, "beats", "--json").stdout)

    assert text.stdout.splitlines()[0].split() == [
        "HOST", "PID", "VERSION", "UPTIME", "LAST", "TICK", "TICKS", "CLAIMED", "DECLARES"
    ]  # fmt: skip
    assert text.stdout.splitlines()[1].split()[:3] == ["beat-host", "4242", "0.1.0"]
    assert text.stdout.splitlines()[1].split()[-1] == "none"
    assert list(shapes[0]) == [
        "id", "host", "pid", "version", "started", "seen", "last_tick", "ticks_claimed",
        "partitions", "uptime_s", "last_tick_age_s", "declared", "publishing",
    ]  # fmt: skip
    assert (shapes[0]["pid"], shapes[0]["ticks_claimed"], shapes[0]["declared"]) == (
        4242, 7, "none"
    )  # fmt: skip


def test_beats_without_a_beat_says_nothing_is_scheduled(api: Periodiq) -> None:
    assert cli(api.app, "beats").stdout == "No live beats: nothing is being scheduled.\n"


def test_doctor_passes_with_a_live_beat_and_a_reachable_broker(api: Periodiq) -> None:
    register_beat(api)

    result = cli(api.app, "doctor")

    assert result.exit_code == 0, result.stdout
    assert [line.split()[:2] for line in result.stdout.splitlines()[:6]] == [
        ["ok", "redis"], ["ok", "scripts"], ["ok", "beats"], ["ok", "clock"], ["ok", "broker"],
        ["ok", "entries"],
    ]  # fmt: skip
    assert result.stdout.endswith("\nAll checks passed.\n")


def test_doctor_warns_when_beats_of_two_declaration_sets_are_live(api: Periodiq) -> None:
    register_beat(api, pid=1, declares={"acc.x": "old", "acc.old": "a"})
    register_beat(api, pid=2, declares={"acc.x": "new", "acc.y": "b"})  # declared later
    register_beat(api, pid=3, declares={"acc.x": "new", "acc.y": "b"})

    result = cli(api.app, "doctor", "--json")

    report = json.loads(result.stdout)
    beats = next(check for check in report["checks"] if check["name"] == "beats")
    assert result.exit_code == 0
    assert beats["status"] == "warn"
    assert "3 live beats" in beats["detail"]
    assert (
        "2 declaration sets are live (a rolling deploy, or beats running different code), "
        "newest first: acc.x=ne by beat-host:2, beat-host:3; acc.old= by beat-host:1; "
        "2 names are declared by some sets only, 1 defined differently" in beats["detail"]
    )


def test_doctor_fails_without_a_beat_and_with_a_quarantined_entry(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    result = cli(api.app, "doctor", "--json")

    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["ok"] is False
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses == {
        "redis": "ok", "scripts": "ok", "beats": "fail", "clock": "ok", "broker": "ok",
        "entries": "fail", "due": "ok", "alerts": "ok", "tasks": "ok", "runs": "ok",
        "indexes": "ok",
    }  # fmt: skip
    assert "quarantined: broken (entry data is not JSON" in report["checks"][5]["detail"]


def test_doctor_reports_an_unreachable_redis_and_skips_what_needs_it(offline: Celery) -> None:
    result = cli(offline, "doctor")

    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAIL  redis     cannot reach Redis at redis://127.0.0.1:")
    assert "  → check periodiq_redis_url" in result.stdout
    assert [line.split()[:2] for line in lines if line.startswith("skip")] == [
        ["skip", "scripts"], ["skip", "beats"], ["skip", "clock"], ["skip", "entries"],
        ["skip", "due"], ["skip", "alerts"], ["skip", "tasks"], ["skip", "runs"],
        ["skip", "indexes"],
    ]  # fmt: skip
    assert result.stdout.endswith("\n1 problem found.\n")


# bad input: one line on stderr, a documented exit code, nothing changed


BAD_INPUT = [
    (2, ["list", "--state", "sleeping"], "Invalid value for '--state'"),
    (2, ["list", "--owner", ""], "owner='' is invalid"),
    (2, ["list", "--now", "yesterday"], "is not an ISO 8601 date-time"),
    (2, ["show"], "Missing argument 'NAME'"),
    (3, ["show", "nope"], "no entry named 'nope'"),
    (3, ["history", "nope"], "no entry named 'nope'"),
    (2, ["history", "report", "--limit", "0"], "0 is not in the range x>=1"),
    (2, ["failures", "--limit", "many"], "'many' is not a valid integer"),
    (2, ["next", "0 61 * * *"], "hour field: 61 is out of range (allowed: 0-23)"),
    (
        2,
        ["next", "H * * * *"],
        "H needs a key to hash (allowed: H with key=, usually the entry name); pass --key NAME",
    ),
    (2, ["next", "@daily", "--tz", "Mars/Base"], "'Mars/Base' is not in the tz database"),
    (2, ["next", "@daily", "--from", "soon"], "'soon' is not an ISO 8601 date-time"),
    (2, ["next", "@daily", "-n", "0"], "0 is not in the range 1<=x<=1000"),
    (3, ["pause", "nope"], "no entry named 'nope'"),
    (3, ["resume", "nope"], "no entry named 'nope'"),
    (3, ["run", "nope"], "no entry named 'nope'"),
    (2, ["delete"], "give an entry NAME or --owner TAG, not both or neither"),
    (2, ["delete", "report", "--owner", "team"], "not both or neither"),
    (3, ["delete", "nope", "--yes"], "no entry named 'nope'"),
    (3, ["delete", "--owner", "nobody", "--yes"], "no entries have owner 'nobody'"),
    (2, ["add", "new", "proj.t"], "give one of --cron, --every, --calendar, --at"),
    (2, ["add", "new", "proj.t", "--at", "2090-01-01T09:00"], "at='2090-01-01T09:00:00': has no"),
    (2, ["add", "new", "proj.t", "--at", "2001-01-01T09:00Z"], "is already past"),
    (2, ["add", "new", "proj.t", "--at", "2090-01-01T09:00Z", "--every", "1"], "not several"),
    (2, ["add", "new", "proj.t", "--at", "tomorrow"], "'tomorrow' is not an ISO 8601"),
    (2, ["add", "new", "proj.t", "--every", "60", "--max-runs", "0"], "max_runs=0 is invalid"),
    (2, ["update", "report", "--max-runs", "lots"], "'lots' is not a valid integer"),
    (2, ["update", "report", "--max-runs", "-3"], "max_runs=-3 is invalid (allowed: a whole"),
    (2, ["add", "new", "proj.t", "--every", "1", "--cron", "@daily"], "not several"),
    (2, ["add", "new", "proj.t", "--every", "soon"], "'soon' is not a duration"),
    (2, ["add", "new", "proj.t", "--cron", "* * *"], "cron '* * *'"),
    (2, ["add", "new", "proj.t", "--every", "1", "--args", "[1,"], "not valid JSON"),
    (2, ["add", "new", "proj.t", "--every", "1", "--kwargs", "[1]"], "expected a JSON object"),
    (2, ["add", "new", "proj.t", "--every", "1", "--priority", "300"], "300 is not in the range"),
    (2, ["add", "new", "proj.t", "--every", "1", "--tolerance", "-"], "'-' is not seconds"),
    (2, ["add", "new", "proj.t", "--every", "60", "--timebox", "90"], "at most the interval"),
    (2, ["add", "new", "proj.t", "--every", "1", "--start-at", "noon"], "not an ISO 8601"),
    (2, ["add", "new", "proj.t", "--every", "1", "--tz", "Nowhere"], "not in the tz database"),
    (2, ["add", "new", "proj.t", "--every", "1", "--overlap", "queue"], "'--overlap'"),
    (5, ["add", "report", "proj.t", "--every", "1"], "an entry named 'report' already exists"),
    (2, ["update", "report"], "nothing to change: give at least one option"),
    (3, ["update", "nope", "--every", "1"], "no entry named 'nope'"),
    (2, ["update", "report", "--catchup-window", "0"], "catchup_window=0.0 is invalid"),
    (2, ["beats", "extra"], "Got unexpected extra argument (extra)"),
    (2, ["doctor", "--verbose"], "No such option '--verbose'"),
    (2, ["add", "new", "proj.t", "--every", "60", "--failure-threshold", "0"], "0 is not in the"),
    (2, ["add", "new", "proj.t", "--every", "60", "--alert-after", "soon"], "'soon' is not"),
    (2, ["metrics", "--max-entries", "-1"], "-1 is not in the range x>=0"),
    (2, ["serve", "--token", "short"], "--token must be at least 8 characters"),
    (2, ["export", "--source", "nowhere"], "Invalid value for '--source'"),
    (2, ["import", "no-such-file.json"], "No such file or directory"),
    (3, ["backfill", "nope", "--from", "2026-01-01", "--to", "2026-01-02"], "no entry named"),
    (2, ["backfill", "report", "--from", "soon", "--to", "2026-01-02"], "not an ISO 8601"),
    (2, ["backfill", "report", "--to", "2026-01-02"], "Missing option '--from'"),
    (2, ["backfill", "report", "--from", "2026-01-02", "--to", "2026-01-01"], "is empty"),
    (2, ["backfill", "report", "--from", "2026-01-01", "--to", "2090-01-01"], "after now"),
    (
        2,
        ["backfill", "report", "--from", "2026-01-01", "--to", "2026-01-02", "--overlap", "x"],
        "Invalid value for '--overlap'",
    ),
    (
        2,
        ["backfill", "report", "--from", "2026-01-01", "--to", "2026-01-02", "--timeout", "0"],
        "0.0 is not in the range x>0",
    ),
    (2, ["import"], "give one of FILE, --from-redbeat, --from-django-celery-beat (not several"),
    (2, ["import", "-", "--from-redbeat"], "give one of FILE, --from-redbeat, --from-django"),
    (2, ["import", "--from-django-celery-beat", "nope.json"], "No such file or directory"),
    (2, ["import", "-", "--naive-tz", "UTC"], "--naive-tz applies only with --from-django"),
    (2, ["import", "-", "--skip-invalid"], "--skip-invalid applies only with --from-*"),
    (2, ["import", "-", "--redbeat-url", "redis://h"], "--redbeat-url applies only with --from-"),
    (2, ["import", "--from-redbeat", "--redbeat-url", "amqp://h"], "URL amqp://h is invalid"),
    (2, ["import", "--from-redbeat", "--redbeat-key-prefix", ""], "key_prefix='' is invalid"),
    (
        4,
        ["import", "--from-redbeat", "--redbeat-url", "redis://127.0.0.1:1/0"],
        "RedBeat's Redis at redis://127.0.0.1:1/0 is unreachable",
    ),
    (2, ["simulate", "--from", "soon"], "'soon' is not an ISO 8601 date-time"),
    (2, ["simulate", "--from", "2090-01-01", "--to", "2089-12-31"], "is not after start"),
    (2, ["simulate", "--from", "2090-01-01", "--to", "+400d"], "longer than 366 days"),
    (2, ["simulate", "--down", "a..b"], "'a' in 'a..b' is not an ISO 8601 date-time"),
    (2, ["simulate", "--down", "+2h"], "'+2h' is not FROM..TO"),
    (2, ["simulate", "--down", "+2h..+1h"], "ends before it starts"),
    (2, ["simulate", "--down", "+1h..+2d"], "is not inside the simulated span"),
    (2, ["simulate", "--limit", "-1"], "-1 is not in the range 0<=x<=100000"),
    (3, ["simulate", "--name", "nope"], "no entry named 'nope'"),
    (2, ["audit", "--since", "yesterday"], "since='yesterday' is invalid"),
    (2, ["audit", "report", "--since", "2026-01-01T00:00"], "has no time zone"),
    (2, ["audit", "--limit", "0"], "0 is not in the range x>=1"),
    (2, ["window", "add", "w", "--schedule", "0 2 * *", "--duration", "1h"], "has 4 fields"),
    (2, ["window", "add", "w", "--schedule", "@daily"], "needs duration="),
    (2, ["window", "add", "w", "--schedule", "@daily", "--duration", "soon"], "duration="),
    (2, ["window", "add", "w", "--start", "2090-01-02", "--end", "2090-01-01"], "not after start"),
    (2, ["window", "add", "w", "--start", "2020-01-01", "--end", "2020-01-02"], "in the past"),
    (
        2,
        ["window", "add", "w", "--scope", "team:x", "--schedule", "@daily", "--duration", "1h"],
        "scope='team:x' is unknown",
    ),
    (2, ["window", "add", "w", "--policy", "later"], "Invalid value for '--policy'"),
    (2, ["window", "add", "w", "--start", "soon"], "'soon' is not an ISO 8601 date-time"),
    (
        3,
        ["window", "add", "w", "--scope", "entry:nope", "--schedule", "@daily", "--duration", "1h"],
        "no entry named 'nope'",
    ),
    (2, ["window", "remove", "nope"], "no window 'nope'"),
    (2, ["update", "report", "--exclude", "2026-02-30"], "exclude='2026-02-30' is invalid"),
]


@pytest.mark.parametrize(
    ("code", "args", "message"), BAD_INPUT, ids=[" ".join(args) for _, args, _ in BAD_INPUT]
)
def test_bad_input_is_one_line_with_its_exit_code_and_changes_nothing(
    populated: Periodiq, redis_url: str, code: int, args: list[str], message: str
) -> None:
    before = snapshot(redis_url)

    result = cli(populated.app, *args)

    assert result.exit_code == code
    assert message in one_error_line(result)
    assert result.stdout == ""
    assert snapshot(redis_url) == before


def test_every_command_covers_its_bad_input() -> None:
    assert {args[0] for _, args, _ in BAD_INPUT} == set(COMMANDS)


@pytest.mark.parametrize(
    "args",
    [
        ["list"], ["show", "report"], ["history", "report"], ["failures"], ["pause", "report"],
        ["resume", "report"], ["run", "report"], ["delete", "report", "--yes"],
        ["add", "report", "proj.t", "--every", "1"], ["update", "report", "--every", "1"],
        ["beats"],
    ],
    ids=lambda args: args[0],
)  # fmt: skip
def test_an_unreachable_redis_is_one_line_and_exit_code_4(offline: Celery, args: list[str]) -> None:
    result = cli(offline, *args)

    assert result.exit_code == 4
    assert re.fullmatch(
        r"Error: Redis at redis://127\.0\.0\.1:\d+/0 is unreachable: .*Connection refused\.",
        one_error_line(result),
    )


def test_an_invalid_setting_is_one_line_and_exit_code_2(broker_url: str) -> None:
    app = Celery("cli-bad-setting", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = "http://localhost"

    result = cli(app, "list")

    app.close()
    assert result.exit_code == 2
    assert "setting periodiq_redis_url='http://localhost' is invalid" in one_error_line(result)


def test_run_with_an_unreachable_broker_is_exit_code_4(redis_url: str) -> None:
    app = Celery("cli-no-broker", broker=f"redis://127.0.0.1:{free_port()}/0", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.broker_connection_max_retries = 0
    api = periodiq(app)
    api.add("report", "proj.report", every=60, start_at=START)

    result = cli(app, "run", "report")

    api.store.client.close()
    app.close()
    assert result.exit_code == 4
    assert "broker unreachable (" in one_error_line(result)


def test_colour_marks_states_and_outcomes_and_leaves_unknown_kinds_plain() -> None:
    colour, plain = Style(True), Style(False)

    assert colour("failed", "failed") == "\x1b[31m\x1b[1mfailed\x1b[0m"
    assert colour("active", "active") == "\x1b[32mactive\x1b[0m"
    assert colour("later", "a-kind-from-a-newer-version") == "later"
    assert plain("failed", "failed") == "failed"


@pytest.mark.parametrize(
    ("kind", "look"),
    [
        ("head", {"bold": True}),
        ("dim", {"dim": True}),
        ("succeeded", {"fg": "green"}),
        ("failed", {"fg": "red", "bold": True}),
        ("paused", {"fg": "yellow"}),
        ("running", {"fg": "cyan"}),
    ],
)
def test_colour_writes_the_escapes_click_style_writes_for_each_role(
    kind: str, look: dict[str, Any]
) -> None:
    assert Style(True)("text", kind) == click.style("text", **look)


@pytest.mark.parametrize(
    "args", [["run", "broken"], ["resume", "broken"], ["update", "broken", "--every", "1"]]
)
def test_a_quarantined_entry_cannot_be_steered_only_shown_paused_or_deleted(
    api: Periodiq, redis_client: redis.Redis, args: list[str]
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", '{"name": "broken"}')

    result = cli(api.app, *args)

    assert result.exit_code == 2
    assert "entry 'broken' is quarantined: entry 'broken': missing fields" in one_error_line(result)


def test_show_json_of_a_quarantined_entry_gives_the_stored_text(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    shown = json.loads(cli(api.app, "show", "broken", "--json").stdout)

    assert (shown["state"], shown["raw_definition"], shown["definition"]) == (
        "quarantined", "{not json", None
    )  # fmt: skip
    assert shown["problem"].startswith("entry data is not JSON")
    assert (shown["upcoming"], shown["effective"], shown["task"]) == ([], None, None)
