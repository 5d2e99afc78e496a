"""The dashboard's bulk actions over HTTP (Starlette's test client) against a real Redis
and a real broker: the entries ticked, or all matching the list's search and filters,
are paused with a note and an end, resumed, run now or deleted through the API; the
answer says how many changed and which were skipped and why. Without sign-in, without
the form's CSRF token or on a read-only dashboard nothing changes; a malformed form (no
selection, a name that is no entry's, a bad note or end, an unknown action) gets one
clear error and changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import redis
from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.web import make_app
from celery_periodiq.web.auth import COOKIE
from tests.test_web import TOKEN, signed_in


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("dashboard", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    for number in range(4):
        api.add(f"report-{number}", "proj.report", every=3600, owner="finance")
    api.add("sync", "proj.sync", every=60, owner="ops")
    api.pause("report-0", note="broken")
    yield api
    api.store.client.close()


@pytest.fixture
def web(api: Periodiq) -> TestClient:
    return TestClient(make_app(api, TOKEN), follow_redirects=False)


def said(page: str) -> str:
    found = re.search(r'id="bulk-done">(.*?)</div>', page)
    return "" if found is None else found.group(1)


def problem(page: str) -> str:
    found = re.search(r'class="banner problem">(.*?)</div>', page)
    return "" if found is None else found.group(1)


def states(api: Periodiq) -> dict[str, tuple[str, str | None]]:
    """Every entry's status and note: what a refused action must leave as it was."""
    return {item.name: (item.status, item.note) for item in api.list()}


def queued(api: Periodiq) -> int:
    with redis.Redis.from_url(api.app.conf.broker_url) as broker:
        return int(broker.llen("celery"))


def test_the_list_offers_checkboxes_only_to_who_may_write(web: TestClient) -> None:
    anonymous = web.get("/").text
    signed_in(web)
    writer = web.get("/").text

    assert 'name="names"' not in anonymous
    assert 'action="/bulk"' not in anonymous
    assert writer.count('form="bulk" aria-label="Select ') == 5
    assert "all 5 entries" in writer


def test_pausing_the_ticked_entries_with_a_note_and_an_end(api: Periodiq, web: TestClient) -> None:
    csrf = signed_in(web)
    names = ["report-0", "report-1", "sync"]
    form = {"csrf": csrf, "action": "pause", "note": "db migration", "until": "2h"}

    answer = web.post("/bulk", data={**form, "names": names})

    assert answer.status_code == 200
    assert said(answer.text) == "Paused 2 entries until 2h (note: db migration): report-1, sync."
    assert "<li>report-0: paused already</li>" in answer.text
    after = {item.name: item for item in api.list()}
    assert (after["report-1"].note, after["sync"].note) == ("db migration", "db migration")
    assert after["report-1"].paused_until is not None
    assert (after["report-0"].note, after["report-0"].paused_until) == ("broken", None)
    assert not after["report-2"].paused


def test_resuming_running_and_deleting_the_ticked_entries(api: Periodiq, web: TestClient) -> None:
    csrf = signed_in(web)
    before = queued(api)

    resumed = web.post("/bulk", data={"csrf": csrf, "action": "resume",
                                      "names": ["report-0", "report-1"]})  # fmt: skip
    run = web.post("/bulk", data={"csrf": csrf, "action": "run", "names": ["report-2", "sync"]})
    sent = queued(api) - before
    recorded = [event.kind for event in api.history("sync", limit=1)]
    deleted = web.post("/bulk", data={"csrf": csrf, "action": "delete",
                                      "names": ["report-3", "sync"]})  # fmt: skip

    assert said(resumed.text) == "Resumed 1 entry: report-0."
    assert "<li>report-1: not paused</li>" in resumed.text
    assert not api.get("report-0").paused
    assert said(run.text) == "Ran 2 entries now: report-2, sync."
    assert sent == 2
    task_ids = re.findall(r"<td><code>([-0-9a-f]{36})</code></td>", run.text)
    assert len(task_ids) == 2
    assert recorded == ["triggered"]
    assert said(deleted.text) == "Deleted 2 entries: report-3, sync."
    assert sorted(states(api)) == ["report-0", "report-1", "report-2"]


def test_all_matching_a_filter_changes_those_only(api: Periodiq, web: TestClient) -> None:
    csrf = signed_in(web)
    shown = web.get("/", params={"owner": "finance"}).text

    answer = web.post("/bulk", data={"csrf": csrf, "action": "pause", "scope": "matching",
                                     "owner": "finance", "note": "quarter close"})  # fmt: skip
    by_search = web.post("/bulk", data={"csrf": csrf, "action": "resume", "scope": "matching",
                                        "q": "report-*", "state": "paused"})  # fmt: skip

    assert "all 4 matching this search" in shown
    assert answer.status_code == 200
    assert said(answer.text).startswith("Paused 3 entries (note: quarter close): report-1, ")
    assert "<li>report-0: paused already</li>" in answer.text
    assert 'href="/?owner=finance">Back' in answer.text  # back to the list as it was
    assert said(by_search.text).startswith("Resumed 4 entries: report-0, report-1, ")
    assert not api.get("sync").paused
    assert not any(item.paused for item in api.list())


