"""Prometheus metrics: what one scrape of a real schedule in Redis shows.

The exposition text is parsed back with prometheus_client's own parser; runs go
through PeriodicTask eagerly (begin.lua records the start delay) and ticks through
the beat's Dispatcher (ack.lua records the lateness).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.errors import PeriodiqError
from celery_periodiq.model.plan import to_ms
from celery_periodiq.ops.metrics import BUCKETS, OTHER, PeriodiqCollector
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.store.scripts import script_source
from tests.test_cli import cli

START = datetime(2026, 1, 1, tzinfo=UTC)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("measured", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    yield api
    api.store.client.close()


def scrape(api: Periodiq, max_entries: int = 500) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PeriodiqCollector(api, max_entries))
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def stored_at_start(api: Periodiq, name: str, **options: object) -> None:
    entry = api.add(name, "proj.work", every=60, start_at=START, **options).entry  # type: ignore[arg-type]
    assert entry is not None
    api.store.put("update", [entry], now_ms=to_ms(START))


def test_a_scrape_shows_beats_entries_runs_skips_and_both_histograms(api: Periodiq) -> None:
    app = api.app
    outcomes = ["ok", "fail", "ok"]

    @app.task(base=PeriodicTask, name="proj.work", shared=False)
    def work() -> None:
        if outcomes.pop(0) == "fail":
            raise ValueError("boom")

    stored_at_start(api, "report")
    stored_at_start(api, "idle")
    api.pause("idle", note="holiday")
    api.store.scripts.heartbeat("beat-1", "start", 10_000, {"host": "h"})
    dispatcher = Dispatcher(app, api.store, "beat-1")
    dispatcher.dispatch(now_ms=to_ms(START + timedelta(minutes=1)))  # one tick published
    for minute in (1, 2, 3):
        tick = to_ms(START + timedelta(minutes=minute))
        work.apply(headers={HEADER_ENTRY: "report", HEADER_TICK: tick})
    work.apply(headers={HEADER_ENTRY: "report", HEADER_TICK: to_ms(START + timedelta(minutes=3))})

    samples = scrape(api)

    assert value(samples, "periodiq_up") == 1
    assert value(samples, "periodiq_beats_live") == 1
    assert value(samples, "periodiq_entries", state="active") == 1
    assert value(samples, "periodiq_entries", state="paused") == 1
    assert value(samples, "periodiq_runs_total", entry="report", outcome="succeeded") == 2
    assert value(samples, "periodiq_runs_total", entry="report", outcome="failed") == 1
    assert value(samples, "periodiq_skips_total", entry="report", reason="duplicate") == 1
    assert value(samples, "periodiq_entry_failing", entry="report") == 0
    last = value(samples, "periodiq_entry_last_success_timestamp_seconds", entry="report")
    assert abs(last - datetime.now(UTC).timestamp()) < 60
    # one tick published (on the injected clock: on time); three runs started, on the
    # Redis clock, months after their ticks
    assert value(samples, "periodiq_tick_lateness_seconds_count") == 1
    assert value(samples, "periodiq_tick_lateness_seconds_bucket", le="+Inf") == 1
    assert value(samples, "periodiq_start_delay_seconds_bucket", le="300.0") == 0
    assert value(samples, "periodiq_start_delay_seconds_count") == 3
    assert value(samples, "periodiq_start_delay_seconds_sum") > 3 * 86400


def test_per_entry_series_are_bounded_urgent_ones_first(api: Periodiq) -> None:
    for name in ("a", "b", "c", "d"):
        api.add(name, "proj.work", every=60)
    state = api.store.keys.of("d").state
    raw = api.store.client.hget(state, "d")
    api.store.client.hset(state, "d", raw[:-1] + ',"failing":1,"n":{"failed":4}}')
    for name in ("b", "c"):
        part = api.store.keys.of(name)
        raw = api.store.client.hget(part.state, name)
        api.store.client.hset(part.state, name, raw[:-1] + ',"n":{"succeeded":5}}')
    api.reindex()  # states written outside the scripts: counted once indexed afresh

    samples = scrape(api, max_entries=2)

    labelled = {labels[0][1] for name, labels in samples if name == "periodiq_runs_total"}
    assert labelled == {"d", "a", OTHER}  # the failing one first, then by name
    assert value(samples, "periodiq_runs_total", entry=OTHER, outcome="succeeded") == 10
    assert value(samples, "periodiq_entries_failing") == 1
    assert ("periodiq_entry_failing", (("entry", "b"),)) not in samples


def test_with_redis_down_a_scrape_says_so_and_nothing_else(broker_url: str) -> None:
    app = Celery("unreachable", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = "redis://127.0.0.1:1/0"

    samples = scrape(periodiq(app))

    assert samples == {("periodiq_up", ()): 0.0}


def test_garbage_in_a_stats_hash_counts_as_nothing(api: Periodiq) -> None:
    part = api.store.keys.all()[0]
    api.store.client.hset(part.stats, mapping={"l1": "3", "l2": "many", "lsum": "30"})

    samples = scrape(api)

    assert value(samples, "periodiq_tick_lateness_seconds_count") == 3
    assert value(samples, "periodiq_tick_lateness_seconds_sum") == 0.03


def test_the_buckets_are_the_scripts_buckets() -> None:
    in_lua = script_source("ack").split("local BUCKETS = {", 1)[1].split("}", 1)[0]

    assert [int(bound) for bound in in_lua.split(",")] == [int(b * 1000) for b in BUCKETS]


@pytest.mark.parametrize("bad", [-1, True, "5"])
def test_a_bad_max_entries_is_refused(api: Periodiq, bad: object) -> None:
    with pytest.raises(PeriodiqError, match="max_entries"):
        PeriodiqCollector(api, bad)  # type: ignore[arg-type]


def test_the_cli_prints_the_metrics_once_and_refuses_a_bad_limit(api: Periodiq) -> None:
    api.add("report", "proj.work", every=60)

    once = cli(api.app, "metrics", "--once")
    bad = cli(api.app, "metrics", "--max-entries", "-1")

    assert once.exit_code == 0, once.output
    assert "periodiq_up 1.0" in once.stdout
    assert 'periodiq_entries{state="active"} 1.0' in once.stdout
    assert bad.exit_code == 2
    assert "--max-entries" in bad.output


def test_a_glance_gives_every_entry_the_status_a_full_read_gives(api: Periodiq) -> None:
    stored_at_start(api, "active")
    stored_at_start(api, "paused")
    api.pause("paused")
    api.add("disabled", "proj.work", every=60, enabled=False)
    api.add("ended", "proj.work", every=60, start_at=START, end_at=START + timedelta(minutes=1))
    api.add("at-start", "proj.work", cron="@reboot")
    api.add("garbled", "proj.work", every=60)
    api.store.client.hset(api.store.keys.of("garbled").entries, "garbled", "{not json")
    api.add("running", "proj.work", every=60)
    state = api.store.keys.of("running").state
    raw = api.store.client.hget(state, "running")
    api.store.client.hset(state, "running", raw[:-1] + ',"running":["t1",99999999999999]}')

    full = {item.name: item.status for item in api.store.load()}
    glanced = {item.name: item.status for page in api.store.glance(batch=3) for item in page}

    assert glanced == full
    assert set(full.values()) == {
        "active", "paused", "disabled", "ended", "quarantined", "running"
    }  # fmt: skip
