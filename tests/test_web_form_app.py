"""The dashboard's entry form and the app: the warning of a task the app does not register
is on the page (while typing, and on the saved entry's page), not only in the server's
log; a new entry's zone is the app's ``timezone``.

Starlette's test client against a real Redis, as tests/test_web_form.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.web import make_app
from tests import test_web_form
from tests.test_web import TOKEN, signed_in
from tests.test_web_form import filled

# the same app and client as tests/test_web_form.py: its fixtures, under their names
api = test_web_form.api
web = test_web_form.web


def test_the_preview_says_while_typing_when_the_task_is_none_of_the_apps(
    web: TestClient,
) -> None:
    # The warning went to the server's log only; the form page asks it with the preview.
    unknown = web.get("/api/preview", params={"schedule": "@daily", "task": "proj.typo"})
    known = web.get("/api/preview", params={"schedule": "@daily", "task": "proj.report"})
    empty = web.get("/api/preview", params={"schedule": "nonsense", "task": ""})

    assert unknown.json()["unknown_task"] == (
        "'proj.typo' is not a task of this app: check its name, or that the workers' code "
        "defines it (runs of an unknown task fail on the worker)"
    )
    assert known.json()["unknown_task"] is None
    assert (empty.status_code, empty.json()["unknown_task"]) == (400, None)


def test_the_form_page_has_the_task_warning_and_the_saved_entry_page_shows_it(
    api: Periodiq, web: TestClient
) -> None:
    csrf = signed_in(web)

    blank = web.get("/entries/new").text
    saved = web.post("/entries/new", data={**filled(task="proj.typo"), "csrf": csrf})
    landed = web.get(saved.headers["location"]).text
    known = web.post("/entries/new", data={**filled(name="known"), "csrf": csrf})
    known_page = web.get(known.headers["location"]).text

    assert '<div class="warning" role="status" id="task-warning" hidden></div>' in blank
    assert "task: task.value" in blank  # the page asks the preview about the task typed
    assert saved.status_code == 303
    assert "Task &#39;proj.typo&#39; is not a task of this app" in landed
    assert "is not a task of this app" not in known_page


@pytest.fixture
def berlin_web(redis_url: str, broker_url: str) -> Iterator[tuple[Periodiq, TestClient]]:
    app = Celery("form", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.timezone = "Europe/Berlin"
    api = periodiq(app)
    yield api, TestClient(make_app(api, TOKEN), follow_redirects=False)
    api.store.client.close()


def test_a_new_entry_form_is_in_the_apps_timezone_and_an_empty_zone_means_it(
    berlin_web: tuple[Periodiq, TestClient],
) -> None:
    api, web = berlin_web
    csrf = signed_in(web)

    blank = web.get("/entries/new").text
    web.post("/entries/new", data={**filled(tz="", end_at="2099-01-01T00:00"), "csrf": csrf})
    preview = web.get("/api/preview", params={"schedule": "0 9 * * *", "tz": ""}).json()

    assert 'id="f-tz" name="tz" value="Europe/Berlin"' in blank
    entry = api.get("nightly").entry
    assert entry is not None
    assert entry.tz == "Europe/Berlin"
    assert entry.end_at == datetime(2099, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    assert all(fire.endswith(("+01:00", "+02:00")) for fire in preview["next"]), preview
