"""The Django admin list's bulk actions in the test project (tests/django_project/) served
by ``manage.py runserver``, signed in through the admin's login form, against a private
Redis and broker: the keepers' group pauses with a note, resumes, runs now and deletes
(after a page that asks) the entries ticked or all matching a filter, told in the
admin's messages and written to Django's admin log; a view-only user, a post without
Django's CSRF token and a malformed form change nothing.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
import requests

from tests.django_site import LIST, Site, django_site
from tests.test_django_admin import logged

pytestmark = pytest.mark.slow  # runserver and manage.py run as processes

BULK = LIST + "bulk/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with django_site(tmp_path_factory.mktemp("django-bulk")) as running:
        yield running


@pytest.fixture
def owned(site: Site, request: pytest.FixtureRequest) -> Iterator[str]:
    """Three entries of an owner tag of the test's own (``<tag>-0`` paused), deleted after."""
    api = site.api()
    tag = re.sub(r"\W", "-", request.node.name)[-40:]
    for number in range(3):
        api.add(f"{tag}-{number}", "guarded_record", every=3600, owner=tag)
    api.pause(f"{tag}-0", note="broken")
    yield tag
    if api.page(owner=tag).entries:
        api.delete_many(owner=tag, force=True)


def messages_of(session: requests.Session, site: Site, location: str) -> list[str]:
    """The admin's messages on the page a bulk action went back to."""
    page = session.get(site.url + location, timeout=10).text
    return [html.unescape(text) for text in re.findall(r'<li class="\w+">(.*?)</li>', page)]


def states(site: Site, tag: str) -> dict[str, tuple[str, str | None]]:
    return {item.name: (item.status, item.note) for item in site.api().list(owner=tag)}


def test_the_list_offers_bulk_actions_by_permission(site: Site, owned: str) -> None:
    viewer = site.session("viewer").get(site.url + LIST, params={"owner": owned}, timeout=10)
    keeper = site.session("keeper").get(site.url + LIST, params={"owner": owned}, timeout=10)

    assert 'name="names"' not in viewer.text
    assert f'action="{BULK}"' not in viewer.text
    assert keeper.text.count('class="action-select"') == 3
    assert '<option value="delete">Delete selected entries</option>' in keeper.text
    assert "all 3 matching this search" in keeper.text


def test_the_keepers_pause_resume_and_run_the_ticked_entries(site: Site, owned: str) -> None:
    keeper = site.session("keeper")
    names = [f"{owned}-{number}" for number in range(3)]
    queued = site.queued()

    paused = site.post(keeper, BULK, {"action": "pause", "names": names[:2],
                                      "note": "db <migration>", "until": "2h",
                                      "owner": owned})  # fmt: skip
    told = messages_of(keeper, site, paused.headers["Location"])
    after_pause = states(site, owned)
    resumed = site.post(keeper, BULK, {"action": "resume", "names": names})
    told_resumed = messages_of(keeper, site, resumed.headers["Location"])
    run = site.post(keeper, BULK, {"action": "run", "names": names[1:]})
    sent = site.queued() - queued

    assert paused.status_code == 302
    assert paused.headers["Location"] == f"{LIST}?owner={owned}"
    assert told == [
        f"Paused 1 entry until 2h (note: db <migration>): {names[1]}.",
        f"Skipped 1 entry: {names[0]} (paused already).",
    ]
    assert after_pause[names[1]] == ("paused", "db <migration>")
    assert after_pause[names[0]] == ("paused", "broken")
    assert told_resumed[0] == f"Resumed 2 entries: {names[0]}, {names[1]}."
    assert told_resumed[1] == f"Skipped 1 entry: {names[2]} (not paused)."
    assert run.status_code == 302
    assert sent == 2
    assert logged(site, names[1]) == [
        ("keeper", 2, "Paused: db <migration> (bulk)"),
        ("keeper", 2, "Resumed (bulk)"),
        ("keeper", 2, "Ran now (bulk)"),
    ]
    trail = site.api().audit(names[1])
    assert [(r.action, r.actor, r.via) for r in reversed(trail)][-3:] == [
        ("pause", "keeper", "admin"),
        ("resume", "keeper", "admin"),
        ("trigger", "keeper", "admin"),
    ]
    assert [r.actor for r in site.api().audit(names[0])].count("keeper") == 1  # resumed only


