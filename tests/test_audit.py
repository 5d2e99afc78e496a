"""The audit trail, on a private Redis: each change through the API, the CLI, an import
and a beat's timed-pause end is recorded once, by the script that makes it, with who,
when and why; a refused change records nothing; the trail's caps; malformed input.
A real beat's reconcile is in ``tests/test_audit_processes.py``."""

from __future__ import annotations

import getpass
import io
import json
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery

from celery_periodiq import (
    DeclaredEntryError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    Periodiq,
    PeriodiqError,
    periodiq,
)
from celery_periodiq.beat.pauses import end_pauses
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.audit import AuditRecord
from celery_periodiq.protocol.records import Settlement
from tests.processes import wait_for
from tests.test_api import snapshot
from tests.test_cli import cli, one_error_line, record_run

TASK = "proj.tasks.report"
PAST = datetime(2020, 1, 1, tzinfo=UTC)
ME = f"{getpass.getuser()}@{socket.gethostname()}"


def make_api(broker_url: str, redis_url: str, **settings: object) -> Periodiq:
    app = Celery("t", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.update(settings)
    return periodiq(app)


@pytest.fixture
def api(broker_url: str, redis_url: str) -> Iterator[Periodiq]:
    client = make_api(broker_url, redis_url)
    yield client
    client.store.client.close()
    client.app.close()


def actions(records: list[AuditRecord]) -> list[tuple[str, str, str, str]]:
    """(action, actor, via, note) of each record, oldest first."""
    return [(r.action, r.actor, r.via, r.note) for r in reversed(records)]


def test_each_change_through_the_api_is_recorded_once_with_who_when_and_why(
    broker_url: str, redis_url: str
) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_length=10)  # the default keeps 5
    before = api.now()
    api.add("report", TASK, every=60, start_at=PAST, actor="alice")
    api.update("report", every=120, args=[1], actor="bob")
    api.pause("report", note="db migration", until="2h", actor="carol")
    api.resume("report", actor="carol")
    task_id = api.trigger("report", actor="dave")
    api.delete("report", actor="erin")

    records = api.audit("report")
    assert actions(records) == [
        ("add", "alice", "api", ""),
        ("update", "bob", "api", ""),
        ("pause", "carol", "api", "db migration"),
        ("resume", "carol", "api", ""),
        ("trigger", "dave", "api", ""),
        ("delete", "erin", "api", ""),
    ]
    update, pause, trigger = records[4], records[3], records[1]
    assert update.changes == {"schedule": ("@every 1m", "@every 2m"), "args": (None, [1])}
    assert pause.until is not None
    assert pause.until > before + timedelta(hours=1)
    assert trigger.task_id == task_id
    floor = before.replace(microsecond=before.microsecond // 1000 * 1000)  # kept to the ms
    assert all(floor <= record.at <= api.now() for record in records)
    # a deleted entry's trail stays; written again, the entry keeps it
    api.add("report", TASK, every=60, start_at=PAST)
    assert [r.action for r in api.audit("report", limit=2)] == ["add", "delete"]
    assert api.audit("report")[0].actor == ME  # no actor given: this process's user@host


def test_an_update_records_each_changed_field_and_a_large_value_by_its_size(
    api: Periodiq,
) -> None:
    api.add("report", TASK, every=60, kwargs={"small": 1}, owner="team")
    api.update("report", kwargs={"blob": "x" * 400}, owner=None, tz="Europe/Berlin")

    assert api.audit("report")[0].changes == {
        "kwargs": ({"small": 1}, "(411 bytes)"),
        "owner": ("team", None),
        "tz": (None, "Europe/Berlin"),  # None: the field's default (the app's zone)
    }


def test_many_entries_at_once_record_one_record_each(api: Periodiq) -> None:
    api.add_many(
        [{"name": f"r{n}", "task": TASK, "every": 60, "owner": "team"} for n in range(3)],
        actor="ops",
    )
    api.pause("r0", note="own pause")
    assert api.pause_many(owner="team", note="freeze", actor="ops") == ["r1", "r2"]
    assert api.resume_many(match="r*", actor="ops") == ["r0", "r1", "r2"]
    assert sorted(api.delete_owner("team", actor="ops")) == ["r0", "r1", "r2"]

    by_entry = {name: actions(api.audit(name)) for name in ("r0", "r1", "r2")}
    assert by_entry["r0"] == [
        ("add", "ops", "api", ""),
        ("pause", ME, "api", "own pause"),  # paused already: pause_many left it
        ("resume", "ops", "api", ""),
        ("delete", "ops", "api", ""),
    ]
    assert (
        by_entry["r1"]
        == by_entry["r2"]
        == [
            ("add", "ops", "api", ""),
            ("pause", "ops", "api", "freeze"),
            ("resume", "ops", "api", ""),
            ("delete", "ops", "api", ""),
        ]
    )
    assert len(api.audit()) == 12


def test_a_refused_change_records_nothing(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=PAST, actor="alice")
    refusals = [
        (EntryExistsError, lambda: api.add("report", TASK, every=60, actor="x")),
        (EntryNotFoundError, lambda: api.update("nope", every=60, actor="x")),
        (EntryNotFoundError, lambda: api.pause("nope", actor="x")),
        (EntryNotFoundError, lambda: api.delete("nope", actor="x")),
        (EntryNotFoundError, lambda: api.trigger("nope", actor="x")),
        (PeriodiqError, lambda: api.pause("report", until="2001-01-01T00:00:00Z", actor="x")),
        (PeriodiqError, lambda: api.update("report", every="soon", actor="x")),
        (PeriodiqError, lambda: api.add("once", TASK, at="2001-01-01T00:00:00Z", actor="x")),
    ]
    for error, change in refusals:
        with pytest.raises(error):
            change()
    assert api.resume_many(all=True, actor="x") == []  # none was paused

    assert actions(api.audit()) == [("add", "alice", "api", "")]


def test_a_declared_entry_changed_without_force_records_nothing(api: Periodiq) -> None:
    api.store.put("reconcile", [build_entry("nightly", TASK, source="code", every=60)])
    with pytest.raises(DeclaredEntryError):
        api.delete("nightly", actor="x")
    with pytest.raises(DeclaredEntryError):
        api.update("nightly", every=30, actor="x")

    assert api.audit("nightly") == []  # put() given no audit context records nothing


@pytest.mark.parametrize("actor", [5, "", "  ", b"alice", "x" * 201, ["alice"]])
def test_a_bad_actor_is_one_clear_error_and_changes_nothing(
    api: Periodiq, redis_url: str, actor: object
) -> None:
    api.add("report", TASK, every=60, start_at=PAST, actor="alice")
    before = snapshot(redis_url)
    changes = [
        lambda: api.add("other", TASK, every=60, actor=actor),  # type: ignore[arg-type]
        lambda: api.update("report", every=30, actor=actor),
        lambda: api.pause("report", actor=actor),  # type: ignore[arg-type]
        lambda: api.pause_many(all=True, actor=actor),  # type: ignore[arg-type]
        lambda: api.delete("report", actor=actor),  # type: ignore[arg-type]
        lambda: api.trigger("report", actor=actor),  # type: ignore[arg-type]
    ]
    for change in changes:
        with pytest.raises(EntryError, match=r"actor=.* is invalid \(allowed: who makes"):
            change()

    assert snapshot(redis_url) == before


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"since": "yesterday"}, "since='yesterday' is invalid"),
        ({"since": -5}, "seconds back must be > 0"),
        ({"since": True}, "since=True is invalid"),
        ({"since": "2026-01-01T00:00"}, "has no time zone"),
        ({"actor": 3}, "actor=3 is invalid"),
        ({"limit": 0}, "limit=0 is invalid"),
    ],
)
def test_a_bad_audit_query_is_one_clear_error(
    api: Periodiq, given: dict[str, object], message: str
) -> None:
    with pytest.raises(PeriodiqError, match=message):
        api.audit(**given)  # type: ignore[arg-type]


