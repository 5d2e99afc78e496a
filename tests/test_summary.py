"""The read side's summaries and indexes, kept by the scripts, equal a full read.

A scrape is built from what the scripts keep per partition (store/summary.py); these
tests build the same scrape the old way, by reading every entry (the reference
below), after random sequences of adds, updates, pauses, runs, failures, ticks,
triggers, deletes and damage on a real Redis, and compare the two: every series,
every value.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.index_watch import IndexWatch
from celery_periodiq.errors import PeriodiqError
from celery_periodiq.model.plan import to_ms
from celery_periodiq.ops.metrics import OTHER, RUN_OUTCOMES, SKIP_REASONS, PeriodiqCollector
from celery_periodiq.protocol.records import RunEnd, RunStart
from celery_periodiq.store.entry_scripts import INDEX_VERSION
from celery_periodiq.store.scripts import script_source
from celery_periodiq.store.summary import ensure_indexed, summary
from celery_periodiq.store.views import StoredEntry
from tests.test_cli import cli

NAMES = [f"job-{n:02d}" for n in range(14)]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("summed", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_partitions = 4
    api = periodiq(app)
    yield api
    api.store.client.close()


class FullRead(Collector):
    """The scrape as it was built before the summaries: from every entry's state."""

    def __init__(self, api: Periodiq, max_entries: int) -> None:
        self.api, self.max_entries = api, max_entries

    def collect(self) -> Iterator[Metric]:
        entries = [item for page in self.api.store.glance() for item in page]
        states = GaugeMetricFamily("periodiq_entries", "", labels=["state"])
        for state, count in sorted(Counter(item.status for item in entries).items()):
            states.add_metric([state], count)
        yield states
        yield _gauge("periodiq_entries_overdue", sum(1 for i in entries if i.overdue_since))
        yield _gauge("periodiq_entries_failing", sum(1 for i in entries if i.failing_since))
        yield from self._per_entry(entries)

    def _per_entry(self, entries: list[StoredEntry]) -> Iterable[Metric]:
        def urgent(item: StoredEntry) -> tuple[bool, str]:
            return (not (item.overdue_since or item.failing_since or item.invalid), item.name)

        chosen = sorted(entries, key=urgent)[: self.max_entries]
        named = {item.name for item in chosen}
        rest = [item for item in entries if item.name not in named]
        runs = CounterMetricFamily("periodiq_runs", "", labels=["entry", "outcome"])
        skips = CounterMetricFamily("periodiq_skips", "", labels=["entry", "reason"])
        overdue = GaugeMetricFamily("periodiq_entry_overdue", "", labels=["entry"])
        failing = GaugeMetricFamily("periodiq_entry_failing", "", labels=["entry"])
        groups = [(item.name, [item]) for item in chosen]
        if rest:
            groups.append((OTHER, rest))
        for label, items in groups:
            counters: Counter[str] = Counter()
            for item in items:
                counters.update(item.counters)
            for outcome in RUN_OUTCOMES:
                runs.add_metric([label, outcome], counters.get(outcome, 0))
            for reason in SKIP_REASONS:
                skips.add_metric([label, reason], counters.get(reason, 0))
        for item in chosen:
            overdue.add_metric([item.name], 1 if item.overdue_since else 0)
            failing.add_metric([item.name], 1 if item.failing_since else 0)
        yield from (runs, skips, overdue, failing)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, "")
    gauge.add_metric([], value)
    return gauge


COMPARED = (
    "periodiq_entries",
    "periodiq_entries_overdue",
    "periodiq_entries_failing",
    "periodiq_runs_total",
    "periodiq_skips_total",
    "periodiq_entry_overdue",
    "periodiq_entry_failing",
)


def samples(collector: Collector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in COMPARED
    }


def assert_scrapes_agree(api: Periodiq, max_entries: int, why: str) -> None:
    kept = samples(PeriodiqCollector(api, max_entries))
    full = samples(FullRead(api, max_entries))
    assert kept == full, f"after {why}: {_difference(kept, full)}"