def test_all_matching_a_filter_is_paused_and_deleted_after_asking(site: Site, owned: str) -> None:
    keeper = site.session("keeper")
    site.api().add("bystander", "guarded_record", every=3600, owner="elsewhere")
    matching = {"scope": "matching", "owner": owned}

    paused = site.post(keeper, BULK, {"action": "pause", **matching, "note": "close"})
    all_paused = {status for status, _ in states(site, owned).values()}
    asked = site.post(keeper, BULK, {"action": "delete", **matching})
    kept_while_asking = len(states(site, owned))
    deleted = site.post(keeper, BULK, {"action": "delete", **matching, "confirmed": "yes"})
    told = messages_of(keeper, site, deleted.headers["Location"])

    assert paused.status_code == 302
    assert all_paused == {"paused"}
    assert asked.status_code == 200
    assert "Delete these 3 periodic entries" in asked.text
    assert f"<li>{owned}-2</li>" in asked.text
    assert kept_while_asking == 3
    assert deleted.status_code == 302
    assert told == [f"Deleted 3 entries: {owned}-0, {owned}-1, {owned}-2."]
    assert states(site, owned) == {}
    assert site.api().get("bystander").status == "active"
    assert logged(site, f"{owned}-1")[-1] == ("keeper", 3, "")
    site.api().delete("bystander")


def test_a_view_only_user_and_a_post_without_csrf_change_nothing(site: Site, owned: str) -> None:
    viewer, keeper = site.session("viewer"), site.session("keeper")
    before, queued = states(site, owned), site.queued()
    names = [f"{owned}-1", f"{owned}-2"]

    refused = [
        site.post(viewer, BULK, {"action": verb, "names": names, "confirmed": "yes"}).status_code
        for verb in ("pause", "resume", "run", "delete")
    ]
    matching = site.post(viewer, BULK, {"action": "pause", "scope": "matching", "owner": owned})
    no_csrf = site.post(keeper, BULK, {"action": "pause", "names": names}, csrf=False)
    clerk = site.post(site.session("clerk"), BULK, {"action": "delete", "names": names,
                                                    "confirmed": "yes"})  # fmt: skip

    assert refused == [403, 403, 403, 403]
    assert matching.status_code == 403
    assert no_csrf.status_code == 403
    assert "CSRF" in no_csrf.text
    assert clerk.status_code == 403  # may add, not delete
    assert states(site, owned) == before
    assert site.queued() == queued
    assert logged(site, names[0]) == []


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({"action": "pause"}, "no entry selected"),
        ({"action": "pause", "names": ["{tag}-1", "nope"]}, "no entry named 'nope'"),
        ({"action": "pause", "names": ["{tag}-1"], "until": "soon"}, "until='soon' is invalid"),
        ({"action": "pause", "names": ["{tag}-1"], "note": "n" * 1001}, "at most 1,000"),
        ({"action": "", "names": ["{tag}-1"]}, "no bulk action ''"),
        ({"action": "run", "scope": "matching", "owner": "nobody-at-all"}, "no entry matches"),
    ],
)  # fmt: skip
def test_malformed_input_is_one_error_message_and_changes_nothing(
    site: Site, owned: str, form: dict[str, object], error: str
) -> None:
    keeper = site.session("keeper")
    before, queued = states(site, owned), site.queued()
    data = {
        key: [name.format(tag=owned) for name in value] if isinstance(value, list) else value
        for key, value in form.items()
    }

    answer = site.post(keeper, BULK, data)
    told = messages_of(keeper, site, answer.headers["Location"])

    assert answer.status_code == 302
    assert len(told) == 1
    assert error.lower() in told[0].lower()  # the admin capitalizes a message
    assert states(site, owned) == before
    assert site.queued() == queued


def test_a_get_is_refused(site: Site) -> None:
    answer = site.session("keeper").get(site.url + BULK, timeout=10)

    assert answer.status_code == 405
