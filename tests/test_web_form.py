"""The dashboard's entry form over HTTP (Starlette's test client) against a real Redis.

Creating and editing an entry goes through the API's own validation; each bad field is
shown beside that field and nothing is written; writes need sign-in and the form's CSRF
token; an entry declared in code needs "write it anyway"; /api/preview describes a
schedule and its next fires, and says what is wrong with a bad one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import pytest
from celery import Celery
from markupsafe import escape
from starlette.testclient import TestClient

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import EntryNotFoundError
from celery_periodiq.model.build import build_entry
from celery_periodiq.present.entry_form import FIELDS, EntryForm, preview, save
from celery_periodiq.web import make_app
from tests.test_web import TOKEN, signed_in


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("form", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url

    @app.task(name="proj.report", shared=False)
    def report() -> None: ...

    api = periodiq(app)
    yield api
    api.store.client.close()


@pytest.fixture
def web(api: Periodiq) -> TestClient:
    return TestClient(make_app(api, TOKEN), follow_redirects=False)


def filled(**changes: str) -> dict[str, str]:
    """A complete, valid form as a browser posts it (checkboxes ticked: "on")."""
    data = {
        "name": "nightly",
        "task": "proj.report",
        "schedule": "30 2 * * *",
        "tz": "Europe/Berlin",
        "args": '[1, "a"]',
        "kwargs": '{"full": true}',
        "queue": "reports",
        "options": '{"priority": 5}',
        "owner": "finance",
        "enabled": "on",
        "start_at": "",
        "end_at": "2099-01-01T00:00:00+00:00",
        "max_runs": "",
        "tolerance": "auto",
        "timebox": "600",
        "overlap": "allow",
        "catchup": "skip",
        "catchup_window": "3600",
        "expires": "auto",
        "jitter": "5",
        "alert_after": "none",
        "failure_threshold": "4",
        "pause_on_failure": "on",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value != "<absent>"}


def error_beside(page: str, field: str) -> str:
    """The error the page shows beside ``field`` ("" when none)."""
    found = re.search(rf'<div class="field-error" id="{field}-error"[^>]*>(.*?)</div>', page, re.S)
    return "" if found is None else found.group(1)


def shown_errors(page: str) -> list[str]:
    return re.findall(r'class="field-error" id="([a-z_]+)-error"', page)


def test_a_posted_form_creates_the_entry_with_every_field(api: Periodiq, web: TestClient) -> None:
    csrf = signed_in(web)

    answer = web.post("/entries/new", data={**filled(), "csrf": csrf})

    assert (answer.status_code, answer.headers["location"]) == (303, "/entries/nightly")
    entry = api.get("nightly").entry
    assert entry is not None
    assert (entry.task, entry.schedule, entry.form, entry.tz) == (
        "proj.report", "30 2 * * *", "cron", "Europe/Berlin"
    )  # fmt: skip
    assert (entry.args, entry.kwargs) == ([1, "a"], {"full": True})
    assert entry.options == {"priority": 5, "queue": "reports"}
    assert (entry.owner, entry.enabled, entry.end_at) == (
        "finance", True, datetime(2099, 1, 1, tzinfo=UTC)
    )  # fmt: skip
    assert (entry.tolerance, entry.timebox, entry.overlap, entry.catchup) == (
        "auto", 600.0, "allow", "skip"
    )  # fmt: skip
    assert (entry.catchup_window, entry.expires, entry.jitter, entry.alert_after) == (
        3600.0, "auto", 5.0, None
    )  # fmt: skip
    assert (entry.failure_threshold, entry.pause_on_failure, entry.source) == (4, True, "runtime")


@pytest.mark.parametrize(
    ("schedule", "form", "stored"),
    [
        ("@every 90s", "every", "@every 90s"),
        ("Mon..Fri 09:00", "calendar", "Mon..Fri 09:00"),
        ("2099-06-01T09:00", "at", "2099-06-01T07:00:00+00:00"),  # read in Europe/Berlin
        ("@daily", "cron", "@daily"),
    ],
)
def test_the_schedule_field_takes_every_form(
    api: Periodiq, web: TestClient, schedule: str, form: str, stored: str
) -> None:
    csrf = signed_in(web)

    answer = web.post(
        "/entries/new", data={**filled(schedule=schedule, timebox="auto"), "csrf": csrf}
    )

    assert answer.status_code == 303, error_beside(answer.text, "schedule")
    entry = api.get("nightly").entry
    assert entry is not None
    assert (entry.form, entry.schedule) == (form, stored)


def test_the_edit_form_is_prefilled_and_saves_a_new_schedule(
    api: Periodiq, web: TestClient
) -> None:
    api.add("nightly", "proj.report", cron="30 2 * * *", args=[7], owner="finance", jitter=2)
    api.pause("nightly", note="kept")
    csrf = signed_in(web)

    page = web.get("/entries/nightly/edit").text
    answer = web.post(
        "/entries/nightly/edit",
        data={
            **dict(EntryForm.of(api.get("nightly")).values),
            "schedule": "*/5 * * * *",
            "csrf": csrf,
        },
    )

    assert 'value="30 2 * * *"' in page
    assert 'value="[7]"' in page
    assert 'value="finance"' in page
    assert 'name="name" value="nightly" readonly' in page
    assert (answer.status_code, answer.headers["location"]) == (303, "/entries/nightly")
    stored = api.get("nightly")
    assert stored.entry is not None
    assert (stored.entry.schedule, stored.entry.args, stored.entry.jitter) == (
        "*/5 * * * *",
        [7],
        2.0,
    )
    assert stored.status == "paused"  # its state is kept


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("schedule", "61 * * * *", "minute"),
        ("schedule", "", "schedule: empty"),
        ("schedule", "2020-01-01T00:00:00+00:00", "already past"),
        ("args", '[1, "a"', "args: not JSON"),
        ("kwargs", "[1]", "kwargs=[1] is invalid"),
        ("options", '{"priority": "high"}', "options[&#39;priority&#39;]"),
        ("tz", "Mars/Olympus", "not in the tz database"),
        ("overlap", "sometimes", "overlap=&#39;sometimes&#39; is invalid"),
        ("tolerance", "soon", "tolerance=&#39;soon&#39; is invalid"),
        ("failure_threshold", "0", "failure_threshold=0 is invalid"),
        ("end_at", "tomorrow", "not an ISO 8601 instant"),
        ("name", " padded", "entry name"),
        ("exclude", "2026-02-30", "exclude=&#39;2026-02-30&#39; is invalid"),
    ],
)
def test_a_bad_field_is_shown_beside_it_and_nothing_is_written(
    api: Periodiq, web: TestClient, field: str, value: str, said: str
) -> None:
    csrf = signed_in(web)

    answer = web.post("/entries/new", data={**filled(**{field: value}), "csrf": csrf})

    assert answer.status_code == 400
    assert said in error_beside(answer.text, field)
    assert shown_errors(answer.text) == [field]
    assert f'value="{escape(value)}"' in answer.text or field == "overlap"  # typed, kept
    assert api.list() == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("schedule", "* * *"), ("args", "{oops"), ("tz", "Nowhere/X"), ("exclude", "12/25")],
)
def test_a_bad_edit_changes_nothing(api: Periodiq, web: TestClient, field: str, value: str) -> None:
    before = api.add("nightly", "proj.report", cron="30 2 * * *", args=[7])
    csrf = signed_in(web)
    data = {**EntryForm.of(before).values, field: value, "csrf": csrf}

    answer = web.post("/entries/nightly/edit", data=data)

    assert answer.status_code == 400
    assert error_beside(answer.text, field) != ""
    assert api.get("nightly").entry == before.entry


def test_a_taken_name_is_shown_beside_the_name(api: Periodiq, web: TestClient) -> None:
    before = api.add("nightly", "proj.other", every=60)
    csrf = signed_in(web)

    answer = web.post("/entries/new", data={**filled(), "csrf": csrf})

    assert answer.status_code == 400
    assert "already exists" in error_beside(answer.text, "name")
    assert api.get("nightly").entry == before.entry


def test_an_unknown_task_is_saved_with_a_warning_and_known_ones_are_offered(
    api: Periodiq, web: TestClient
) -> None:
    csrf = signed_in(web)

    offered = web.get("/entries/new").text
    answer = web.post("/entries/new", data={**filled(task="proj.typo"), "csrf": csrf})
    edit = web.get("/entries/nightly/edit").text

    datalist = offered.split('<datalist id="periodiq-tasks">')[1].split("</datalist>")[0]
    assert '<option value="proj.report">' in datalist  # shared tasks of other modules too
    assert 'value="celery.' not in datalist
    assert answer.status_code == 303
    assert "&#39;proj.typo&#39; is not a task of this app" in edit


@pytest.mark.parametrize(
    "how",
    ["no csrf", "wrong csrf", "not signed in"],
)
def test_a_write_without_sign_in_and_csrf_is_refused(
    api: Periodiq, web: TestClient, how: str
) -> None:
    csrf = signed_in(web) if how != "not signed in" else "0" * 64
    data = {**filled()}
    if how != "no csrf":
        data["csrf"] = "f" * 64 if how == "wrong csrf" else csrf

    answer = web.post("/entries/new", data=data)

    assert answer.status_code == 403
    assert "changes need the token" in answer.text
    assert api.list() == []


def test_the_form_needs_sign_in_and_a_writable_dashboard(api: Periodiq, web: TestClient) -> None:
    read_only = TestClient(make_app(api, None), follow_redirects=False)
    api.add("nightly", "proj.report", every=60)

    signed_out = web.get("/entries/new")
    refused = read_only.get("/entries/nightly/edit")
    csrf = signed_in(web)
    entries, entry = web.get("/").text, web.get("/entries/nightly").text

    assert (signed_out.status_code, signed_out.headers["location"]) == (303, "/login")
    assert refused.status_code == 403
    assert "Read-only" in refused.text
    assert csrf
    assert 'href="/entries/new"' in entries
    assert 'href="/entries/nightly/edit"' in entry
    assert web.get("/entries/missing/edit").status_code == 404


def test_a_declared_entry_is_written_only_with_write_it_anyway(
    api: Periodiq, web: TestClient
) -> None:
    declared = api.add("from-code", "proj.report", every=60).entry
    assert declared is not None
    api.store.put("reconcile", [declared.evolve(source="code")])
    csrf = signed_in(web)
    data = {**EntryForm.of(api.get("from-code")).values, "schedule": "@every 30s", "csrf": csrf}
    del data["force"]

    page = web.get("/entries/from-code/edit").text
    refused = web.post("/entries/from-code/edit", data=data)
    unchanged = api.get("from-code").entry
    forced = web.post("/entries/from-code/edit", data={**data, "force": "on"})

    assert "declared in code or beat_schedule" in page
    assert 'name="force"' in page
    assert refused.status_code == 400
    assert "declared in code" in error_beside(refused.text, "force")
    assert unchanged is not None
    assert unchanged.schedule == "@every 1m"
    assert forced.status_code == 303
    changed = api.get("from-code").entry
    assert changed is not None
    assert (changed.schedule, changed.source) == ("@every 30s", "code")


def test_the_preview_describes_a_schedule_and_its_next_five_fires(web: TestClient) -> None:
    answer = web.get("/api/preview", params={"schedule": "0 9 * * Mon-Fri", "tz": "Europe/Berlin"})

    shown = answer.json()
    assert answer.status_code == 200
    assert shown["error"] is None
    assert "09:00" in shown["description"]
    assert "Europe/Berlin" in shown["description"]
    assert len(shown["next"]) == 5
    assert all(
        fire.endswith(("+01:00", "+02:00")) and "T09:00:00" in fire for fire in shown["next"]
    )


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"schedule": "61 * * * *"}, "minute"),
        ({}, "schedule: empty"),
        ({"schedule": "@daily", "tz": "Nowhere/X"}, "time zone"),
        ({"schedule": "@every soon"}, "soon"),
        ({"schedule": "x" * 5000}, "characters"),
    ],
)
def test_the_preview_says_what_is_wrong_with_a_bad_schedule(
    web: TestClient, params: dict[str, str], said: str
) -> None:
    answer = web.get("/api/preview", params=params)

    assert answer.status_code == 400
    assert answer.json()["next"] == []
    assert answer.json()["description"] is None
    assert said in answer.json()["error"]


def test_the_preview_hashes_h_by_the_name_as_the_entry_will() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    shown = preview("H * * * *", "UTC", now, 1, name="nightly")
    other = preview("H * * * *", "UTC", now, 1, name="weekly")

    assert shown["error"] is None
    assert other["error"] is None
    assert shown["next"] != other["next"]


def test_save_writes_nothing_and_says_why_for_each_unreadable_field(api: Periodiq) -> None:
    form = EntryForm.posted(filled(args="[", max_runs="many", jitter="x", start_at="noon"))

    saved = save(api, form)

    assert saved is None
    assert sorted(form.errors) == ["args", "jitter", "max_runs", "start_at"]
    assert api.list() == []
    with pytest.raises(EntryNotFoundError):
        api.get("nightly")


def test_the_fields_fragment_renders_in_a_plain_jinja_environment() -> None:
    import celery_periodiq.web

    folder = Path(celery_periodiq.web.__file__).with_name("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder), autoescape=True, undefined=jinja2.StrictUndefined
    )
    form = EntryForm.posted(filled(schedule="<b>"))
    form.errors["schedule"] = "bad <b>"
    values: dict[str, Any] = {"form": form, "tasks": ["proj.report"], "preview_url": "/p"}

    html = env.get_template("entry_form_fields.html").render(**values, unknown_task=None)

    assert [name for name in FIELDS if f'name="{name}"' not in html] == []
    assert "bad &lt;b&gt;" in html
    assert "<b>" not in html
    assert 'data-url="/p"' in html


def test_an_ended_one_off_keeps_its_instant_when_other_fields_change(
    api: Periodiq, web: TestClient
) -> None:
    api.store.put("add", [build_entry("once", "proj.report", at="2020-01-01T00:00:00+00:00")])
    csrf = signed_in(web)
    data = {**EntryForm.of(api.get("once")).values, "owner": "ops", "csrf": csrf}

    answer = web.post("/entries/once/edit", data=data)

    assert answer.status_code == 303, error_beside(answer.text, "schedule")
    entry = api.get("once").entry
    assert entry is not None
    assert (entry.schedule, entry.owner) == ("2020-01-01T00:00:00+00:00", "ops")


@pytest.mark.parametrize(
    ("changes", "field", "said"),
    [
        ({"schedule": "2099-06-01T09:00", "tz": "Nowhere/X"}, "tz", "time zone"),
        ({"start_at": "2099-06-01T00:00", "tz": "Nowhere/X"}, "tz", "time zone"),
        ({"start_at": "2099-02-01T00:00Z", "end_at": "2099-01-01T00:00Z"}, "end_at", "before"),
        ({"schedule": "@every 60s", "timebox": "90"}, "timebox", "at most the interval"),
        ({"options": '{"colour": "red"}'}, "options", "options[&#39;colour&#39;]"),
    ],
)
def test_an_error_of_two_fields_is_shown_beside_the_one_at_fault(
    api: Periodiq, web: TestClient, changes: dict[str, str], field: str, said: str
) -> None:
    csrf = signed_in(web)

    answer = web.post("/entries/new", data={**filled(**changes), "csrf": csrf})

    assert answer.status_code == 400
    assert said in error_beside(answer.text, field)
    assert api.list() == []
