"""The Django admin's "Periodic entries" (``celery_periodiq.contrib.django``) in a real
Django project (tests/django_project/) served by ``manage.py runserver``, signed in
through the admin's login form, against a private Redis: Django's permissions decide
who sees and does what (a refused POST writes nothing), Django's CSRF check refuses a
form without its token, the shared entry form puts each error beside its field and
writes nothing, and an entry made in the admin is run by a real beat and worker.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from celery_periodiq.errors import EntryNotFoundError
from tests.django_site import LIST, Site, django_site
from tests.processes import cluster, wait_for

pytestmark = pytest.mark.slow  # runserver and manage.py run as processes

ADD = LIST + "add/"
VALID = {"task": "guarded_record", "schedule": "@every 1s", "tz": "UTC", "enabled": "on"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with django_site(tmp_path_factory.mktemp("django")) as running:
        yield running


def page_of(name: str, action: str = "change") -> str:
    return f"{LIST}{quote(name.replace('/', '_2F'), safe='')}/{action}/"


def stored(site: Site, name: str) -> bool:
    try:
        site.api().get(name)
    except EntryNotFoundError:
        return False
    return True


def logged(site: Site, name: str) -> list[tuple[str, int, str]]:
    """Django's admin log of entry ``name``: (user, action flag, message), oldest first."""
    with sqlite3.connect(site.db) as db:
        return list(
            db.execute(
                "select username, action_flag, change_message from django_admin_log join "
                "auth_user on auth_user.id = user_id where object_id = ? order by "
                "django_admin_log.id",
                (name,),
            )
        )


def test_migrate_creates_the_four_permissions_and_no_table(site: Site) -> None:
    with sqlite3.connect(site.db) as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master")}
        codenames = {
            row[0]
            for row in db.execute(
                "select codename from auth_permission join django_content_type "
                "on django_content_type.id = content_type_id where app_label = 'periodiq'"
            )
        }
    assert codenames == {f"{a}_periodicentry" for a in ("view", "add", "change", "delete")}
    assert not [table for table in tables if "periodiq" in table or "periodic" in table]
    assert "auth_permission" in tables  # the database is the migrated one


def test_the_admin_index_lists_periodic_entries_for_who_may_view_them(site: Site) -> None:
    viewer = site.session("viewer").get(f"{site.url}/admin/", timeout=10).text
    keeper = site.session("keeper").get(f"{site.url}/admin/", timeout=10).text

    assert "Periodic entries" in viewer
    assert f'href="{ADD}"' not in viewer
    assert f'href="{ADD}"' in keeper


def test_who_is_not_signed_in_is_sent_to_the_admins_login(site: Site) -> None:
    site.api().add("anonymous-kept", "guarded_record", every=3600, owner="django-tests")
    with requests.Session() as anonymous:
        listed = anonymous.get(site.url + LIST, allow_redirects=False, timeout=10)
        anonymous.get(f"{site.url}/admin/login/", timeout=10)
        paused = site.post(anonymous, page_of("anonymous-kept", "pause"), {"note": "x"})

    assert listed.status_code == 302
    assert listed.headers["Location"].startswith("/admin/login/")
    assert paused.status_code == 302
    assert paused.headers["Location"].startswith("/admin/login/")
    assert not site.api().get("anonymous-kept").paused


def test_without_add_permission_no_add_button_and_the_post_is_refused(site: Site) -> None:
    site.api().add("viewer-sees", "guarded_record", every=3600, owner="django-tests")
    viewer = site.session("viewer")

    listed = viewer.get(site.url + LIST, timeout=10)
    form = viewer.get(site.url + ADD, timeout=10)
    posted = site.post(viewer, ADD, {**VALID, "name": "viewer-made"})

    assert listed.status_code == 200
    assert "viewer-sees" in listed.text
    assert "Add periodic entry" not in listed.text
    assert form.status_code == 403
    assert posted.status_code == 403
    assert not stored(site, "viewer-made")