def _difference(kept: Samples, full: Samples) -> dict[str, Any]:
    keys = set(kept) | set(full)
    return {
        str(key): (kept.get(key), full.get(key)) for key in keys if kept.get(key) != full.get(key)
    }


class Sequence:
    """Random operations on a schedule, as users, workers and beats do them."""

    def __init__(self, api: Periodiq, rng: random.Random) -> None:
        self.api, self.rng = api, rng
        self.minute = 0
        self.base = datetime.now(UTC)
        self.dirty = False
        """True after damage a full read sees at once but the scripts only when they
        meet it; a rebuild of the indexes (doctor's repair) makes it clean again."""
        api.store.scripts.heartbeat("beat-1", "start", 3_600_000, {"host": "h"})
        self.dispatcher = Dispatcher(api.app, api.store, "beat-1")

    def step(self) -> str:
        op = self.rng.choice(
            ["add"] * 4
            + ["update", "pause", "resume", "delete", "trigger", "damage"]
            + ["run"] * 4
            + ["tick"] * 3
            + ["rebuild"]
        )
        name = self.rng.choice(NAMES)
        # an operation the schedule refuses (no such entry, ...) changes nothing
        with contextlib.suppress(PeriodiqError):
            getattr(self, op)(name)
        return f"{op} {name}"

    def add(self, name: str) -> None:
        rng = self.rng
        options: dict[str, Any] = {"every": 60, "owner": rng.choice([None, "t1"])}
        if rng.random() < 0.15:
            options = {"cron": "@reboot"}
        options["enabled"] = rng.random() > 0.15
        if rng.random() < 0.2:
            options["max_runs"] = rng.randint(1, 2)
        if rng.random() < 0.3:
            options["alert_after"] = 0.001  # overdue at the first tick settled
        if rng.random() < 0.4:
            options["failure_threshold"] = 1
            options["pause_on_failure"] = rng.random() < 0.5
        self.api.add(name, "proj.work", **options)

    def update(self, name: str) -> None:
        changes = self.rng.choice(
            [{"enabled": False}, {"enabled": True}, {"every": 120}, {"max_runs": 1}]
        )
        self.api.update(name, **changes)

    def pause(self, name: str) -> None:
        self.api.pause(name, note="x")

    def resume(self, name: str) -> None:
        self.api.resume(name)

    def delete(self, name: str) -> None:
        self.api.delete(name, force=True)

    def trigger(self, name: str) -> None:
        self.api.trigger(name)

    def run(self, name: str) -> None:
        store = self.api.store
        task_id = f"t-{self.rng.random()}"
        start = RunStart(task_id, None, 0, "skip", 60_000, 0, "h", 10, published=False)
        store.scripts.begin(name, start)
        ending = self.rng.choice(["succeeded", "failed", "timeboxed", None])
        if ending is not None:
            store.scripts.finish(name, RunEnd(task_id, None, ending, "", 5, "h", 10))

    def tick(self, name: str) -> None:
        self.minute += self.rng.randint(1, 3)
        self.dispatcher.dispatch(now_ms=to_ms(self.base + timedelta(minutes=self.minute)))

    def damage(self, name: str) -> None:
        part = self.api.store.keys.of(name)
        client = self.api.store.client
        kind = self.rng.choice(["history", "state", "definition"])
        if kind == "history":  # seen by the next run, which quarantines the entry
            if client.hexists(part.entries, name):
                client.delete(part.history(name))
                client.set(part.history(name), "not a list")
        elif kind == "state" and client.hexists(part.state, name):
            client.hset(part.state, name, "{garbage")
            self.dirty = True
        elif kind == "definition" and client.hexists(part.entries, name):
            client.hdel(part.entries, name)  # deleted outside periodiq
            self.dirty = True

    def rebuild(self, name: str) -> None:
        for part in self.api.store.keys.all():
            self.api.store.scripts.index(part)
        self.dirty = False


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("SEEDS", "6"))))
def test_a_scrape_from_the_summaries_equals_a_full_read(api: Periodiq, seed: int) -> None:
    sequence = Sequence(api, random.Random(seed))
    summary(api.store)  # the indexes of the empty schedule, built once
    done = []
    for _ in range(120):
        done.append(sequence.step())
        if not sequence.dirty:
            assert_scrapes_agree(api, max_entries=5, why="; ".join(done[-4:]))
    sequence.rebuild("")
    assert_scrapes_agree(api, max_entries=5, why="the last rebuild")
    assert_scrapes_agree(api, max_entries=500, why="the last rebuild, every entry labelled")