def test_the_audit_filters_by_entry_time_and_actor(api: Periodiq) -> None:
    api.add("a", TASK, every=60, actor="alice@laptop")
    api.add("b", TASK, every=60, actor="bob@laptop")
    middle = api.now() + timedelta(milliseconds=2)  # records are kept to the ms
    wait_for(lambda: api.now() > middle, 5, "the Redis clock to pass the middle")
    api.pause("a", actor="bob@laptop")

    assert [(r.name, r.action) for r in api.audit(actor="bob")] == [("a", "pause"), ("b", "add")]
    assert [(r.name, r.action) for r in api.audit(since=middle)] == [("a", "pause")]
    assert len(api.audit(since="1h")) == len(api.audit(since=timedelta(hours=1))) == 3
    assert [r.action for r in api.audit("a", limit=1)] == ["pause"]
    assert api.audit("never-was") == []


def test_the_cli_records_its_os_user_and_host(api: Periodiq) -> None:
    app = api.app
    assert cli(app, "add", "report", TASK, "--every", "60").exit_code == 0
    assert cli(app, "pause", "report", "--note", "looking into it").exit_code == 0
    assert cli(app, "resume", "report").exit_code == 0
    assert cli(app, "delete", "report", "--yes").exit_code == 0

    assert actions(api.audit("report")) == [
        ("add", ME, "cli", ""),
        ("pause", ME, "cli", "looking into it"),
        ("resume", ME, "cli", ""),
        ("delete", ME, "cli", ""),
    ]
    shown = cli(app, "audit", "report", "--json")
    assert [record["action"] for record in json.loads(shown.stdout)] == [
        "delete", "resume", "pause", "add",
    ]  # fmt: skip
    text = cli(app, "audit", "--actor", ME.split("@")[0], "--since", "1h")
    assert "looking into it" in text.stdout
    assert "report" in text.stdout
    assert cli(app, "audit", "--since", "1h", "--actor", "nobody").stdout.strip() == (
        "No audit records."
    )


