"""Backfill: an entry's past ticks run now with their nominal instants, guarded like
scheduled runs (a tick that already began is skipped and says so), one after another
(buffer_all) or all at once (allow)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import EntryError, EntryNotFoundError, MessageError
from celery_periodiq.model.plan import task_id_for, to_ms
from celery_periodiq.ops.backfill import BACKFILL_MOST, backfill_task_id, backfill_ticks
from celery_periodiq.protocol.headers import (
    HEADER_BACKFILL,
    HEADER_ENTRY,
    HEADER_OVERLAP,
    HEADER_TICK,
)
from celery_periodiq.protocol.records import RunStart
from celery_periodiq.store.run_scripts import BACKFILL_MEMORY_MS
from tests.processes import Cluster, cluster, wait_for

HOUR = timedelta(hours=1)


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("backfilling", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    yield api
    api.store.client.close()


def hourly(api: Periodiq, name: str = "report") -> datetime:
    """An hourly entry; returns the top of the current hour on the Redis clock."""
    api.add(name, "proj.report", cron="0 * * * *")
    return api.now().replace(minute=0, second=0, microsecond=0)


def begin(api: Periodiq, name: str, tick: datetime, *, backfill: bool, now: datetime,
          task_id: str | None = None, min_gap: float = 0.0) -> str:  # fmt: skip
    """What the worker's guard says to a run of ``tick`` at ``now``."""
    prefix = api.store.keys.prefix
    default = (backfill_task_id if backfill else task_id_for)(prefix, name, to_ms(tick))
    start = RunStart(
        task_id=task_id or default, tick_ms=to_ms(tick), min_gap_ms=int(min_gap * 1000),
        overlap="allow", ttl_ms=60_000, retries=0, host="h", history_length=100,
        backfill=backfill,
    )  # fmt: skip
    return api.store.scripts.begin(name, start, now_ms=to_ms(now)).outcome


def queued(broker_url: str) -> list[dict[str, Any]]:
    """The messages waiting in the broker's default queue, oldest first."""
    client = redis.Redis.from_url(broker_url, decode_responses=True)
    try:
        return [json.loads(raw) for raw in reversed(client.lrange("celery", 0, -1))]
    finally:
        client.close()


# the worker's guard


def test_a_backfill_run_of_a_tick_older_than_the_guard_remembers_starts(api: Periodiq) -> None:
    top = hourly(api)
    for hours in range(20, 0, -1):  # 20 hourly ticks began, each at its instant
        tick = top - hours * HOUR
        assert begin(api, "report", tick, backfill=False, now=tick) == "started"
    old = top - 30 * HOUR

    assert begin(api, "report", old, backfill=False, now=top) == "duplicate"  # a late copy
    assert begin(api, "report", old, backfill=True, now=top) == "started"


def test_a_backfill_run_has_no_tolerance_drop(api: Periodiq) -> None:
    top = hourly(api)
    began = top - HOUR
    assert begin(api, "report", began, backfill=False, now=began) == "started"
    later = top - 5 * HOUR

    assert begin(api, "report", later, backfill=False, now=began + timedelta(minutes=1),
                 min_gap=3000) == "dropped_too_soon"  # fmt: skip
    assert begin(api, "report", later, backfill=True, now=began + timedelta(minutes=1),
                 min_gap=3000) == "started"  # fmt: skip


def test_a_backfilled_tick_that_began_never_runs_again_whatever_carries_it(
    api: Periodiq,
) -> None:
    top = hourly(api)
    for hours in range(20, 0, -1):
        begin(api, "report", top - hours * HOUR, backfill=False, now=top - hours * HOUR)
    old = top - 40 * HOUR
    assert begin(api, "report", old, backfill=True, now=top) == "started"

    assert begin(api, "report", old, backfill=True, now=top) == "duplicate"  # redelivered
    assert begin(api, "report", old, backfill=True, now=top, task_id="other") == "duplicate"
    assert begin(api, "report", old, backfill=False, now=top) == "duplicate"  # scheduled copy
    assert api.store.run_memory("report").began >= {to_ms(old)}