def test_view_only_users_cannot_pause_run_edit_or_delete(site: Site) -> None:
    site.api().add("view-only", "guarded_record", every=3600, owner="django-tests")
    viewer = site.session("viewer")
    queued = site.queued()

    shown = viewer.get(site.url + page_of("view-only"), timeout=10)
    answers = [
        site.post(viewer, page_of("view-only", action), {"note": "mine"}).status_code
        for action in ("pause", "resume", "run", "delete", "edit")
    ]

    assert shown.status_code == 200
    assert "view-only" in shown.text
    assert 'value="Pause"' not in shown.text
    assert 'value="Delete"' not in shown.text
    assert answers == [403] * 5
    after = site.api().get("view-only")
    assert not after.paused
    assert site.queued() == queued  # no run was sent


def test_a_post_without_the_csrf_token_is_refused_and_writes_nothing(site: Site) -> None:
    site.api().add("csrf-kept", "guarded_record", every=3600, owner="django-tests")
    keeper = site.session("keeper")

    added = site.post(keeper, ADD, {**VALID, "name": "csrf-made"}, csrf=False)
    paused = site.post(keeper, page_of("csrf-kept", "pause"), {"note": "x"}, csrf=False)
    deleted = site.post(keeper, page_of("csrf-kept", "delete"), {}, csrf=False)

    assert (added.status_code, paused.status_code, deleted.status_code) == (403, 403, 403)
    assert "CSRF" in added.text
    assert not stored(site, "csrf-made")
    assert not site.api().get("csrf-kept").paused


def test_malformed_input_is_shown_beside_its_field_and_nothing_is_written(site: Site) -> None:
    clerk = site.session("clerk")

    bad_schedule = site.post(clerk, ADD, {**VALID, "name": "bad-1", "schedule": "61 * * * *"})
    bad_json = site.post(clerk, ADD, {**VALID, "name": "bad-2", "kwargs": "{oops"})
    bad_number = site.post(clerk, ADD, {**VALID, "name": "bad-3", "max_runs": "many"})
    no_name = site.post(clerk, ADD, {**VALID, "name": ""})

    assert bad_schedule.status_code == 400
    assert 'id="schedule-error"' in bad_schedule.text
    assert "Nothing was saved" in bad_schedule.text
    assert 'value="61 * * * *"' in bad_schedule.text  # what was typed is kept
    assert bad_json.status_code == 400
    assert 'id="kwargs-error"' in bad_json.text
    assert "not JSON" in bad_json.text
    assert 'id="max_runs-error"' in bad_number.text
    assert no_name.status_code == 400
    assert "csrfmiddlewaretoken" in bad_json.text  # Django's own token in the <form>
    assert not any(stored(site, name) for name in ("bad-1", "bad-2", "bad-3"))


def test_the_schedule_preview_answers_who_may_add_or_change(site: Site) -> None:
    clerk, viewer = site.session("clerk"), site.session("viewer")
    url = f"{site.url}{LIST}preview/"

    good = clerk.get(url, params={"schedule": "*/5 * * * *", "tz": "UTC"}, timeout=10)
    bad = clerk.get(url, params={"schedule": "*/5 * *", "tz": "UTC"}, timeout=10)
    refused = viewer.get(url, params={"schedule": "*/5 * * * *"}, timeout=10)

    assert good.status_code == 200
    assert good.json()["description"]
    assert len(good.json()["next"]) == 5
    assert bad.status_code == 400
    assert bad.json()["error"]
    assert refused.status_code == 403


def test_the_list_searches_filters_and_pages(site: Site) -> None:
    api = site.api()
    for number in range(5):
        api.add(f"paged-{number}", "guarded_record", every=3600, owner="pager")
    api.pause("paged-3", note="quiet")
    viewer = site.session("viewer")

    first = viewer.get(site.url + LIST, params={"q": "paged-", "sort": "name", "limit": "2"},
                       timeout=10)  # fmt: skip
    onward = first.text.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = viewer.get(site.url + onward.replace("&amp;", "&"), timeout=10)
    paused = viewer.get(site.url + LIST, params={"state": "paused", "owner": "pager"}, timeout=10)
    bad = viewer.get(site.url + LIST, params={"state": "sleepy"}, timeout=10)

    assert ("paged-0" in first.text, "paged-1" in first.text, "paged-2" in first.text) == (
        True, True, False,
    )  # fmt: skip
    assert "paged-2" in second.text
    assert "paged-3" in second.text
    assert "paged-0" not in second.text
    assert "paged-3" in paused.text
    assert "paged-4" not in paused.text
    assert bad.status_code == 400
    assert "sleepy" in bad.text