def test_a_bad_since_in_the_cli_is_one_line_and_changes_nothing(
    api: Periodiq, redis_url: str
) -> None:
    before = snapshot(redis_url)

    result = cli(api.app, "audit", "--since", "last week")

    assert result.exit_code == 2
    assert "since='last week' is invalid" in one_error_line(result)
    assert snapshot(redis_url) == before


def test_an_import_records_each_entry_it_writes(api: Periodiq) -> None:
    api.add("kept", TASK, every=60, start_at=PAST)
    api.add("changed", TASK, every=60, start_at=PAST)
    document = api.export()
    api.delete("kept")
    api.update("changed", every=30)
    api.add("same", TASK, every=60, start_at=PAST)
    document["entries"].append(api.export()["entries"][-1])  # unchanged: not written

    api.import_file(io.StringIO(json.dumps(document)), replace=True, actor="importer")

    assert actions(api.audit("kept", limit=1)) == [
        ("add", "importer", "api", "imported from a file")
    ]
    changed = api.audit("changed", limit=1)[0]
    assert (changed.action, changed.changes) == (
        "update",
        {"schedule": ("@every 30s", "@every 1m")},
    )
    assert [r.action for r in api.audit("same")] == ["add"]
    # the CLI's import: by its user, via the CLI
    api.delete("kept")
    result = cli(api.app, "import", "-", input=json.dumps(document))
    assert result.exit_code == 0, result.output
    assert actions(api.audit("kept", limit=1)) == [("add", ME, "cli", "imported")]


def test_a_timed_pause_ended_by_a_beat_is_recorded_as_that_beats(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    end = api.pause("report", until="1h", actor="alice").paused_until
    assert end is not None

    resumed = end_pauses(api.store, ["report"], to_ms(end) + 1, "host:1:beat")
    ended_again = end_pauses(api.store, ["report"], to_ms(end) + 1, "host:2:beat")

    assert (resumed, ended_again) == (["report"], [])
    assert actions(api.audit("report"))[-1] == (
        "resume",
        "host:1:beat",
        "beat",
        "its timed pause ended",
    )
    assert len(api.audit("report")) == 3


def test_a_backfill_is_recorded_before_its_ticks_are_sent(api: Periodiq) -> None:
    api.add("report", TASK, every=3600, start_at=PAST)
    start = datetime(2024, 1, 1, tzinfo=UTC)

    api.backfill("report", start, start + timedelta(hours=3), overlap="allow", actor="ops")
    api.backfill("report", start, start + timedelta(hours=3), dry_run=True, actor="ops")

    backfill = api.audit("report")[0]
    assert (backfill.action, backfill.actor) == ("backfill", "ops")
    assert backfill.note.startswith("3 ticks, 2024-01-01T00:00:00+00:00 .. ")
    assert len(api.audit("report")) == 2  # the dry run recorded nothing


def test_the_trail_keeps_the_newest_records_of_each_entry(broker_url: str, redis_url: str) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_length=3)
    api.add("report", TASK, every=60, start_at=PAST)
    for n in range(5):
        api.pause("report", note=f"pause {n}")

    assert [r.note for r in api.audit("report")] == ["pause 4", "pause 3", "pause 2"]


