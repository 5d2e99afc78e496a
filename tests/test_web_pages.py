"""The entries page and ``/api/entries`` over a whole schedule (Starlette's test client,
a real Redis with several partitions): search, state and alert filters find entries
far past the first page, the pages link to each other with a cursor, and bad
parameters get a 400 that says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.web import make_app


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    """3,000 hourly entries, a daily ``needle-report``, ``e01234`` paused."""
    app = Celery("dashboard-pages", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_partitions = 4
    api = periodiq(app)
    api.add_many([{"name": f"e{n:05d}", "task": "proj.hourly", "every": 3600}
                  for n in range(3000)])  # fmt: skip
    api.add("needle-report", "proj.report", cron="0 6 * * *")
    api.pause("e01234", note="one paused")
    yield api
    api.store.client.close()


@pytest.fixture
def web(api: Periodiq) -> TestClient:
    return TestClient(make_app(api), follow_redirects=False)


def shown(html: str) -> list[str]:
    return re.findall(r'<td><a href="/entries/[^"]+">([^<]+)</a>', html)


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    return None if found is None else unescape(found.group(1))


@pytest.mark.compat
def test_the_dashboard_searches_and_filters_the_whole_schedule(web: TestClient) -> None:
    found = web.get("/", params={"q": "needle"})
    paused = web.get("/", params={"state": "paused"})
    first = web.get("/")

    assert shown(found.text) == ["needle-report"]
    assert shown(paused.text) == ["e01234"]
    assert "1 shown of 1 matching · 3,001 entries in all" in paused.text
    assert len(shown(first.text)) == 100
    assert "100 shown of 3,001 entries" in first.text
    assert link(first.text, "prev") is None
    assert '<a href="/">3,001 entries</a>' in first.text  # totals from the summaries
    assert '<a href="/?state=active">3,000 active</a>' in first.text
    assert '<a href="/?state=paused">1 paused</a>' in first.text


def test_the_dashboard_pages_by_name_through_its_links(web: TestClient) -> None:
    seen: list[str] = []
    url: str | None = "/?sort=name&limit=400"
    while url is not None:
        page = web.get(url)
        assert page.status_code == 200
        seen += shown(page.text)
        url = link(page.text, "next")
    back = web.get(link(page.text, "prev") or "")

    assert seen == sorted(seen)
    assert len(seen) == len(set(seen)) == 3001
    assert shown(back.text) == seen[-601:-201]  # the page before the last (of 201)


@pytest.mark.compat
def test_the_api_answers_a_page_with_its_cursors(web: TestClient) -> None:
    answer = web.get("/api/entries", params={"limit": "50"}).json()
    seen = [item["name"] for item in answer["entries"]]
    while answer["next"]:
        answer = web.get("/api/entries", params={"limit": "1000", "cursor": answer["next"]}).json()
        seen += [item["name"] for item in answer["entries"]]
    default = web.get("/api/entries").json()
    paused = web.get("/api/entries", params={"state": "paused", "sort": "next"}).json()
    prefix = web.get("/api/entries", params={"q": "e0299*"}).json()

    assert len(seen) == len(set(seen)) == 3001
    assert len(default["entries"]) == 100
    assert default["previous"] is None
    assert default["total"] == 3001
    assert default["matched"] == 3001
    assert [item["name"] for item in paused["entries"]] == ["e01234"]
    assert paused["entries"][0]["note"] == "one paused"
    assert paused["matched"] == 1
    assert [item["name"] for item in prefix["entries"]] == [f"e0299{n}" for n in range(10)]


@pytest.mark.parametrize(
    ("params", "named"),
    [({"limit": "0"}, "limit=0"), ({"limit": "1001"}, "limit=1001"),
     ({"limit": "ten"}, "limit='ten'"), ({"cursor": "garbage"}, "cursor='garbage'"),
     ({"state": "asleep"}, "state='asleep'"), ({"alert": "late"}, "alert='late'"),
     ({"sort": "size"}, "sort='size'")],
)  # fmt: skip # table: one row per bad parameter
def test_a_bad_parameter_is_a_400_that_names_it(
    web: TestClient, params: dict[str, str], named: str
) -> None:
    answer = web.get("/api/entries", params=params)
    page = web.get("/", params=params)

    assert answer.status_code == 400
    assert named in answer.json()["error"]
    assert page.status_code == 400
    assert named.replace("'", "&#39;") in page.text
