"""The maintenance windows' audit trail: each add, change and remove recorded by the
script that makes it (``lua/window.lua``), with who, how and what changed, read back with
the entries' records; a refused change records nothing. Real Redis, the real API and CLI.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from celery_periodiq import EntryError, Periodiq, WindowError
from tests.test_api import snapshot
from tests.test_audit import ME, PAST, TASK, actions, make_api
from tests.test_cli import cli

LATER = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def api(broker_url: str, redis_url: str) -> Iterator[Periodiq]:
    client = make_api(broker_url, redis_url)
    yield client
    client.store.client.close()
    client.app.close()


def test_each_window_change_is_recorded_with_who_and_what_changed(
    broker_url: str, redis_url: str
) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_length=10)
    before = api.now()
    api.add("report", TASK, every=60, start_at=PAST, actor="alice")
    api.add_window("nightly", schedule="0 2 * * *", duration="1h", actor="bob")
    api.add_window("nightly", schedule="0 3 * * *", duration="1h", replace=True, actor="carol")
    api.add_window(  # the same window again: nothing changes, nothing recorded
        "nightly", schedule="0 3 * * *", duration="1h", replace=True, actor="dave"
    )
    api.remove_window("nightly", actor="erin")

    records = [record for record in api.audit() if record.name == "nightly"]
    assert actions(records) == [
        ("add_window", "bob", "api", ""),
        ("update_window", "carol", "api", ""),
        ("remove_window", "erin", "api", ""),
    ]
    assert records[1].changes == {"schedule": ("0 2 * * *", "0 3 * * *")}
    assert all(before - timedelta(seconds=1) <= record.at <= api.now() for record in records)
    # read back with the entries' records, newest first
    assert [(r.name, r.action) for r in api.audit(limit=2)] == [
        ("nightly", "remove_window"),
        ("nightly", "update_window"),
    ]
    assert [r.name for r in api.audit(actor="alice")] == ["report"]
    # a window removed keeps its trail; added again, it goes on
    api.add_window("nightly", start=LATER, end=LATER + timedelta(hours=1))
    assert [r.action for r in api.audit(limit=1)] == ["add_window"]
    assert api.audit(limit=1)[0].actor == ME  # no actor given: this process's user@host


def test_a_refused_window_change_records_nothing_and_changes_nothing(
    api: Periodiq,
    redis_url: str,
) -> None:
    api.add_window("freeze", start=LATER, end=LATER + timedelta(days=1), actor="alice")
    before = snapshot(redis_url)

    with pytest.raises(WindowError, match="exists already"):
        api.add_window("freeze", start=LATER, end=LATER + timedelta(days=2), actor="bob")
    with pytest.raises(WindowError, match="no window 'frieze'"):
        api.remove_window("frieze", actor="bob")
    with pytest.raises(WindowError, match="duration"):
        api.add_window("other", schedule="0 2 * * *", actor="bob")  # no duration
    for actor in ("", 3, "x" * 201):
        with pytest.raises(EntryError, match=r"actor=.* is invalid \(allowed: who makes"):
            api.add_window("other", start=LATER, end=LATER + timedelta(hours=1), actor=actor)  # type: ignore[arg-type]
        with pytest.raises(EntryError, match=r"actor=.* is invalid"):
            api.remove_window("freeze", actor=actor)  # type: ignore[arg-type]

    assert snapshot(redis_url) == before
    assert actions(api.audit()) == [("add_window", "alice", "api", "")]


def test_the_cli_records_window_changes_as_its_user_and_shows_them(
    api: Periodiq,
) -> None:
    app = api.app
    added = cli(app, "window", "add", "nightly", "--schedule", "0 2 * * *", "--duration", "2h")
    assert added.exit_code == 0, added.output
    assert cli(app, "window", "remove", "nightly").exit_code == 0

    assert actions(api.audit()) == [
        ("add_window", ME, "cli", ""),
        ("remove_window", ME, "cli", ""),
    ]
    shown = cli(app, "audit", "--since", "1h")
    assert "window nightly" in shown.stdout
    assert "remove_window" in shown.stdout
    listed = json.loads(cli(app, "audit", "--json").stdout)
    assert [(r["name"], r["action"]) for r in listed] == [
        ("nightly", "remove_window"),
        ("nightly", "add_window"),
    ]


def test_an_import_records_the_windows_it_writes(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    api.add_window("freeze", start=LATER, end=LATER + timedelta(days=1))
    document = api.export()
    api.remove_window("freeze")

    api.import_file(io.StringIO(json.dumps(document)), replace=True, actor="importer")

    newest = api.audit(limit=1)[0]
    assert (newest.name, newest.action, newest.actor, newest.note) == (
        "freeze",
        "add_window",
        "importer",
        "imported from a file",
    )


def test_no_window_trail_is_kept_with_audit_length_zero(broker_url: str, redis_url: str) -> None:
    api = make_api(broker_url, redis_url, periodiq_audit_length=0)
    api.add_window("freeze", start=LATER, end=LATER + timedelta(days=1))
    api.remove_window("freeze")

    assert api.audit() == []
    assert not api.store.client.exists(api.store.keys.windows_audit)


def test_a_damaged_window_trail_is_skipped_when_read_and_replaced_when_written(
    api: Periodiq,
) -> None:
    client, keys = api.store.client, api.store.keys
    client.set(keys.windows_audit, "not a hash")  # written by someone else
    api.add("report", TASK, every=60, start_at=PAST, actor="alice")

    assert actions(api.audit()) == [("add", "alice", "api", "")]  # the rest still reads

    api.add_window("freeze", start=LATER, end=LATER + timedelta(days=1), actor="bob")
    assert actions(api.audit())[-1] == ("add_window", "bob", "api", "")
    client.hset(keys.windows_audit, "freeze", "garbage\n[1, 2]\nnot json")
    assert [r.name for r in api.audit()] == ["report"]  # unreadable lines skipped