def test_all_matching_goes_past_a_page_of_a_thousand(api: Periodiq, web: TestClient) -> None:
    api.add_many(
        {"name": f"bulk-{number:04d}", "task": "proj.t", "every": 3600, "owner": "many"}
        for number in range(1_205)
    )
    csrf = signed_in(web)

    answer = web.post("/bulk", data={"csrf": csrf, "action": "pause", "scope": "matching",
                                     "owner": "many"})  # fmt: skip

    assert said(answer.text).startswith("Paused 1,205 entries: bulk-0000, bulk-0001, ")
    assert said(answer.text).endswith(" and 1,195 more.")
    assert api.count() == 1_210
    assert sum(item.paused for item in api.entries()) == 1_206  # and report-0, before


def test_without_sign_in_or_csrf_token_or_on_a_read_only_dashboard_nothing_changes(
    api: Periodiq, web: TestClient
) -> None:
    before, sent = states(api), queued(api)
    form = {"names": ["report-1", "sync"], "note": "x"}
    answers = [web.post("/bulk", data={**form, "action": verb}) for verb in ("pause", "run",
                                                                            "delete")]  # fmt: skip
    web.cookies.set(COOKIE, "forged")
    forged = web.post("/bulk", data={**form, "action": "pause", "csrf": "0" * 64})
    web.cookies.clear()
    signed_in(web)
    without_csrf = web.post("/bulk", data={**form, "action": "delete"})
    read_only = TestClient(make_app(api, None), follow_redirects=False)
    unwritable = read_only.post("/bulk", data={**form, "action": "pause"})
    no_bearer = web.post("/api/bulk/pause", json={"names": ["sync"]})

    assert [answer.status_code for answer in answers] == [403, 403, 403]
    assert (forged.status_code, without_csrf.status_code) == (403, 403)
    assert unwritable.status_code == 403
    assert no_bearer.status_code == 403
    assert states(api) == before
    assert queued(api) == sent


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({"action": "pause"}, "no entry selected"),
        ({"action": "pause", "names": ["report-1", "nope"]}, "no entry named &#39;nope&#39;"),
        ({"action": "delete", "names": ["nope-1", "report-1", "nope-2"]},
         "no entries named &#39;nope-1&#39;, &#39;nope-2&#39; (2 of the 3 names given)"),
        ({"action": "pause", "names": ["report-1"], "until": "yesterday"},
         "until=&#39;yesterday&#39; is invalid"),
        ({"action": "pause", "names": ["report-1"], "until": "2020-01-01T00:00:00+00:00"},
         "is in the past"),
        ({"action": "pause", "names": ["report-1"], "note": "n" * 1001},
         "is too long (allowed: at most 1,000 characters)"),
        ({"action": "wipe", "names": ["report-1"]}, "no bulk action &#39;wipe&#39;"),
        ({"action": "run", "scope": "matching", "owner": "nobody"}, "no entry matches"),
        ({"action": "run", "scope": "matching", "state": "sleepy"}, "sleepy"),
    ],
)  # fmt: skip
def test_malformed_input_gets_one_clear_error_and_changes_nothing(
    api: Periodiq, web: TestClient, form: dict[str, object], error: str
) -> None:
    before, sent = states(api), queued(api)
    csrf = signed_in(web)

    answer = web.post("/bulk", data={**form, "csrf": csrf})

    assert answer.status_code == 400
    assert error in problem(answer.text)
    assert states(api) == before
    assert queued(api) == sent


def test_the_json_api_takes_the_bearer_token(api: Periodiq, web: TestClient) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    paused = web.post("/api/bulk/pause", json={"names": ["report-0", "sync"], "note": "n"},
                      headers=bearer)  # fmt: skip
    run = web.post("/api/bulk/run", json={"scope": "matching", "owner": "ops"}, headers=bearer)
    bad = web.post("/api/bulk/delete", json={"names": "sync"}, headers=bearer)

    assert paused.json() == {"action": "pause", "changed": ["sync"],
                             "skipped": {"report-0": "paused already"}}  # fmt: skip
    assert list(run.json()["task_ids"]) == ["sync"]
    assert bad.status_code == 400
    assert "names='sync' is invalid" in bad.json()["error"]
    assert "sync" in states(api)
