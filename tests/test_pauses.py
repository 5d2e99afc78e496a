"""Timed pauses and pausing many entries at once, through the API and the scripts, on a
private Redis: when a pause ends, which entries a selector names, and malformed input.
Real beats ending a pause on time are in ``tests/test_pause_live.py``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from starlette.testclient import TestClient

from celery_periodiq import EntryError, EntryNotFoundError, Periodiq, PeriodiqError, periodiq
from celery_periodiq.beat.pauses import end_pauses
from celery_periodiq.model.plan import to_ms
from celery_periodiq.present import shapes
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.web import make_app
from tests.test_api import snapshot
from tests.test_audit import make_api
from tests.test_cli import cli

TASK = "proj.tasks.report"
PAST = datetime(2020, 1, 1, tzinfo=UTC)
KEYS = Keys("periodiq:t", 16)


@pytest.fixture
def api(broker_url: str, redis_url: str) -> Iterator[Periodiq]:
    app = Celery("t", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    client = periodiq(app)
    yield client
    client.store.client.close()
    app.close()


@pytest.fixture
def schedule(api: Periodiq) -> Periodiq:
    """Two entries of owner "team" (one paused until resumed) and two others."""
    api.add("report-daily", TASK, every=60, start_at=PAST, owner="team")
    api.add("report-weekly", TASK, every=600, start_at=PAST, owner="team")
    api.add("cleanup", TASK, every=60, start_at=PAST)
    api.add("sync", TASK, every=60, start_at=PAST)
    api.pause("report-weekly", note="broken")
    return api


def test_a_timed_pause_keeps_its_end_and_says_it(api: Periodiq, redis_url: str) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    before = api.now()

    stored = api.pause("report", note="migration", until="2h")

    assert (stored.status, stored.note, stored.next_run) == ("paused", "migration", None)
    assert stored.paused_until is not None
    assert before + timedelta(hours=2) <= stored.paused_until <= api.now() + timedelta(hours=2)
    shown_until = shapes.entry_json(stored)["paused_until"]
    assert datetime.fromisoformat(shown_until) == stored.paused_until
    client = redis.Redis.from_url(redis_url)
    assert client.zscore(KEYS.of("report").pauses, "report") == to_ms(stored.paused_until)
    # paused again with no end: until resumed, and no end left for a beat to act on
    again = api.pause("report", until=None)
    assert (again.paused_until, client.zscore(KEYS.of("report").pauses, "report")) == (None, None)
    client.close()


def test_the_claim_lists_an_ended_pause_and_the_beat_resumes_it_from_its_end(
    api: Periodiq,
) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    end = api.pause("report", until=timedelta(hours=2)).paused_until
    assert end is not None
    part, scripts = KEYS.of("report"), api.store.scripts

    early = scripts.claim(part, "b1", 10, 5000, now_ms=to_ms(end) - 1000)
    late = scripts.claim(part, "b1", 10, 5000, now_ms=to_ms(end) + 1000)
    again = scripts.claim(part, "b2", 10, 5000, now_ms=to_ms(end) + 2000)  # within b1's lease

    assert (early.ended, early.next_due_ms) == ([], to_ms(end))
    assert (late.ended, late.claims, again.ended) == (["report"], [], [])
    assert end_pauses(api.store, late.ended, late.now_ms) == ["report"]
    stored = api.get("report")
    # from the first tick after its end, not after now (two hours earlier)
    assert stored.status == "active"
    assert stored.next_run is not None
    assert end < stored.next_run <= end + timedelta(seconds=60)
    assert end_pauses(api.store, ["report"], late.now_ms) == []  # ended already: nothing changes


def test_a_pause_changed_after_its_end_was_listed_is_left_alone(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    end = api.pause("report", until="1h").paused_until
    assert end is not None
    listed = api.store.scripts.claim(KEYS.of("report"), "b1", 10, 5000, now_ms=to_ms(end) + 1)
    api.pause("report", note="longer", until="3h")  # paused again before the beat acts

    assert end_pauses(api.store, listed.ended, listed.now_ms) == []
    stored = api.get("report")
    assert (stored.status, stored.note, stored.paused_until) == (
        "paused",
        "longer",
        stored.paused_until,
    )
    assert stored.paused_until is not None
    assert stored.paused_until > end + timedelta(hours=1)


def test_a_timed_pause_its_index_lost_is_named_by_doctor_and_indexed_by_reindex(
    api: Periodiq,
) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    api.add("held", TASK, every=60, start_at=PAST)
    api.pause("held")  # until resumed: no end to index
    end = api.pause("report", until="2h").paused_until
    assert end is not None
    assert api.diagnose()[-1].status == "ok"
    part, scripts, client = KEYS.of("report"), api.store.scripts, api.store.client
    client.zrem(part.pauses, "report")  # as damage or someone else's write leaves it

    lost = scripts.claim(part, "b1", 10, 5000, now_ms=to_ms(end) + 1000)
    check = api.diagnose()[-1]
    api.reindex()
    indexed = (client.zscore(part.pauses, "report"), client.zscore(part.pauses, "held"))
    found = scripts.claim(part, "b1", 10, 5000, now_ms=to_ms(end) + 2000)

    assert lost.ended == []  # no beat would ever end it
    assert (check.name, check.status) == ("indexes", "warn")
    assert check.detail.startswith("the pauses index misses 1 timed pause: it would never end")
    assert "doctor --reindex" in check.detail
    assert indexed == (to_ms(end), None)
    assert api.diagnose()[-1].status == "ok"
    assert found.ended == ["report"]
    # one listed for a beat to end keeps its score (a lease later) at the next reindex
    listed = client.zscore(part.pauses, "report")
    api.reindex()
    assert client.zscore(part.pauses, "report") == listed != to_ms(end)


def test_doctor_counts_lost_timed_pauses_among_thousands_and_samples_beyond_its_sample(
    broker_url: str, redis_url: str
) -> None:
    api = make_api(broker_url, redis_url, periodiq_partitions=1)  # all in one partition
    api.add_many({"name": f"p{n:04}", "task": TASK, "every": 60} for n in range(2500))
    api.pause_many(all=True)  # until resumed
    for name in ("p0007", "p1500", "p2499"):
        api.pause(name, until="2h")
    pauses = api.store.keys.of("p0007").pauses
    api.store.client.zrem(pauses, "p0007", "p2499")

    whole = api.diagnose(sample=None)[-1].detail
    api.resume_many(all=True)
    api.pause_many(all=True, until="2h")
    api.store.client.delete(pauses)  # every pause lost: so is every one of a sample
    sampled = api.diagnose(sample=1000)[-1].detail
    api.reindex()

    assert whole.startswith("the pauses index misses 2 timed pauses: they would never end (")
    assert sampled.startswith(
        "the pauses index misses 1,000 timed pauses: they would never end "
        "(in a sample of 1,000 of 2,500 paused entries)"
    )
    assert api.store.client.zcard(pauses) == 2500
    api.store.client.close()
    api.app.close()


def test_a_pauses_index_of_another_type_is_named_by_doctor_and_replaced_by_reindex(
    api: Periodiq,
) -> None:
    api.add("report", TASK, every=60, start_at=PAST)
    end = api.pause("report", until="2h").paused_until
    assert end is not None
    part, client = KEYS.of("report"), api.store.client
    client.delete(part.pauses)
    client.set(part.pauses, "garbage")  # written by someone else

    check = api.diagnose()[-1]
    api.reindex()

    assert (check.name, check.status) == ("indexes", "warn")
    assert f"{part.pauses} holds a string, not a zset" in check.detail
    assert client.zscore(part.pauses, "report") == to_ms(end)
    assert api.diagnose()[-1].status == "ok"


def test_pause_many_by_owner_glob_and_all_returns_what_changed(schedule: Periodiq) -> None:
    api = schedule

    by_owner = api.pause_many(owner="team", note="db migration", until="2h")
    by_glob = api.pause_many(match="c*", note="disk full")
    everything = api.pause_many(all=True)

    assert (by_owner, by_glob, everything) == (["report-daily"], ["cleanup"], ["sync"])
    weekly, daily = api.get("report-weekly"), api.get("report-daily")
    # the entry paused already keeps its own pause (no end) and note
    assert (weekly.note, weekly.paused_until) == ("broken", None)
    assert (daily.note, daily.paused_until is not None) == ("db migration", True)
    assert api.resume_many(match="report-*") == ["report-daily", "report-weekly"]
    assert api.resume_many(all=True) == ["cleanup", "sync"]
    assert api.resume_many(owner="team") == []
    assert {item.status for item in api.list()} == {"active"}


Call = Callable[[Periodiq], Any]


def _bad(call: Call, error: type[PeriodiqError], words: list[str], label: str) -> Any:
    return pytest.param(call, error, words, id=label)


MALFORMED = [
    _bad(lambda a: a.pause("sync", until=PAST), EntryError, ["in the past"], "until-past"),
    _bad(
        lambda a: a.pause("sync", until="2020-01-01T00:00:00+00:00"),
        EntryError,
        ["in the past"],
        "until-past-iso",
    ),
    _bad(lambda a: a.pause("sync", until="soon"), EntryError, ["until='soon'", "2h"], "until-word"),
    _bad(lambda a: a.pause("sync", until="2026-13-45"), EntryError, ["ISO 8601"], "until-bad-iso"),
    _bad(
        lambda a: a.pause("sync", until=datetime(2090, 1, 1)),
        EntryError,
        ["no time zone"],
        "until-naive",
    ),
    _bad(lambda a: a.pause("sync", until=-5), EntryError, ["must be > 0"], "until-negative"),
    _bad(lambda a: a.pause("sync", until=0), EntryError, ["must be > 0"], "until-zero"),
    _bad(lambda a: a.pause("sync", until=True), EntryError, ["until=True"], "until-bool"),
    _bad(lambda a: a.pause("sync", until=timedelta(0)), EntryError, ["> 0"], "until-no-span"),
    _bad(lambda a: a.pause("missing", until="1h"), EntryNotFoundError, ["'missing'"], "missing"),
    _bad(
        lambda a: a.pause_many(match="nothing-*"),
        EntryNotFoundError,
        ["no entry matches 'nothing-*'"],
        "glob-nothing",
    ),
    _bad(lambda a: a.pause_many(owner="nobody"), EntryNotFoundError, ["owner 'nobody'"], "owner"),
    _bad(
        lambda a: a.pause_many(owner="team", match="r*"),
        EntryError,
        ["give one of", "match= and owner= given"],
        "two-selectors",
    ),
    _bad(lambda a: a.pause_many(), EntryError, ["give one of", "none given"], "no-selector"),
    _bad(
        lambda a: a.pause_many(all=True, until="1970-01-01T00:00:00Z"),
        EntryError,
        ["in the past"],
        "many-until-past",
    ),
    _bad(lambda a: a.pause_many(match=""), EntryError, ["match=''"], "empty-glob"),
    _bad(lambda a: a.resume_many(owner="team", all=True), EntryError, ["give one of"], "resume-2"),
    _bad(lambda a: a.resume_many(match="x*"), EntryNotFoundError, ["'x*'"], "resume-nothing"),
]


@pytest.mark.parametrize(("call", "error", "words"), MALFORMED)
def test_malformed_pauses_get_one_clear_error_and_change_nothing(
    schedule: Periodiq, redis_url: str, call: Call, error: type[PeriodiqError], words: list[str]
) -> None:
    before = snapshot(redis_url)

    with pytest.raises(error) as caught:
        call(schedule)

    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert snapshot(redis_url) == before


def test_the_cli_pauses_and_resumes_by_owner_glob_and_all_and_says_how_many(
    schedule: Periodiq,
) -> None:
    app = schedule.app

    by_owner = cli(app, "pause", "--owner", "team", "--until", "2h", "--note", "db")
    by_glob = cli(app, "pause", "c*")
    one = cli(app, "pause", "sync", "--until", "90")
    listed = cli(app, "list")
    everything = cli(app, "resume", "--all")

    assert by_owner.stdout == "Paused 1 entry until 2h (note: db): report-daily.\n"
    assert by_glob.stdout == "Paused 1 entry: cleanup.\n"
    assert one.stdout.startswith("Paused sync until ")
    assert "(in 1m" in one.stdout
    assert "paused until " in listed.stdout
    assert everything.stdout == ("Resumed 4 entries: cleanup, report-daily, report-weekly, sync.\n")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["pause", "--owner", "team", "--all"], ["give an entry NAME", "one of them"]),
        (["pause"], ["give an entry NAME"]),
        (["pause", "sync", "--until", "yesterday"], ["until='yesterday' is invalid"]),
        (["pause", "sync", "--until", "2020-01-01T00:00"], ["in the past"]),
        (["pause", "sync", "--until", "2020-13-01"], ["not a duration"]),
        (["pause", "sync", "--until", "-5"], ["must be > 0"]),
        (["pause", "zzz*"], ["no entry matches 'zzz*'"]),
        (["resume", "--owner", "nobody"], ["no entries have owner 'nobody'"]),
    ],
)
def test_the_cli_refuses_malformed_pauses_with_one_error_and_changes_nothing(
    schedule: Periodiq, redis_url: str, args: list[str], words: list[str]
) -> None:
    before = snapshot(redis_url)

    result = cli(schedule.app, *args)

    assert result.exit_code != 0
    assert all(word in result.output for word in words), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert snapshot(redis_url) == before


def test_the_dashboard_says_until_when_an_entry_is_paused(schedule: Periodiq) -> None:
    schedule.pause("sync", note="db migration", until="2h")
    web = TestClient(make_app(schedule), follow_redirects=False)

    page = web.get("/entries/sync").text
    listing = web.get("/?state=paused").text
    weekly = web.get("/entries/report-weekly").text

    assert re.search(r"Paused until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+ \(in (1h|2h)", page)
    assert ": db migration</div>" in page
    assert "paused until " in listing
    assert "Paused: broken</div>" in weekly  # paused until resumed: as before


def test_the_dashboards_api_pauses_until_an_end_and_refuses_a_past_one(
    schedule: Periodiq,
) -> None:
    web = TestClient(make_app(schedule, "a-long-token"), follow_redirects=False)
    bearer = {"Authorization": "Bearer a-long-token"}

    done = web.post("/api/actions/pause/sync", headers=bearer, json={"until": "2h"})
    past = web.post(
        "/api/actions/pause/cleanup", headers=bearer, json={"until": "2020-01-01T00:00:00Z"}
    )

    assert done.status_code == 200
    assert schedule.get("sync").paused_until is not None
    assert (past.status_code, "in the past" in past.json()["error"]) == (400, True)
    assert schedule.get("cleanup").status == "active"
