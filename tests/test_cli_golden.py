"""Golden output of ``list`` and ``show``: a fixed schedule seen at a fixed instant.

The world is built with the real code paths at chosen instants: entries are
stored by put.lua with their first tick computed from ``NOW``, runs recorded
by the worker's begin.lua/finish.lua with an injected clock, a pause and a
checkpoint through the API, and one entry written unreadable into Redis.
``--now`` fixes the clock for the relative times, so the text is the same
on every run. Set ``PERIODIQ_UPDATE_GOLDEN=1`` to rewrite the files, then
read the diff as a user would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from celery_periodiq import Periodiq
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.store.checkpoint import Checkpoint
from tests.test_cli import cli, client_for, record_run

GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2090, 1, 1, 9, tzinfo=UTC)  # a Sunday
AT = ["--now", NOW.isoformat()]


def at(clock: str, day: str = "2090-01-01") -> datetime:
    """``at("08:59:30.05")``: an instant of NOW's day (or ``day``), UTC."""
    return datetime.fromisoformat(f"{day}T{clock}+00:00")


def store(api: Periodiq, name: str, task: str, **options: object) -> None:
    """Store an entry as ``add`` does, its first tick computed from NOW."""
    entry = build_entry(name, task, overlap="skip", catchup="last", **options)  # type: ignore[arg-type]
    assert api.store.put("add", [entry], now_ms=to_ms(NOW)) == ["created"]


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    client = client_for(redis_url, broker_url)
    yield client
    client.store.client.close()
    client.app.close()


@pytest.fixture
def world(api: Periodiq, redis_client: redis.Redis) -> Periodiq:
    store(
        api, "billing-nightly", "billing.close_ledger", cron="30 2 * * *", tz="Europe/Berlin",
        owner="billing", args=[2090], kwargs={"ledger": "eu"},
        options={"queue": "reports", "priority": 5},
    )  # fmt: skip
    yesterday, today = at("01:30", day="2089-12-31"), at("01:30")
    record_run(
        api, "billing-nightly", yesterday, yesterday + timedelta(seconds=0.12), outcome="failed",
        seconds=2.5, error="ValueError: ledger 2089-12 is not closed",
    )  # fmt: skip
    record_run(
        api, "billing-nightly", today, today + timedelta(seconds=0.08), outcome="succeeded",
        seconds=1.2,
    )  # fmt: skip
    Checkpoint(api.store, "billing-nightly").save({"ledger": "eu", "page": 12})

    store(api, "sensor-poll", "iot.poll", every=30, owner="iot")
    gap = 27.0  # 30 s minus the 10% tolerance
    # A run that began 28 s late, then the next tick dropped as too soon after it,
    # a duplicate message of the late tick, and the current run, still unfinished.
    late = record_run(
        api, "sensor-poll", at("08:58:30"), at("08:58:58"), outcome="succeeded", seconds=0.3
    )
    dropped = record_run(
        api, "sensor-poll", at("08:59:00"), at("08:59:00.04"), outcome=None, min_gap=gap
    )
    duplicate = record_run(api, "sensor-poll", at("08:58:30"), at("08:59:05"), outcome=None)
    current = record_run(
        api, "sensor-poll", at("08:59:30"), at("08:59:30.05"), outcome=None, min_gap=gap
    )
    assert (late, dropped, duplicate, current) == (
        "started", "dropped_too_soon", "duplicate", "started"
    )  # fmt: skip

    store(api, "weekly-report", "reports.weekly", calendar="Mon 09:00", tz="America/New_York")
    api.pause("weekly-report", note="waiting for the Q4 numbers")
    store(api, "cleanup", "maintenance.cleanup", cron="@daily", enabled=False)
    store(api, "warm-cache", "cache.warm", cron="@reboot")
    store(
        api, "promo-2089", "shop.promo", every=3600, start_at=datetime(2089, 12, 1, tzinfo=UTC),
        end_at=datetime(2089, 12, 31, tzinfo=UTC),
    )  # fmt: skip
    legacy = {"name": "legacy-import", "task": "legacy.run", "schedule": "0 61 * * *"}
    redis_client.hset(
        Keys("periodiq:cli-test", 16).of("legacy-import").entries,
        "legacy-import",
        json.dumps(legacy),
    )
    return api


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERIODIQ_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; PERIODIQ_UPDATE_GOLDEN=1 rewrites it"


def test_list_output_matches_the_golden_file(world: Periodiq) -> None:
    result = cli(world.app, "list", *AT)

    assert result.exit_code == 0
    assert_golden("list.txt", result.stdout)
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.parametrize(
    "name", ["billing-nightly", "sensor-poll", "weekly-report", "legacy-import"]
)
def test_show_output_matches_the_golden_file(world: Periodiq, name: str) -> None:
    result = cli(world.app, "show", name, *AT)

    assert result.exit_code == 0
    assert_golden(f"show-{name}.txt", result.stdout)
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