def test_a_deleted_entrys_trail_leaves_once_the_window_has_passed(
    broker_url: str, redis_url: str
) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_window=3600, periodiq_partitions=1)
    part = api.store.keys.of("gone")
    api.add("gone", TASK, every=60)
    api.add("recent", TASK, every=60)
    api.delete("gone")
    api.delete("recent")
    assert [r.action for r in api.audit("gone")] == ["delete", "add"]
    # deleted more than the window ago (3600 s)
    api.store.client.zadd(part.audit_newest, {"gone": to_ms(api.now()) - 3_700_000})

    api.add("other", TASK, every=60)  # a record written in the partition prunes it

    assert api.store.client.hget(part.audit, "gone") is None
    assert api.audit("gone") == []
    assert [r.action for r in api.audit("recent")] == ["delete", "add"]
    # each trail left is indexed by its newest record (ms)
    assert api.store.client.zrange(part.audit_newest, 0, -1) == ["recent", "other"]


def test_no_trail_is_kept_with_audit_length_zero(broker_url: str, redis_url: str) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_length=0)
    api.add("report", TASK, every=60)
    api.pause("report")

    assert api.audit() == []
    assert not api.store.client.exists(api.store.keys.of("report").audit)


def test_a_quarantine_is_recorded_once_by_the_beat_or_worker_that_found_it(
    api: Periodiq,
) -> None:
    api.add("vanishing", TASK, every=60, start_at=PAST)
    api.add("damaged", TASK, every=60, start_at=PAST)
    part = api.store.keys.of("vanishing")
    api.store.client.hdel(part.entries, "vanishing")  # deleted outside periodiq
    api.store.client.set(api.store.keys.of("damaged").history("damaged"), "garbage")
    later = to_ms(api.now()) + 120_000

    for _ in range(2):  # quarantined once: recorded once
        api.store.scripts.claim(part, "host:1:beat", 100, 5000, now_ms=later)
        tick = api.now().replace(microsecond=0)
        record_run(api, "damaged", tick, tick, outcome="succeeded", host="worker-7")

    vanished = api.audit("vanishing")[0]
    assert (vanished.action, vanished.actor, vanished.via) == ("quarantine", "host:1:beat", "beat")
    assert "its definition is missing" in vanished.note
    damaged = api.audit("damaged")[0]
    assert (damaged.action, damaged.actor, damaged.via) == ("quarantine", "worker-7", "worker")
    assert "holds a string, not a list" in damaged.note
    assert [len(api.audit(name)) for name in ("vanishing", "damaged")] == [2, 2]


def test_a_quarantine_at_settlement_is_recorded_by_the_beat(api: Periodiq) -> None:
    api.add("bad-options", TASK, every=60, start_at=PAST)
    part = api.store.keys.of("bad-options")
    later = to_ms(api.now()) + 120_000
    (claim,) = api.store.scripts.claim(part, "host:1:beat", 100, 5000, now_ms=later).claims
    problem = "its options cannot be published: queue 'nowhere' is unknown"
    settled = Settlement(claim.id, "bad-options", claim.version, quarantine=problem)

    api.store.scripts.ack(part, "host:1:beat", 40, [settled])

    record = api.audit("bad-options")[0]
    assert (record.action, record.actor, record.via, record.note) == (
        "quarantine", "host:1:beat", "beat", problem,
    )  # fmt: skip


