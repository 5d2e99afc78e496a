"""Group limits (``periodiq_group_limits``): the guard admits at most N runs of a group at
once, in begin.lua, on a real Redis and an injected clock; a bad setting or an unknown
group is refused with one clear error and changes nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner
from starlette.testclient import TestClient

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.cli import periodiq as periodiq_command
from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError, EntryError
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.records import RunEnd, RunStart
from celery_periodiq.web import make_app

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TTL = 90_000


def at(seconds: float) -> int:
    return to_ms(T0 + timedelta(seconds=seconds))


def app_on(redis_url: str, name: str, **settings: Any) -> Celery:
    app = Celery(name, broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.update(settings)
    return app


def reports(redis_url: str, name: str, entries: int = 3) -> Periodiq:
    """An app whose group "reports" runs at most 2 at once, with ``entries`` entries of it."""
    api = periodiq(app_on(redis_url, name, periodiq_group_limits={"reports": 2}))
    for n in range(1, entries + 1):
        api.add(f"r{n}", "proj.t", every=60, start_at=T0, group="reports")
    return api


def start(task_id: str, wait: bool = False, group: str = "reports") -> RunStart:
    return RunStart(
        task_id=task_id, tick_ms=None, min_gap_ms=0, overlap="skip", ttl_ms=TTL, retries=0,
        host="h", history_length=20, attempt=task_id, group=group, group_limit=2,
        group_wait=wait,
    )  # fmt: skip


def end(task_id: str) -> RunEnd:
    return RunEnd(task_id, None, "succeeded", "", 5, "h", 20, attempt=task_id, group="reports")


def test_a_third_run_of_a_group_limited_to_two_is_refused_and_counted(redis_url: str) -> None:
    api = reports(redis_url, "three")
    scripts = api.store.scripts

    outcomes = [scripts.begin(f"r{n}", start(f"run-{n}"), at(n)).outcome for n in (1, 2, 3)]

    assert outcomes == ["started", "started", "dropped_group_limit"]
    assert api.get("r3").counters == {"dropped_group_limit": 1}
    assert api.store.client.zcard(api.store.keys.of("r1").group("reports")) == 2
    api.store.client.close()


def test_a_run_that_ends_frees_its_slot(redis_url: str) -> None:
    api = reports(redis_url, "frees")
    scripts = api.store.scripts
    scripts.begin("r1", start("run-1"), at(1))
    scripts.begin("r2", start("run-2"), at(2))

    scripts.finish("r1", end("run-1"), at(3))
    third = scripts.begin("r3", start("run-3"), at(4))

    assert third.outcome == "started"
    api.store.client.close()


def test_a_dead_workers_slot_frees_when_its_marker_ends(redis_url: str) -> None:
    # no finish ever comes for run-1 and run-2 (their worker died): their markers end
    # after the marker TTL, as the running marker does
    api = reports(redis_url, "dead")
    scripts = api.store.scripts
    scripts.begin("r1", start("run-1"), at(1))
    scripts.begin("r2", start("run-2"), at(2))

    held = scripts.begin("r3", start("run-3"), at(1 + TTL / 1000 - 1))
    freed = scripts.begin("r3", start("run-4"), at(2 + TTL / 1000))

    assert (held.outcome, freed.outcome) == ("dropped_group_limit", "started")
    api.store.client.close()


def test_a_run_that_waits_in_line_is_told_so_and_nothing_is_written(redis_url: str) -> None:
    api = reports(redis_url, "waits")
    scripts = api.store.scripts
    scripts.begin("r1", start("run-1"), at(1))
    scripts.begin("r2", start("run-2"), at(2))
    before = api.store.client.hget(api.store.keys.of("r3").state, "r3")

    waiting = scripts.begin("r3", start("run-3", wait=True), at(3))

    assert waiting.outcome == "waiting_group"
    assert api.store.client.hget(api.store.keys.of("r3").state, "r3") == before
    assert api.store.client.lrange(api.store.keys.of("r3").history("r3"), 0, -1) == []
    api.store.client.close()


def test_runs_without_a_limit_are_not_counted_in_any_group(redis_url: str) -> None:
    api = reports(redis_url, "unlimited")
    scripts = api.store.scripts
    for n in (1, 2, 3):
        free = RunStart(f"run-{n}", None, 0, "skip", TTL, 0, "h", 20, attempt=f"a{n}")
        assert scripts.begin(f"r{n}", free, at(n)).outcome == "started"
    assert api.store.client.keys("*group*") == []
    api.store.client.close()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (["reports"], "a dict of group name"),
        ({"reports": 0}, "periodiq_group_limits['reports']=0"),
        ({"reports": "2"}, "periodiq_group_limits['reports']='2'"),
        ({"reports": True}, "periodiq_group_limits['reports']=True"),
        ({3: 2}, "the key 3 is invalid"),
        ({"": 2}, "the key '' is invalid"),
    ],
)
def test_a_bad_group_limits_setting_is_refused_with_one_clear_error(value: Any, says: str) -> None:
    app = app_on("redis://localhost:1/0", "bad", periodiq_group_limits=value)
    with pytest.raises(ConfigurationError, match="periodiq_group_limits") as refused:
        Settings.from_app(app)
    assert says in str(refused.value)


def test_group_limits_are_refused_on_redis_cluster() -> None:
    app = app_on(
        "redis://localhost:1/0",
        "clustered",
        periodiq_group_limits={"reports": 2},
        periodiq_redis_cluster=True,
    )
    with pytest.raises(ConfigurationError, match="not supported with periodiq_redis_cluster"):
        Settings.from_app(app)


def test_an_unknown_group_is_refused_and_nothing_is_written(redis_url: str) -> None:
    api = reports(redis_url, "unknown", entries=1)

    with pytest.raises(EntryError, match=r"group='report' is invalid .*'reports'"):
        api.add("typo", "proj.t", every=60, group="report")
    with pytest.raises(EntryError, match=r"group='report' is invalid"):
        api.update("r1", group="report")

    assert [item.name for item in api.list()] == ["r1"]
    assert api.get("r1").entry.group == "reports"
    api.store.client.close()


def test_the_owner_is_the_group_when_none_is_given_and_show_says_so(redis_url: str) -> None:
    api = reports(redis_url, "owner", entries=0)
    api.add("mine", "proj.t", every=60, owner="reports")
    api.add("theirs", "proj.t", every=60, owner="other-team")  # no limit: not refused

    shown = CliRunner().invoke(
        periodiq_command, ["show", "mine"], obj=CLIContext(app=api.app, no_color=True, workdir=None)
    )

    assert shown.exit_code == 0, shown.output
    assert re.search(r"group\s+reports \(its owner\)", shown.output)
    assert api.get("mine").entry.group is None
    api.store.client.close()


def test_the_dashboards_entry_page_shows_the_group_and_its_drops(redis_url: str) -> None:
    api = reports(redis_url, "dashboard", entries=3)
    scripts = api.store.scripts
    for n in (1, 2, 3):
        scripts.begin(f"r{n}", start(f"run-{n}"), at(n))
    web = TestClient(make_app(api), follow_redirects=False)

    page = web.get("/entries/r3")

    assert page.status_code == 200
    assert re.search(r"<dt>Group</dt><dd>reports</dd>", page.text)
    assert "dropped_group_limit 1" in page.text
    api.store.client.close()
