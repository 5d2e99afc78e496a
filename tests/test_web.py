"""The dashboard over HTTP (Starlette's test client) against a real Redis.

Pages render and escape what users wrote; /api/ gives the CLI's --json shapes;
writes need the token (bearer, or the login cookie plus the form's CSRF token) and
are refused without it; a dashboard started without a token is read-only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.web import make_app
from celery_periodiq.web.auth import COOKIE
from tests.test_cli import cli

pytestmark = pytest.mark.compat  # make compat: on every server and library set

TOKEN = "s3cret-token"
EVIL = '<script>alert("x")</script>&<b>'
START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("dashboard", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    yield api
    api.store.client.close()


@pytest.fixture
def web(api: Periodiq) -> TestClient:
    return TestClient(make_app(api, TOKEN), follow_redirects=False)


def signed_in(web: TestClient) -> str:
    """Sign in; returns the CSRF token the pages' forms carry."""
    answer = web.post("/login", data={"token": TOKEN})
    assert answer.status_code == 303
    page = web.get("/").text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def test_the_entries_page_lists_filters_and_escapes(api: Periodiq, web: TestClient) -> None:
    api.add(EVIL, "proj.t", every=60, owner="mail")
    api.add("report", "proj.report", cron="0 9 * * *", owner="finance")
    api.pause("report", note=EVIL)

    page = web.get("/")
    paused = web.get("/", params={"state": "paused"})
    mail = web.get("/", params={"owner": "mail"})
    found = web.get("/", params={"q": "REP"})

    assert page.status_code == 200
    assert "<script>" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&lt;b&gt;" in page.text
    assert "Read-only" not in page.text  # a token is configured
    assert ">report</a>" in paused.text
    assert "proj.t" not in paused.text
    assert "proj.report" not in mail.text
    assert ">report</a>" in found.text
    assert "2 shown of 2 entries" in page.text


def test_an_entry_page_shows_its_definition_history_and_plot(
    api: Periodiq, web: TestClient
) -> None:
    app = api.app

    @app.task(base=PeriodicTask, name="proj.work", shared=False)
    def work() -> None:
        """A guarded task that succeeds."""

    api.add(EVIL, "proj.work", every=60, start_at=START)
    for minute in (1, 2):
        tick = to_ms(START + timedelta(minutes=minute))
        work.apply(headers={HEADER_ENTRY: EVIL, HEADER_TICK: tick})

    page = web.get("/entries/" + "%3Cscript%3Ealert(%22x%22)%3C%2Fscript%3E%26%3Cb%3E")

    assert page.status_code == 200
    assert "<script>" not in page.text
    assert "<svg" in page.text
    assert "polyline" in page.text
    assert page.text.count(">succeeded<") == 2
    assert "Next 10 fires" in page.text
    assert page.text.count("<li><code>") == 10


def test_an_entry_page_shows_the_runs_of_a_limited_entry(api: Periodiq, web: TestClient) -> None:
    api.add("limited", "proj.t", every=60, max_runs=3)
    api.add("unlimited", "proj.t", every=60)

    assert "<dt>Runs</dt><dd>0 of 3 sent · 3 left</dd>" in web.get("/entries/limited").text
    assert "<dt>Runs</dt>" not in web.get("/entries/unlimited").text


def test_an_unknown_entry_is_a_404_page_and_a_404_json(web: TestClient) -> None:
    assert web.get("/entries/nope").status_code == 404
    answer = web.get("/api/entries/nope")
    assert answer.status_code == 404
    assert "nope" in answer.json()["error"]


def test_the_api_gives_the_cli_json_shapes(api: Periodiq, web: TestClient) -> None:
    api.add("report", "proj.report", every=60)
    api.store.scripts.heartbeat("beat-1", "start", 10_000, {"host": "h"})

    entries = web.get("/api/entries").json()
    shown = web.get("/api/entries/report").json()
    beats = web.get("/api/beats").json()
    doctor = web.get("/api/doctor").json()

    assert list(entries) == ["entries", "next", "previous", "total", "matched", "searched"]
    assert [item["name"] for item in entries["entries"]] == ["report"]
    assert list(entries["entries"][0])[:3] == ["name", "state", "note"]
    assert (entries["next"], entries["total"], entries["searched"]) == (None, 1, None)
    assert shown["effective"]["interval"] == 60.0
    assert len(shown["upcoming"]) == 10
    assert beats[0]["id"] == "beat-1"
    assert {check["name"] for check in doctor["checks"]} >= {"redis", "alerts"}


