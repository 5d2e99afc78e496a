"""The runtime API methods the command line needs: now, upcoming(after=), has_checkpoint,
failures and diagnose, against a private Redis and a private broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from celery_periodiq import EntryNotFoundError, Periodiq, PeriodiqError, ScheduleError
from celery_periodiq.api import Check
from tests.test_cli import START, client_for, free_port, record_run, register_beat


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    client = client_for(redis_url, broker_url)
    yield client
    client.store.client.close()
    client.app.close()


def test_now_is_the_redis_clock(api: Periodiq, redis_client: redis.Redis) -> None:
    seconds, micros = redis_client.time()
    before = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)

    now = api.now()

    assert before - timedelta(milliseconds=1) <= now <= before + timedelta(seconds=5)


def test_upcoming_counts_from_the_instant_given(api: Periodiq) -> None:
    api.add("report", "proj.report", cron="0 * * * *")

    fires = api.upcoming("report", 2, after=START)

    assert fires == [START + timedelta(hours=1), START + timedelta(hours=2)]


def test_upcoming_refuses_a_naive_instant(api: Periodiq) -> None:
    api.add("report", "proj.report", cron="0 * * * *")

    with pytest.raises(ScheduleError, match="no time zone"):
        api.upcoming("report", 2, after=datetime(2090, 1, 1))


def test_has_checkpoint_tells_whether_a_run_saved_one(api: Periodiq) -> None:
    api.add("report", "proj.report", every=60, start_at=START)
    before = api.has_checkpoint("report")
    api.store.client.set(api.store.keys.of("report").checkpoint("report"), json.dumps({"page": 3}))

    assert (before, api.has_checkpoint("report")) == (False, True)
    with pytest.raises(EntryNotFoundError):
        api.has_checkpoint("nope")


def test_failures_are_failed_and_timeboxed_runs_across_entries_newest_first(
    api: Periodiq,
) -> None:
    for name in ("a", "b"):
        api.add(name, "proj.report", every=60, start_at=START)
    ticks = [START - timedelta(hours=1, minutes=-minute) for minute in range(4)]
    record_run(api, "a", ticks[0], ticks[0], outcome="failed", error="KeyError: 'x'")
    record_run(api, "b", ticks[1], ticks[1], outcome="succeeded")
    record_run(api, "b", ticks[2], ticks[2], outcome="timeboxed")
    record_run(api, "a", ticks[3], ticks[3], outcome="failed", error="OSError: y")

    found = api.failures(limit=10)
    newest = api.failures(limit=1)

    assert [(name, event.kind) for name, event in found] == [
        ("a", "failed"), ("b", "timeboxed"), ("a", "failed")
    ]  # fmt: skip
    assert found[0][1].fields["error"] == "OSError: y"
    assert [name for name, _ in newest] == ["a"]
    with pytest.raises(PeriodiqError, match="limit=0"):
        api.failures(limit=0)


def test_diagnose_checks_everything_in_order(api: Periodiq) -> None:
    register_beat(api)

    checks = api.diagnose()

    assert [(check.name, check.status) for check in checks] == [
        ("redis", "ok"), ("scripts", "ok"), ("beats", "ok"), ("clock", "ok"), ("broker", "ok"),
        ("entries", "ok"), ("due", "ok"), ("alerts", "ok"), ("tasks", "ok"), ("runs", "ok"),
        ("indexes", "ok"),
    ]  # fmt: skip
    assert checks[1] == Check("scripts", "ok", "14 Lua scripts load")
    assert checks[2].detail == "1 live beat (beat-host:4242)"


def test_diagnose_never_raises_when_redis_is_down(broker_url: str) -> None:
    client = client_for(f"redis://127.0.0.1:{free_port()}/0", broker_url)

    checks = client.diagnose()

    client.store.client.close()
    client.app.close()

    assert [(check.name, check.status) for check in checks] == [
        ("redis", "fail"), ("scripts", "skip"), ("beats", "skip"), ("clock", "skip"),
        ("broker", "ok"), ("entries", "skip"), ("due", "skip"), ("alerts", "skip"),
        ("tasks", "skip"), ("runs", "skip"), ("indexes", "skip"),
    ]  # fmt: skip


def test_the_store_loads_every_lua_script_and_reads_the_server_version(api: Periodiq) -> None:
    names = api.store.load_scripts()

    assert sorted(names) == [
        "ack", "alerts", "beat", "begin", "claim", "declare", "finish", "index", "pause", "put",
        "record", "release", "remove", "window",
    ]  # fmt: skip # one script a line would double the test
    assert api.store.server_version().split(".")[0].isdigit()