def test_the_dashboard_records_the_name_given_at_sign_in_and_shows_the_trail(
    api: Periodiq,
) -> None:
    from starlette.testclient import TestClient

    from celery_periodiq.web import make_app
    from tests.test_web import TOKEN

    api.add("report", TASK, every=60, start_at=PAST, actor="alice")
    web = TestClient(make_app(api, TOKEN), follow_redirects=False)
    assert web.post("/login", data={"token": TOKEN, "actor": "Bea"}).status_code == 303
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', web.get("/").text)
    assert found is not None
    paused = web.post("/actions/pause/report", data={"note": "checking", "csrf": found[1]})
    bearer = {"Authorization": f"Bearer {TOKEN}", "X-Periodiq-Actor": "deploy-bot"}
    resumed = web.post("/api/actions/resume/report", headers=bearer)
    web.cookies.delete("periodiq_actor")
    web.cookies.set("periodiq_actor", "0" * 64 + ".mallory")  # a forged name is not taken
    ran = web.post("/actions/run/report", data={"csrf": found[1]})

    assert (paused.status_code, resumed.status_code, ran.status_code) == (303, 200, 303)
    assert actions(api.audit("report"))[1:] == [
        ("pause", "Bea", "dashboard", "checking"),
        ("resume", "deploy-bot", "dashboard", ""),
        ("trigger", "signed in at testclient", "dashboard", ""),
    ]
    shown = web.get("/api/audit/report", params={"actor": "Bea"}).json()
    assert [(r["action"], r["note"]) for r in shown] == [("pause", "checking")]
    assert len(web.get("/api/audit", params={"since": "1h"}).json()) == 4
    bad = web.get("/api/audit", params={"since": "soon"})
    assert bad.status_code == 400
    assert "since='soon' is invalid" in bad.json()["error"]
    page = web.get("/entries/report").text
    assert "<h2>Audit</h2>" in page
    assert "Bea" in page
    assert "checking" in page


def test_a_damaged_trail_is_read_as_far_as_it_can_be_and_the_next_write_repairs_it(
    api: Periodiq,
) -> None:
    api.add("report", TASK, every=60, actor="alice")
    part = api.store.keys.of("report")
    kept = api.store.client.hget(part.audit, "report")
    api.store.client.hset(part.audit, "report", "garbage\n" + kept + "\n[1,2")
    readable = actions(api.audit("report"))
    api.store.client.delete(part.audit)
    api.store.client.set(part.audit, "not a hash")
    unreadable = api.audit("report")

    api.pause("report", note="after the damage", actor="bob")

    assert readable == [("add", "alice", "api", "")]
    assert unreadable == []
    assert actions(api.audit("report")) == [("pause", "bob", "api", "after the damage")]


def test_bulk_changes_record_each_entry_changed_and_none_skipped(api: Periodiq) -> None:
    from starlette.testclient import TestClient

    from celery_periodiq.web import make_app
    from tests.test_web import TOKEN

    for name in ("a", "b", "c"):
        api.add(name, TASK, every=60, start_at=PAST, actor="setup")
    api.pause("a", note="own", actor="setup")
    ran = api.trigger_many(names=["a", "b"], actor="ops")
    web = TestClient(make_app(api, TOKEN), follow_redirects=False)
    web.post("/login", data={"token": TOKEN, "actor": "Bea"})
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', web.get("/").text)
    assert found is not None
    paused = web.post(
        "/bulk", data={"csrf": found[1], "action": "pause", "names": ["a", "b"], "note": "n"}
    )
    deleted = api.delete_many(names=["b", "c"], actor="ops")

    assert (list(ran), paused.status_code, list(deleted)) == (["a", "b"], 200, ["b", "c"])
    assert actions(api.audit("a"))[2:] == [("trigger", "ops", "api", "")]  # pause: skipped
    assert actions(api.audit("b"))[1:] == [
        ("trigger", "ops", "api", ""),
        ("pause", "Bea", "dashboard", "n"),
        ("delete", "ops", "api", ""),
    ]
    assert api.audit("b")[2].task_id == ran.task_ids["b"]
    assert actions(api.audit("c"))[1:] == [("delete", "ops", "api", "")]