def test_an_odd_name_is_shown_as_text_and_its_page_found(site: Site) -> None:
    odd = "team/<i>odd</i> & name"
    site.api().add(odd, "guarded_record", every=3600, owner="django-tests")
    viewer = site.session("viewer")

    listed = viewer.get(site.url + LIST, params={"q": "odd"}, timeout=10)
    shown = viewer.get(site.url + page_of(odd), timeout=10)

    assert "team/&lt;i&gt;odd&lt;/i&gt; &amp; name" in listed.text
    assert "<i>odd</i>" not in listed.text
    assert shown.status_code == 200
    assert "team/&lt;i&gt;odd&lt;/i&gt; &amp; name" in shown.text


def test_the_keepers_group_pauses_with_a_note_resumes_runs_edits_and_deletes(
    site: Site,
) -> None:
    site.api().add("kept", "guarded_record", cron="0 3 * * *", owner="django-tests")
    keeper = site.session("keeper")

    paused = site.post(keeper, page_of("kept", "pause"), {"note": "disk <full>"})
    note = site.api().get("kept").note
    shown = keeper.get(site.url + page_of("kept"), timeout=10).text
    resumed = site.post(keeper, page_of("kept", "resume"), {})
    still_paused = site.api().get("kept").paused
    queued = site.queued()
    run = site.post(keeper, page_of("kept", "run"), {})
    sent = site.queued() - queued
    after_run = keeper.get(site.url + page_of("kept"), timeout=10).text
    task_id = re.search(r"task id ([-0-9a-f]+)", after_run)
    form = keeper.get(site.url + page_of("kept", "edit"), timeout=10).text
    changed = {**VALID, "name": "ignored", "schedule": "30 4 * * *", "tz": "UTC"}
    edited = site.post(keeper, page_of("kept", "edit"), changed)
    schedule = site.api().get("kept").entry
    asked = keeper.get(site.url + page_of("kept", "delete"), timeout=10)
    deleted = site.post(keeper, page_of("kept", "delete"), {})

    assert paused.status_code == 302
    assert note == "disk <full>"
    assert "Paused: disk &lt;full&gt;" in shown
    assert resumed.status_code == 302
    assert still_paused is False
    assert run.status_code == 302
    assert sent == 1
    assert "The periodic entry “kept”: Ran now (task id " in after_run
    assert 'value="0 3 * * *"' in form  # the form is prefilled
    assert edited.status_code == 302
    assert edited.headers["Location"].endswith(page_of("kept"))
    assert schedule is not None
    assert schedule.schedule == "30 4 * * *"
    assert asked.status_code == 200
    assert "Yes, delete it" in asked.text
    assert deleted.status_code == 302
    assert not stored(site, "kept")
    assert logged(site, "kept") == [
        ("keeper", 2, "Paused: disk <full>"),
        ("keeper", 2, "Resumed"),
        ("keeper", 2, f"Ran now (task id {task_id and task_id[1]})"),
        ("keeper", 2, "Edited"),
        ("keeper", 3, ""),
    ]


def test_an_entry_made_in_the_admin_is_run_by_a_real_beat_and_worker(
    site: Site, tmp_path: Path
) -> None:
    clerk = site.session("clerk")
    form = clerk.get(site.url + ADD, timeout=10)

    made = site.post(clerk, ADD, {**VALID, "name": "from-django", "kwargs": '{"by": "admin"}'})

    assert form.status_code == 200
    assert "reports.send_daily" in form.text  # the project's app's tasks are offered
    assert made.status_code == 302, made.text[-2000:]
    with cluster(tmp_path, site.redis_url, site.broker_url) as running:
        running.worker()
        running.beat()
        runs = wait_for(lambda: running.runs_of("from-django"), 60, "a run of from-django")
        wait_for(lambda: site.api().get("from-django").counters.get("succeeded"), 30,
                 "the run to succeed")  # fmt: skip
        shown = clerk.get(site.url + page_of("from-django"), timeout=10).text
    assert runs[0]["kwargs"] == {"by": "admin"}
    assert logged(site, "from-django") == [("clerk", 1, '[{"added": {}}]')]
    assert '<svg class="plot"' in shown  # the runs chart
    assert "succeeded" in shown


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TEST_PERIODIQ_CELERY_APP": "proj.nothing:app"}, "names nothing importable"),
        ({"TEST_PERIODIQ_CELERY_APP": "proj.settings:DEBUG"}, "not a Celery app"),
        ({"TEST_PERIODIQ_CELERY_APP": " "}, "is invalid"),
    ],
)
def test_a_setting_that_names_no_celery_app_fails_at_start(
    site: Site, env: dict[str, str], message: str
) -> None:
    checked = site.manage("check", **env)

    assert checked.returncode != 0
    assert "ImproperlyConfigured" in checked.stderr
    assert "PERIODIQ_CELERY_APP" in checked.stderr
    assert message in checked.stderr


