"""Acting on many entries through the API, on a private Redis and broker: ``names=`` as a
selector of pause_many/resume_many/delete_many/trigger_many, checked as the others are
(one clear error, nothing changed), what each reports as skipped and why, and the
pipelining that keeps thousands of entries to a few round trips.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import (
    BrokerUnavailableError,
    DeclaredEntryError,
    EntryError,
    EntryNotFoundError,
    Periodiq,
    periodiq,
)
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.build import build_entry
from celery_periodiq.protocol.keys import Keys
from tests.test_api import snapshot

TASK = "proj.tasks.report"
KEYS = Keys("periodiq:t", 16)


@pytest.fixture
def api(broker_url: str, redis_url: str) -> Iterator[Periodiq]:
    app = Celery("t", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    client = periodiq(app)
    for name in ("a", "b", "c"):
        client.add(name, TASK, every=60, owner="team")
    client.pause("a", note="broken")
    yield client
    client.store.client.close()
    app.close()


@pytest.fixture
def broker(broker_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(broker_url)
    yield client
    client.close()


def messages(broker: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in broker.lrange("celery", 0, -1)]


def test_names_select_for_pause_and_resume_and_say_what_was_skipped(api: Periodiq) -> None:
    paused = api.pause_many(names=["a", "b", "b"], note="db", until="1h")
    resumed = api.resume_many(names=["c", "a"])

    assert (list(paused), paused.skipped) == (["b"], {"a": "paused already"})
    assert api.get("b").note == "db"
    assert (list(resumed), resumed.skipped) == (["a"], {"c": "not paused"})
    assert api.get("a").status == "active"


def test_delete_many_deletes_the_names_in_one_call_per_partition(api: Periodiq) -> None:
    deleted = api.delete_many(names=["a", "c"])

    assert (list(deleted), deleted.skipped) == (["a", "c"], {})
    assert [item.name for item in api.list()] == ["b"]


def test_trigger_many_sends_one_run_each_and_skips_a_quarantined_entry(
    api: Periodiq, broker: redis.Redis, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    ran = api.trigger_many(names=["b", "broken", "c"])

    sent = messages(broker)
    assert list(ran) == ["b", "c"]
    assert ran.skipped == {"broken": "quarantined"}
    assert sorted(message["headers"]["id"] for message in sent) == sorted(ran.task_ids.values())
    assert [event.kind for event in api.history("c", limit=1)] == ["triggered"]
    assert api.get("c").counters.get("enqueued") == 1


def test_a_declared_entry_is_deleted_in_bulk_only_with_force(api: Periodiq) -> None:
    api.store.put("add", [build_entry("declared", TASK, source="config", every=60)])

    with pytest.raises(DeclaredEntryError, match="'declared' is declared in code or beat_sch"):
        api.delete_many(names=["b", "declared"])
    kept = sorted(item.name for item in api.list())
    forced = api.delete_many(names=["b", "declared"], force=True)

    assert kept == ["a", "b", "c", "declared"]
    assert list(forced) == ["b", "declared"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda api: api.pause_many(names=[]), EntryError, "names= is empty"),
        (lambda api: api.pause_many(names="abc"), EntryError, "names='abc' is invalid"),
        (lambda api: api.resume_many(names=["a", ""]), EntryError, "entry name '' is invalid"),
        (lambda api: api.delete_many(names=["a", 3]), EntryError, "entry name 3 is invalid"),
        (lambda api: api.trigger_many(names=["a"], owner="team"), EntryError,
         r"give one of names=, match=, owner=, all=True \(names= and owner= given\)"),
        (lambda api: api.delete_many(), EntryError, "(none given)"),
        (lambda api: api.pause_many(names=["a", "zz"]), EntryNotFoundError,
         "no entry named 'zz'; nothing was changed"),
        (lambda api: api.delete_many(names=["y", "a", "z"]), EntryNotFoundError,
         r"no entries named 'y', 'z' \(2 of the 3 names given\); nothing was changed"),
        (lambda api: api.pause_many(names=["b"], until="-2h"), EntryError, "until='-2h'"),
        (lambda api: api.pause_many(names=["b"], note="x" * 1001), EntryError,
         "at most 1,000 characters"),
    ],
)  # fmt: skip
def test_a_bad_selection_gets_one_clear_error_and_changes_nothing(
    api: Periodiq, redis_url: str, broker: redis.Redis, call: Any, error: Any, message: str
) -> None:
    before = snapshot(redis_url)

    with pytest.raises(error, match=message):
        call(api)

    assert snapshot(redis_url) == before
    assert messages(broker) == []


def test_thousands_of_entries_take_a_few_round_trips(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    names = [f"many-{number:05d}" for number in range(5_000)]
    api.add_many({"name": name, "task": TASK, "every": 3600} for name in names)

    def calls() -> int:
        """Script calls so far (the commands a script runs are counted apart)."""
        stats = redis_client.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
                   for command in ("evalsha", "eval"))  # fmt: skip

    timed: dict[str, tuple[float, int]] = {}
    for verb, act in (
        ("pause", lambda: api.pause_many(names=names, note="bulk")),
        ("resume", lambda: api.resume_many(names=names)),
        ("trigger", lambda: api.trigger_many(names=names)),
        ("delete", lambda: api.delete_many(names=names)),
    ):
        before, started = calls(), time.perf_counter()
        done = act()
        timed[verb] = (time.perf_counter() - started, calls() - before)
        assert len(done) == 5_000, verb
    print(
        {verb: f"{seconds * 1000:.0f} ms, {n} script calls" for verb, (seconds, n) in timed.items()}
    )

    assert api.count() == 3
    # Redis counts each command in a pipeline; what is pipelined is the round trips:
    # pausing costs one script call per entry, deleting one per partition per batch
    assert timed["delete"][1] < 200
    assert timed["pause"][0] < 10
    assert timed["trigger"][0] < 30


def test_trigger_many_with_the_broker_down_says_so_and_records_nothing(
    redis_url: str, tmp_path: Path
) -> None:
    with LocalRedis(tmp_path / "broker") as down:
        app = Celery("t", broker=down.url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_url
        api = periodiq(app)
        api.add("b", TASK, every=60)
        down.stop()
        try:
            with pytest.raises(BrokerUnavailableError, match="0 of the 1 runs were sent"):
                api.trigger_many(names=["b"])
            history = api.history("b")
        finally:
            api.store.client.close()
            app.close()

    assert history == []
