"""``celery periodiq window add/list/remove``, and ``list``/``show`` and the dashboard
saying which entry is in a window until when (click's runner and Starlette's test
client, a private Redis; ``--now`` fixes the clock)."""

from __future__ import annotations

import json

from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import Periodiq
from celery_periodiq.web import make_app
from tests.test_cli import START, app, cli  # noqa: F401  (its app; conftest's api uses it)

NOW = "2090-01-01T02:30:00Z"


def test_window_add_list_and_remove(app: Celery, api: Periodiq) -> None:  # noqa: F811
    api.add("report", "proj.report", every=60, start_at=START, owner="team")
    added = cli(app, "window", "add", "nightly", "--schedule", "0 2 * * *", "--duration", "2h",
                "--tz", "Europe/Berlin", "--scope", "owner:team", "--policy", "defer",
                "--note", "backups")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("Added window nightly (owner:team, defer): at 02:00 ")

    listed = cli(app, "window", "list", "--now", NOW)
    assert "nightly (owner:team, defer):" in listed.stdout
    assert "open now, until 2090-01-01T03:00:00+00:00 (in 30m)" in listed.stdout
    assert "  note: backups" in listed.stdout
    (shape,) = json.loads(cli(app, "window", "list", "--json", "--now", NOW).stdout)
    assert shape["open"] is True
    assert (shape["closes"], shape["duration"], shape["tz"]) == (
        "2090-01-01T03:00:00+00:00",
        7200.0,
        "Europe/Berlin",
    )

    said = " ".join(cli(app, "list", "--now", NOW).stdout.split())
    assert "in window 'nightly' until 2090-01-01T03:00:00+00:00 (in 30m): ticks deferred" in said
    assert "in window 'nightly'" in cli(app, "show", "report", "--now", NOW).stdout
    (entry,) = json.loads(cli(app, "list", "--json", "--now", NOW).stdout)
    assert entry["in_window"] == {
        "id": "nightly",
        "policy": "defer",
        "until": "2090-01-01T03:00:00+00:00",
    }

    removed = cli(app, "window", "remove", "nightly")
    assert removed.stdout == "Removed window nightly.\n"
    assert cli(app, "window", "list").stdout == "No maintenance windows.\n"
    (entry,) = json.loads(cli(app, "list", "--json", "--now", NOW).stdout)
    assert entry["in_window"] is None


def test_exclude_dates_from_the_command_line(app: Celery, api: Periodiq) -> None:  # noqa: F811
    api.add("report", "proj.report", cron="0 9 * * *", start_at=START)
    result = cli(app, "update", "report", "--exclude", "2090-01-02,2090-01-01")
    assert result.exit_code == 0, result.output
    entry = api.get("report").entry
    assert entry is not None
    assert entry.exclude == ["2090-01-01", "2090-01-02"]
    assert [r.day for r in api.upcoming("report", 1, after=START)] == [3]
    cli(app, "update", "report", "--exclude", "")
    assert api.get("report").entry.exclude == []  # type: ignore[union-attr]


def test_the_dashboard_says_which_entry_is_in_a_window_until_when(api: Periodiq) -> None:
    api.add("report", "proj.report", every=60, owner="team")
    api.add("other", "proj.other", every=60)
    api.add_window(
        "deploy", scope="owner:team", start=api.now().isoformat(), end="2090-01-01T00:00Z"
    )
    web = TestClient(make_app(api), follow_redirects=False)

    listing = web.get("/").text
    page = web.get("/entries/report").text

    assert "in window &#39;deploy&#39; until 2090-01-01T00:00:00+00:00" in listing
    assert listing.count("in window") == 1  # not "other"
    assert "Now in window &#39;deploy&#39; until 2090-01-01T00:00:00+00:00" in page
    assert "ticks skipped</div>" in page