@pytest.mark.compat  # SINTERCARD, a Redis 7.0 command, made it miscount on 6.2
def test_the_summary_counts_every_status_and_alert(api: Periodiq) -> None:
    api.add("plain", "proj.work", every=60)
    api.add("held", "proj.work", every=60)
    api.pause("held")
    api.add("off", "proj.work", every=60, enabled=False)
    api.add("boot", "proj.work", cron="@reboot")
    api.add("once", "proj.work", every=60, max_runs=1)
    api.add("flaky", "proj.work", every=60, failure_threshold=1)
    api.store.scripts.heartbeat("beat-1", "start", 60_000, {"host": "h"})
    # on a tick's instant: a tick sent more than 24 s late is folded into the next one
    soon = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=2)
    Dispatcher(api.app, api.store, "beat-1").dispatch(now_ms=to_ms(soon))
    run = RunStart("r1", None, 0, "skip", 60_000, 0, "h", 10, published=False)
    api.store.scripts.begin("plain", run)
    api.store.scripts.begin(
        "flaky", RunStart("r2", None, 0, "skip", 60_000, 0, "h", 10, published=False)
    )
    api.store.scripts.finish("flaky", RunEnd("r2", None, "failed", "boom", 5, "h", 10))

    counted = summary(api.store)

    assert counted.total == 6
    assert counted.statuses == {"paused": 1, "running": 1, "disabled": 1, "ended": 1, "active": 2}
    assert counted.failing == ["flaky"]
    assert counted.counters["started"] == 2
    assert counted.counters["failed"] == 1
    assert counted.counters["enqueued"] == 3  # a tick each of plain, once and flaky


def test_a_deleted_entry_takes_its_counters_and_indexes_with_it(api: Periodiq) -> None:
    api.add("gone", "proj.work", every=60, failure_threshold=1)
    api.store.scripts.begin(
        "gone", RunStart("r", None, 0, "skip", 60_000, 0, "h", 10, published=False)
    )
    api.store.scripts.finish("gone", RunEnd("r", None, "failed", "boom", 5, "h", 10))
    api.pause("gone")
    assert summary(api.store).counters["failed"] == 1

    api.delete("gone")

    counted = summary(api.store)
    assert (counted.total, counted.statuses, counted.failing) == (0, {}, [])
    assert counted.counters.get("failed", 0) == 0
    part = api.store.keys.of("gone")
    for key in (part.names, part.paused, part.failing, part.running):
        assert api.store.client.exists(key) == 0


def test_a_schedule_written_without_indexes_gets_them_built_at_the_first_read(
    api: Periodiq,
) -> None:
    for n in range(30):
        api.add(f"e{n}", "proj.work", every=60)
    api.pause("e7")
    store = api.store
    for part in store.keys.all():  # as an older version left them: no indexes at all
        store.client.delete(part.names, part.paused, part.stats)

    counted = summary(store)

    assert counted.statuses == {"paused": 1, "active": 29}
    assert all(store.client.hget(part.stats, "idx") == "1" for part in store.keys.all())


def test_a_damaged_index_never_stops_a_script_and_a_rebuild_repairs_it(api: Periodiq) -> None:
    api.add("a", "proj.work", every=60)
    summary(api.store)
    part = api.store.keys.of("a")
    api.store.client.set(part.paused, "garbage")  # another type where a set belongs

    api.pause("a")  # pause.lua cannot index it, and still pauses

    assert api.get("a").paused
    assert summary(api.store).statuses.get("paused", 0) == 0  # the index is damaged
    api.store.scripts.index(part)
    assert summary(api.store).statuses == {"paused": 1}


