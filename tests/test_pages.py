"""Pages of the whole schedule (``Periodiq.page``): by name and by next run, forward and
back, searched and filtered from the indexes the scripts keep, on a real Redis with
several partitions (and one test on a real Redis Cluster).

Entries are written only through the public API; a guarded task run eagerly makes one
failing. Paging sees every entry that exists for the whole walk exactly once, while
others are added and deleted between pages; a search or a filter finds entries far past
the first page; a search that stops early says how far it went and goes on.
"""

from __future__ import annotations

import base64
import json
import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from celery_periodiq import EntryPage, PageError, PeriodicTask, Periodiq, periodiq
from celery_periodiq.localredis import LocalRedisCluster
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.store import pages
from celery_periodiq.store.cursor import Cursor, encode
from celery_periodiq.store.pages import page

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("paging", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_partitions = 5
    api = periodiq(app)
    yield api
    api.store.client.close()


def many(prefix: str, count: int, **options: Any) -> list[dict[str, Any]]:
    return [
        {"name": f"{prefix}{n:04d}", "task": "proj.t", "every": 60 + n % 97, **options}
        for n in range(count)
    ]


def walk(api: Periodiq, between: Any = None, **query: Any) -> tuple[list[str], list[str]]:
    """Every page forward, then every page back from the last; ``between`` runs after
    each page. The names of each walk, in the order seen."""
    ahead: list[str] = []
    cursor = None
    while True:
        found = api.page(cursor=cursor, **query)
        ahead += [item.name for item in found.entries]
        if between is not None:
            between()
        if found.next is None:
            break
        cursor = found.next
    back: list[str] = []
    last = found
    cursor = last.previous
    while cursor is not None:
        found = api.page(cursor=cursor, **query)
        back = [item.name for item in found.entries] + back
        if between is not None:
            between()
        cursor = found.previous
    return ahead, back + [item.name for item in last.entries]


def churn(api: Periodiq, seed: int) -> Any:
    """Between two pages: add entries anywhere in the order, delete some of the others."""
    rng = random.Random(seed)
    made: list[str] = []
    numbers = iter(range(1_000_000))

    def step() -> None:
        fresh = [f"{rng.choice('0amtz')}-new-{next(numbers):04d}" for _ in range(3)]
        api.add_many([{"name": name, "task": "proj.t", "every": rng.randint(30, 900)}
                      for name in fresh])  # fmt: skip
        made.extend(fresh)
        doomed = [name for name in made if rng.random() < 0.3]
        for name in doomed:
            api.delete(name)
            made.remove(name)

    return step


def test_by_name_every_entry_that_stays_is_seen_once_while_others_come_and_go(
    api: Periodiq,
) -> None:
    api.add_many(many("stay-", 400))

    ahead, back = walk(api, churn(api, 1), limit=23)

    stayed = {f"stay-{n:04d}" for n in range(400)}
    for seen in (ahead, back):
        counts = Counter(seen)
        assert [name for name, n in counts.items() if n > 1] == []
        assert stayed <= set(counts)
        assert seen == sorted(seen)


def test_by_next_run_every_entry_is_seen_once_the_ones_with_none_last(api: Periodiq) -> None:
    api.add_many(many("due-", 300))
    api.add_many(many("idle-", 20, enabled=False))
    api.add("on-boot", "proj.t", cron="@reboot")
    for n in range(0, 300, 30):
        api.pause(f"due-{n:04d}")

    ahead, back = walk(api, churn(api, 2), limit=17, sort="next")
    plain, _ = walk(api, sort="next", limit=1000)

    stayed = {f"due-{n:04d}" for n in range(300)} | {f"idle-{n:04d}" for n in range(20)}
    for seen in (ahead, back):
        assert [name for name, n in Counter(seen).items() if n > 1] == []
        assert stayed | {"on-boot"} <= set(seen)
    nexts = {item.name: item.next_run for item in api.list()}
    due = [name for name in plain if nexts[name] is not None]
    rest = [name for name in plain if nexts[name] is None]
    assert plain == due + rest  # the entries with no next run come last ...
    assert rest == sorted(rest)  # ... by name
    assert len(rest) == 10 + 20 + 1
    assert [nexts[name] for name in due] == sorted(nexts[name] for name in due)


@pytest.fixture
def big(api: Periodiq) -> Periodiq:
    """3,000 hourly entries, a daily needle last by name, a paused entry in the middle,
    three of an owner near the end, a disabled one, a failing one."""
    api.add_many(many("e", 3000))
    api.add("zz-needle-report", "proj.report", cron="0 6 * * *")
    api.pause("e1500", note="maintenance")
    api.update("e2999", owner="finance")
    api.update("e2998", owner="finance")
    api.update("e0001", owner="finance")
    api.update("e2500", enabled=False)

    @api.app.task(base=PeriodicTask, name="proj.broken", shared=False)
    def broken() -> None:
        raise ValueError("boom")

    api.add("e2750-broken", "proj.broken", every=60, start_at=START, failure_threshold=1)
    broken.apply(headers={HEADER_ENTRY: "e2750-broken",
                          HEADER_TICK: to_ms(START + timedelta(minutes=1))})  # fmt: skip
    return api


def names(found: EntryPage) -> list[str]:
    return [item.name for item in found.entries]


def test_search_and_filters_find_entries_far_past_the_first_page(big: Periodiq) -> None:
    api = big

    assert names(api.page(q="needle")) == ["zz-needle-report"]
    assert names(api.page(q="NEEDLE-Rep")) == ["zz-needle-report"]
    assert names(api.page(q="zz-*")) == ["zz-needle-report"]
    assert names(api.page(q="ZZ-*")) == []  # a prefix is exact
    assert names(api.page(q="e150*", limit=3)) == ["e1500", "e1501", "e1502"]
    assert api.page(q="e150*").matched == 10
    paused = api.page(state="paused")
    assert names(paused) == ["e1500"]
    assert paused.entries[0].note == "maintenance"
    assert paused.matched == 1
    assert names(api.page(state="disabled")) == ["e2500"]
    assert names(api.page(alert="failing")) == ["e2750-broken"]
    assert names(api.page(owner="finance")) == ["e0001", "e2998", "e2999"]
    assert names(api.page(owner="finance", q="2999")) == ["e2999"]
    assert names(api.page(state="active", owner="finance", limit=2)) == ["e0001", "e2998"]
    assert names(api.page(state="paused", sort="next")) == ["e1500"]
    assert api.page(state="quarantined").entries == []
    active = api.page(state="active", q="e25", limit=1000)
    assert "e2500" not in names(active)
    assert len(active.entries) == 99  # e2500 to e2599 but the disabled e2500
    assert api.page().total == 3002


def test_a_selective_search_is_answered_whole_by_redis_at_once(big: Periodiq) -> None:
    found = page(big.store, q="NEEDLE", budget=10, deadline=0)  # no walk could reach it

    assert names(found) == ["zz-needle-report"]
    assert (found.matched, found.searched, found.next) == (1, None, None)


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches walk the order, as one with more than ENUMERATE matches does."""
    monkeypatch.setattr(pages, "ENUMERATE", 0)


@pytest.mark.usefixtures("walked")
def test_a_search_that_stops_early_says_how_far_it_went_and_goes_on(big: Periodiq) -> None:
    store = big.store
    seen: list[str] = []
    searched: list[tuple[int, int] | None] = []
    cursor = None
    while True:
        found = page(store, q="needle", budget=700, deadline=None, cursor=cursor)
        seen += names(found)
        searched.append(found.searched)
        if found.next is None:
            break
        cursor = found.next

    assert seen == ["zz-needle-report"]
    assert searched[:4] == [(700, 3002), (1400, 3002), (2100, 3002), (2800, 3002)]
    assert searched[-1] is None  # the last one went to the end
    back = page(store, q="needle", budget=700, deadline=None, cursor=found.previous)
    assert back.entries == []
    assert back.searched == (701, 3002)  # from the end: the needle, then 700 more


@pytest.mark.usefixtures("walked")
def test_a_search_out_of_time_answers_what_it_has_and_goes_on_from_there(
    big: Periodiq,
) -> None:
    requests, seen, searched = 0, [], []
    cursor = None
    while True:  # no time at all: each request looks at one batch, then answers
        found = page(big.store, q="needle", deadline=0, cursor=cursor, sort="name")
        requests += 1
        seen += names(found)
        searched.append(found.searched)
        if found.next is None:
            break
        cursor = found.next

    assert seen == ["zz-needle-report"]
    assert requests > 1
    steps = [done for done, _ in filter(None, searched)]
    assert all(a < b for a, b in pairwise(steps))  # each request goes further
    assert searched[-1] is None


def test_bad_paging_input_is_refused_with_a_clear_error(api: Periodiq) -> None:
    api.add("report", "proj.t", every=60)
    first = api.page(limit=1)
    made_up = base64.urlsafe_b64encode(json.dumps({"o": "name", "d": "x"}).encode()).decode()
    bad: dict[str, dict[str, Any]] = {
        "cursor": {"cursor": "not-a-cursor!"},
        "cursor-json": {"cursor": made_up},
        "cursor-base64": {"cursor": base64.urlsafe_b64encode(b"\xff\xfe").decode()},
        "cursor-empty": {"cursor": "e30"},  # {}
        "cursor-order": {"cursor": encode(Cursor("next", True, (1.0, "a"))), "sort": "name"},
        "limit-zero": {"limit": 0},
        "limit-big": {"limit": 1001},
        "limit-bool": {"limit": True},
        "state": {"state": "sleeping"},
        "alert": {"alert": "late"},
        "sort": {"sort": "size"},
        "q": {"q": "x" * 1001},
    }
    refused = {}
    for what, options in bad.items():
        with pytest.raises(PageError) as caught:
            api.page(**options)
        refused[what] = str(caught.value)

    assert first.next is None
    assert "cursor=" in refused["cursor"]
    assert "next" in refused["cursor"]
    assert "1 to 1000" in refused["limit-big"]
    assert "sleeping" in refused["state"]
    assert "paused" in refused["state"]
    assert "late" in refused["alert"]
    assert "size" in refused["sort"]
    assert api.count() == 1


def test_pages_on_a_redis_cluster(tmp_path: Path, broker_url: str) -> None:
    with LocalRedisCluster(tmp_path / "cluster") as formed:
        app = Celery("paged-cluster", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = formed.url
        app.conf.periodiq_redis_cluster = True
        api = periodiq(app)
        api.add_many(many("c", 250))
        api.pause("c0200")

        by_name, back = walk(api, limit=31)
        by_next, _ = walk(api, limit=31, sort="next")
        paused = names(api.page(state="paused"))
        searched = names(api.page(q="c024*"))
        api.store.client.close()

    everything = [f"c{n:04d}" for n in range(250)]
    assert by_name == back == everything
    assert sorted(by_next) == everything
    assert by_next[-1] == "c0200"
    assert paused == ["c0200"]
    assert searched == [f"c024{n}" for n in range(10)]


def test_by_next_run_entries_due_at_one_instant_go_by_name_even_when_the_cursor_is_gone(
    api: Periodiq,
) -> None:
    api.add_many([{"name": f"t{n:03d}", "task": "proj.t", "cron": "0 6 * * *"}
                  for n in range(120)])  # fmt: skip
    first = api.page(sort="next", limit=10)
    api.delete("t009")  # the cursor's own entry: its place is found among the tied ones
    second = api.page(cursor=first.next, limit=10)
    api.delete("t010")
    again = api.page(cursor=second.previous, limit=10)

    assert names(first) == [f"t{n:03d}" for n in range(10)]
    assert names(second) == [f"t{n:03d}" for n in range(10, 20)]
    assert names(again) == [f"t{n:03d}" for n in range(9)]
    assert again.previous is None