def test_the_api_gives_history_and_failures_and_refuses_a_bad_limit(
    api: Periodiq, web: TestClient
) -> None:
    app = api.app

    @app.task(base=PeriodicTask, name="proj.broken", shared=False)
    def broken() -> None:
        raise ValueError("boom")

    api.add("broken", "proj.broken", every=60, start_at=START)
    broken.apply(headers={HEADER_ENTRY: "broken", HEADER_TICK: to_ms(START + timedelta(minutes=1))})

    history = web.get("/api/history/broken", params={"limit": "5"}).json()
    failed = web.get("/api/history/broken", params={"failures": "1"}).json()
    across = web.get("/api/failures").json()
    bad = web.get("/api/failures", params={"limit": "zero"})
    missing = web.get("/api/history/ghost")

    assert [event["kind"] for event in history][:2] == ["failed", "started"]
    assert [event["error_message"] for event in failed] == ["boom"]
    assert across[0]["entry"] == "broken"
    assert bad.status_code == 400
    assert missing.status_code == 404


def test_serve_refuses_a_short_token(api: Periodiq) -> None:
    result = cli(api.app, "serve", "--token", "short")

    assert result.exit_code == 2
    assert "at least 8 characters" in result.output


def test_pause_is_refused_without_the_token_and_works_with_it(
    api: Periodiq, web: TestClient
) -> None:
    api.add("report", "proj.report", every=60)

    anonymous = web.post("/actions/pause/report", data={"note": "x"})
    wrong_login = web.post("/login", data={"token": "not-it"})
    web.cookies.set(COOKIE, "forged")
    forged = web.post("/actions/pause/report", data={"note": "x", "csrf": "0" * 64})
    web.cookies.clear()
    still_active = api.get("report").paused
    csrf = signed_in(web)
    without_csrf = web.post("/actions/pause/report", data={"note": "x"})
    done = web.post("/actions/pause/report", data={"note": EVIL, "csrf": csrf})

    assert anonymous.status_code == 403
    assert wrong_login.status_code == 403
    assert forged.status_code == 403
    assert still_active is False
    assert without_csrf.status_code == 403
    assert done.status_code == 303
    assert api.get("report").paused
    assert api.get("report").note == EVIL


def test_the_login_cookie_is_http_only_and_not_the_token(web: TestClient) -> None:
    answer = web.post("/login", data={"token": TOKEN})

    cookie = answer.headers["set-cookie"]
    assert "httponly" in cookie.lower()
    assert "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie


def test_resume_run_and_delete_with_the_form_and_with_a_bearer(
    api: Periodiq, web: TestClient
) -> None:
    api.add("report", "proj.report", every=60)
    api.add("other", "proj.report", every=60)
    api.pause("report")
    csrf = signed_in(web)
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    resumed = web.post("/actions/resume/report", data={"csrf": csrf})
    ran = web.post("/api/actions/run/report", headers=bearer)
    paused = web.post("/api/actions/pause/other", headers=bearer, json={"note": "api"})
    deleted = web.post("/actions/delete/report", data={"csrf": csrf})
    refused = web.post("/api/actions/delete/other", headers={"Authorization": "Bearer nope"})

    assert resumed.status_code == 303
    assert ran.status_code == 200
    assert ran.json()["task_id"]
    assert paused.json()["ok"] is True
    assert api.get("other").note == "api"
    assert deleted.status_code == 303
    assert api.count() == 1
    assert refused.status_code == 403


def test_without_a_token_the_dashboard_is_read_only_and_says_so(api: Periodiq) -> None:
    api.add("report", "proj.report", every=60)
    web = TestClient(make_app(api, None), follow_redirects=False)

    page = web.get("/entries/report")
    login = web.post("/login", data={"token": ""})
    write = web.post("/api/actions/pause/report", headers={"Authorization": "Bearer "})

    assert "Read-only" in page.text
    assert "Pause" not in page.text
    assert login.status_code == 403
    assert write.status_code == 405
    assert not api.get("report").paused


def test_the_beats_page_and_metrics(api: Periodiq, web: TestClient) -> None:
    api.store.scripts.heartbeat("beat-1", "start", 10_000, {"host": "<h1>host</h1>"})

    beats = web.get("/beats")
    metrics = web.get("/metrics")

    assert beats.status_code == 200
    assert "&lt;h1&gt;host&lt;/h1&gt;" in beats.text
    assert metrics.status_code == 200
    assert "periodiq_beats_live 1.0" in metrics.text


def test_bad_input_gets_a_clear_answer_and_changes_nothing(api: Periodiq, web: TestClient) -> None:
    api.add("report", "proj.report", every=60)
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    unknown_action = web.post("/api/actions/explode/report", headers=bearer)
    not_json = web.post("/api/actions/pause/report", headers=bearer, content=b"{nope")
    missing = web.post("/api/actions/pause/ghost", headers=bearer)

    assert unknown_action.status_code == 404
    assert not_json.status_code == 400
    assert missing.status_code == 404
    assert not api.get("report").paused