def test_the_summary_and_a_scrape_work_on_a_cluster(tmp_path: Any) -> None:
    from celery_periodiq.localredis import LocalRedisCluster

    with LocalRedisCluster(tmp_path / "cluster", replicas=0) as cluster:
        app = Celery("clustered", broker="memory://", set_as_current=False)
        app.conf.periodiq_redis_url = cluster.url
        app.conf.periodiq_redis_cluster = True
        api = periodiq(app)
        for n in range(40):
            api.add(f"c{n:02d}", "proj.work", every=60, enabled=n != 3)
        api.pause("c05")
        for name in ("c01", "c02"):
            api.store.scripts.begin(
                name, RunStart(name, None, 0, "skip", 60_000, 0, "h", 10, published=False)
            )

        counted = summary(api.store)

        assert counted.statuses == {"paused": 1, "running": 2, "disabled": 1, "active": 36}
        assert counted.counters["started"] == 2
        assert_scrapes_agree(api, max_entries=3, why="a few writes on a Cluster")


def test_when_the_last_beat_of_an_older_version_goes_the_indexes_are_rebuilt(
    api: Periodiq,
) -> None:
    api.add("a", "proj.work", every=60)
    summary(api.store)
    scripts = api.store.scripts
    scripts.heartbeat("new", "start", 60_000, {"host": "h", "indexes": INDEX_VERSION})
    scripts.heartbeat("old", "start", 60_000, {"host": "h"})  # an older beat: no indexes
    watch = IndexWatch(api.store)
    assert watch.look() is False
    # what an older beat's ack.lua writes: a state with counters, no index kept
    part = api.store.keys.of("a")
    state = json.loads(api.store.client.hget(part.state, "a"))
    api.store.client.hset(part.state, "a", json.dumps({**state, "n": {"enqueued": 7}}))
    assert summary(api.store).counters.get("enqueued", 0) == 0  # drifted meanwhile

    scripts.heartbeat("old", "stop", 60_000, {"host": "h"})

    assert watch.look() is True
    assert summary(api.store).counters["enqueued"] == 7
    assert watch.look() is False  # rebuilt once, not at every look


def test_a_new_schedule_needs_no_rebuild_at_its_first_read(api: Periodiq) -> None:
    api.add_many({"name": f"n{n}", "task": "proj.work", "every": 60} for n in range(50))

    assert ensure_indexed(api.store) == 0  # put.lua marked each partition it began
    assert summary(api.store).statuses == {"active": 50}
    assert f"local INDEX_VERSION = '{INDEX_VERSION}'" in script_source("put")


def test_doctor_says_when_an_index_is_damaged_and_reindex_repairs_it(api: Periodiq) -> None:
    for n in range(10):
        api.add(f"d{n}", "proj.work", every=60)
    assert api.diagnose()[-1].status == "ok"
    part = api.store.keys.of("d3")
    api.store.client.delete(part.names)
    api.store.client.set(part.paused, "garbage")

    check = api.diagnose()[-1]

    assert (check.name, check.status) == ("indexes", "warn")
    assert f"{part.paused} holds a string, not a set" in check.detail
    assert "misses" in check.detail
    assert "doctor --reindex" in check.detail
    assert api.reindex() == 10
    assert api.diagnose()[-1].status == "ok"
    assert summary(api.store).statuses == {"active": 10}


def test_doctor_reindex_on_the_command_line_rebuilds_then_checks(api: Periodiq) -> None:
    api.add("a", "proj.work", every=60)
    api.store.client.delete(api.store.keys.of("a").names)  # damaged: "a" not named
    api.store.scripts.heartbeat("beat-1", "start", 60_000, {"host": "h"})

    before = cli(api.app, "doctor", "--json")
    result = cli(api.app, "doctor", "--reindex", "--json")
    bad = cli(api.app, "doctor", "--reindex=yes")

    indexes = [c for c in json.loads(before.stdout)["checks"] if c["name"] == "indexes"]
    assert indexes[0]["status"] == "warn"
    after = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "indexes"]
    assert after[0]["status"] == "ok", result.output
    assert bad.exit_code == 2
    assert "--reindex" in bad.output