def test_the_backfilled_ticks_are_kept_a_month_and_deleted_with_the_entry(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    top = hourly(api)
    begin(api, "report", top - 40 * HOUR, backfill=True, now=top)
    key = api.store.keys.of("report").backfilled("report")
    assert BACKFILL_MEMORY_MS - 60_000 < redis_client.pttl(key) <= BACKFILL_MEMORY_MS

    api.delete("report")

    assert not redis_client.exists(key)


def test_a_backfilled_set_of_another_type_is_dropped_and_the_run_starts(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    top = hourly(api)
    key = api.store.keys.of("report").backfilled("report")
    redis_client.set(key, "garbage")

    assert begin(api, "report", top - 3 * HOUR, backfill=True, now=top) == "started"
    assert redis_client.type(key) == "set"
    assert api.get("report").invalid is None


# which ticks a range holds


def test_the_range_is_half_open_and_follows_the_schedule(api: Periodiq) -> None:
    entry = api.add("nightly", "proj.report", cron="30 2 * * *", tz="Europe/Berlin").entry
    assert entry is not None
    start = datetime(2026, 3, 27, 2, 30, tzinfo=entry.parsed_schedule().zone)

    ticks = backfill_ticks(entry, start, start + timedelta(days=3), prefix="p", default_grace=10)

    # 2026-03-29 02:30 does not exist in Berlin: that night's tick is 03:00
    assert [tick.nominal for tick in ticks] == [
        datetime(2026, 3, 27, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
    ]
    assert len({tick.task_id for tick in ticks}) == 3
    assert ticks[0].task_id != task_id_for("p", "nightly", to_ms(ticks[0].nominal))
    assert ticks[0].soft_time_limit == 12 * 3600  # half the interval, as scheduled


def test_a_range_of_more_ticks_than_the_limit_is_refused(api: Periodiq) -> None:
    entry = api.add("fast", "proj.poll", every=1).entry
    assert entry is not None
    start = datetime(2026, 1, 1, tzinfo=UTC)

    with pytest.raises(EntryError, match=f"more than {BACKFILL_MOST} ticks"):
        backfill_ticks(entry, start, start + timedelta(hours=3), prefix="p", default_grace=10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"overlap": "skip"}, "overlap='skip' is invalid (allowed: buffer_all, allow)"),
        ({"timeout": 0}, "timeout=0 is invalid"),
        ({"timeout": True}, "timeout=True is invalid"),
        ({"start": datetime(2026, 1, 1)}, "start=datetime.datetime(2026, 1, 1, 0, 0) is invalid"),
        ({"end": "yesterday"}, "end='yesterday' is invalid"),
        ({"start": "swap"}, "is empty (allowed: start before end)"),
        ({"end": "future"}, "backfill runs past ticks; the beats run the coming ones"),
    ],
)
def test_bad_options_are_refused_and_nothing_is_published(
    api: Periodiq, broker_url: str, options: dict[str, Any], message: str
) -> None:
    top = hourly(api)
    given: dict[str, Any] = {"start": top - 5 * HOUR, "end": top, **options}
    if options.get("start") == "swap":
        given["start"], given["end"] = top, top - 5 * HOUR
    if options.get("end") == "future":
        given["end"] = top + 2 * HOUR
    start, end = given.pop("start"), given.pop("end")

    with pytest.raises(EntryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.backfill("report", start, end, **given)

    assert queued(broker_url) == []


def test_an_unknown_entry_is_refused(api: Periodiq) -> None:
    now = api.now()
    with pytest.raises(EntryNotFoundError):
        api.backfill("nothing", now - HOUR, now)


# publishing


def test_a_dry_run_says_what_would_run_and_what_already_ran(api: Periodiq, broker_url: str) -> None:
    top = hourly(api)
    ran = top - 3 * HOUR
    begin(api, "report", ran, backfill=False, now=ran)

    report = api.backfill("report", top - 4 * HOUR, top, dry_run=True)

    assert [(tick.nominal, tick.outcome) for tick in report.ticks] == [
        (top - 4 * HOUR, "would run"),
        (top - 3 * HOUR, "already ran"),
        (top - 2 * HOUR, "would run"),
        (top - 1 * HOUR, "would run"),
    ]
    assert queued(broker_url) == []


def test_allow_publishes_every_tick_not_yet_run_at_once_as_backfill_runs(
    api: Periodiq, broker_url: str
) -> None:
    top = hourly(api)
    begin(api, "report", top - 2 * HOUR, backfill=False, now=top - 2 * HOUR)

    report = api.backfill("report", top - 3 * HOUR, top, overlap="allow")

    assert [tick.outcome for tick in report.ticks] == ["published", "already ran", "published"]
    messages = queued(broker_url)
    headers = [message["headers"] for message in messages]
    assert [h[HEADER_TICK] for h in headers] == [to_ms(top - 3 * HOUR), to_ms(top - HOUR)]
    assert all(h[HEADER_BACKFILL] is True and h[HEADER_OVERLAP] == "allow" for h in headers)
    assert all(h[HEADER_ENTRY] == "report" and h["task"] == "proj.report" for h in headers)
    assert [h["id"] for h in headers] == [report.ticks[0].task_id, report.ticks[2].task_id]
    assert all("expires" not in h or h["expires"] is None for h in headers)


@pytest.mark.parametrize("overlap", ["allow", "buffer_all"])
def test_a_message_that_cannot_be_encoded_is_the_entrys_error_not_the_brokers(
    api: Periodiq, broker_url: str, overlap: str
) -> None:
    top = hourly(api)
    part = api.store.keys.of("report")  # a serializer written behind periodiq's back
    definition = json.loads(api.store.client.hget(part.entries, "report"))
    definition["options"] = {"serializer": "nosuch"}
    api.store.client.hset(part.entries, "report", json.dumps(definition))

    with pytest.raises(MessageError) as raised:
        api.backfill("report", top - 2 * HOUR, top, overlap=overlap, timeout=1)

    said = str(raised.value)
    assert said.startswith("entry 'report': its message could not be published")
    assert "No encoder installed for nosuch" in said
    assert "broker" not in said
    assert queued(broker_url) == []


# with a real worker


@pytest.fixture
def guarded(tmp_path: Path, redis_url: str, broker_url: str) -> Iterator[Cluster]:
    with cluster(tmp_path, redis_url, broker_url, app="guarded_app") as running:
        yield running


@pytest.mark.slow
def test_buffer_all_runs_the_ticks_one_after_another_and_a_second_backfill_runs_none(
    guarded: Cluster,
) -> None:
    api = guarded.api()
    api.add("slow", "slow", every=600, args=[0.4])
    api.pause("slow", note="only backfills run it")  # no beat runs, backfill still does
    worker = guarded.worker()
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    now = api.now()
    start = now - timedelta(minutes=50)
    entry = api.get("slow").entry
    assert entry is not None
    ticks = backfill_ticks(entry, start, now, prefix=api.store.keys.prefix, default_grace=10)
    expected = [to_ms(tick.nominal) for tick in ticks]
    settled: list[str] = []

    report = api.backfill("slow", start, now, progress=lambda tick: settled.append(tick.outcome))

    assert len(expected) == 5
    assert [tick.outcome for tick in report.ticks] == ["succeeded"] * 5 == settled
    starts = [run for run in guarded.runs_of("slow") if run["kind"] == "start"]
    ends = [run for run in guarded.runs_of("slow") if run["kind"] == "end"]
    assert [run["tick"] for run in starts] == expected  # each with its own nominal instant
    spans = sorted((s["at"], next(e["at"] for e in ends if e["task_id"] == s["task_id"]))
                   for s in starts)  # fmt: skip
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))

    again = api.backfill("slow", start, now)

    assert [tick.outcome for tick in again.ticks] == ["already ran"] * 5
    assert len([run for run in guarded.runs_of("slow") if run["kind"] == "start"]) == 5


@pytest.mark.slow
def test_the_cli_backfills_and_stops_with_exit_1_when_no_worker_begins_a_run(
    guarded: Cluster,
) -> None:
    api = guarded.api()
    api.add("slow", "slow", every=600, args=[0.1], options={"queue": "nobody"})
    now = api.now().replace(microsecond=0)
    start = (now - timedelta(minutes=30)).isoformat()

    dry = guarded.cli("backfill", "slow", "--from", start, "--to", now.isoformat(), "--dry-run",
                      "--json")  # fmt: skip
    stalled = guarded.cli("backfill", "slow", "--from", start, "--to", now.isoformat(),
                          "--timeout", "1")  # fmt: skip

    assert dry.returncode == 0, dry.stderr
    shape = json.loads(dry.stdout)
    assert (shape["entry"], shape["dry_run"], shape["stalled"]) == ("slow", True, None)
    assert {tick["outcome"] for tick in shape["ticks"]} == {"would run"}
    assert len(shape["ticks"]) == 3
    assert stalled.returncode == 1
    assert "no worker began the run of tick" in stalled.stderr
    assert "is a worker consuming queue 'nobody'?" in stalled.stderr
    assert "1 waiting, 2 not sent" in stalled.stdout