def test_the_app_is_the_current_one_the_named_one_or_a_clear_error(site: Site) -> None:
    ask = "from celery_periodiq.contrib.django.celery_app import celery_app; print(celery_app())"

    current = site.manage("shell", "-c", ask)
    named = site.manage("shell", "-c", ask, TEST_PERIODIQ_CELERY_APP="proj.celery:app")
    missing = site.manage("shell", "-c", ask, TEST_NO_CELERY_APP="1")

    assert "periodiq_app" in current.stdout, current.stderr
    assert "periodiq_app" in named.stdout, named.stderr
    assert missing.returncode != 0
    assert "found no Celery app" in missing.stderr
    assert "PERIODIQ_CELERY_APP" in missing.stderr


def test_while_the_schedules_redis_is_down_the_pages_say_so(site: Site) -> None:
    site.api().add("outage-kept", "guarded_record", every=3600, owner="django-tests")
    keeper = site.session("keeper")
    site.schedule.stop()
    try:
        listed = keeper.get(site.url + LIST, timeout=30)
        shown = keeper.get(site.url + page_of("outage-kept"), timeout=30)
        paused = site.post(keeper, page_of("outage-kept", "pause"), {"note": "x"})
        added = site.post(keeper, ADD, {**VALID, "name": "outage-made"})
    finally:
        site.schedule.restart()

    assert (listed.status_code, shown.status_code) == (503, 503)
    assert (paused.status_code, added.status_code) == (503, 503)
    assert "Redis" in listed.text
    assert not site.api().get("outage-kept").paused
    assert not stored(site, "outage-made")


def test_the_admin_records_its_signed_in_user_in_the_audit_trail_and_shows_it(
    site: Site,
) -> None:
    keeper, viewer = site.session("keeper"), site.session("viewer")
    added = site.post(keeper, ADD, {**VALID, "name": "audited", "schedule": "0 3 * * *"})
    paused = site.post(keeper, page_of("audited", "pause"), {"note": "disk full"})
    refused = site.post(viewer, page_of("audited", "resume"), {})
    edited = site.post(keeper, page_of("audited", "edit"), {**VALID, "schedule": "30 4 * * *"})
    shown = viewer.get(site.url + page_of("audited"), timeout=10).text

    assert (added.status_code, paused.status_code, refused.status_code) == (302, 302, 403)
    assert edited.status_code == 302
    trail = site.api().audit("audited")
    assert [(r.action, r.actor, r.via, r.note) for r in reversed(trail)] == [
        ("add", "keeper", "admin", ""),
        ("pause", "keeper", "admin", "disk full"),
        ("update", "keeper", "admin", ""),
    ]
    assert trail[0].changes["schedule"] == ("0 3 * * *", "30 4 * * *")
    assert "<h2>Audit</h2>" in shown
    assert "disk full" in shown
    assert "keeper" in shown


def test_the_admin_says_which_entry_is_in_a_maintenance_window_until_when(site: Site) -> None:
    api = site.api()
    api.add("windowed-admin", "guarded_record", every=3600, owner="maint")
    api.add_window("admin-deploy", scope="owner:maint", start=api.now().isoformat(),
                   end="2090-01-01T00:00Z")  # fmt: skip
    viewer = site.session("viewer")
    try:
        listing = viewer.get(site.url + LIST, params={"owner": "maint"}, timeout=10)
        page = viewer.get(site.url + page_of("windowed-admin"), timeout=10)
    finally:
        api.remove_window("admin-deploy")

    assert "in window &#x27;admin-deploy&#x27; until 2090-01-01T00:00:00+00:00" in listing.text
    assert "Now in window &#x27;admin-deploy&#x27; until 2090-01-01T00:00:00+00:00" in page.text
