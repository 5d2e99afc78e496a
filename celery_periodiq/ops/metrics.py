"""Prometheus metrics of a whole schedule, read from Redis at each scrape.

A scrape reads the summaries and indexes the scripts keep per partition
(:mod:`~celery_periodiq.store.summary`), and the state of the entries it labels: its
cost grows with the partitions and ``max_entries``, not with the schedule.

One scrape shows the whole cluster: beats, entries by state, each entry's runs and
skips, overdue and failing entries, and two histograms the scripts keep per
partition (lateness: due -> published, by ack.lua; start delay: due -> run began,
by begin.lua). Needs the ``metrics`` extra (``prometheus-client``).

Per-entry series are bounded: at most ``max_entries`` entries get their own
``entry`` label (overdue, failing and quarantined ones first, then by name); the
counters of the others are summed under ``entry="_other"``, and the cluster-wide
``periodiq_entries_overdue`` / ``periodiq_entries_failing`` count every entry.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import redis
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from celery_periodiq.beat.stage_scripts import staged_messages
from celery_periodiq.errors import PeriodiqError
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.summary import Summary, first_names, summary
from celery_periodiq.store.views import StoredEntry

__all__ = ["BUCKETS", "OTHER", "PeriodiqCollector"]

logger = logging.getLogger("celery_periodiq.metrics")

BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0)
"""Histogram bounds in seconds: the same as BUCKETS in lua/_common.lua (there in ms)."""
OTHER = "_other"
"""The ``entry`` label of the entries beyond ``max_entries``, summed."""
RUN_OUTCOMES = ("succeeded", "failed", "timeboxed", "revoked")
SKIP_REASONS = (
    "missed",
    "skipped_overlap",
    "dropped_too_soon",
    "dropped_group_limit",
    "duplicate",
    "expired",
    "skipped_window",
    "deferred",
    "excluded",
)
_HISTOGRAMS = (
    ("l", "periodiq_tick_lateness_seconds", "From a tick's due instant to its publishing."),
    ("s", "periodiq_start_delay_seconds", "From a tick's due instant to its run's start."),
)


class _HasRuntime(Protocol):
    """A :class:`~celery_periodiq.Periodiq`: what the CLI and the web collect through."""

    runtime: Runtime


class PeriodiqCollector(Collector):
    """Collects the schedule of one app (its :class:`Runtime`, or its ``Periodiq``) at
    every scrape."""

    def __init__(self, api: Runtime | _HasRuntime, max_entries: int = 500) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            raise PeriodiqError(f"max_entries={max_entries!r} is invalid (allowed: 0 or more)")
        self.runtime = api if isinstance(api, Runtime) else api.runtime
        self.max_entries = max_entries

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("periodiq_up", "1 when the schedule's Redis could be read.")
        try:
            with self.runtime.guard():
                beats = len(self.runtime.store.beats())
            counted = summary(self.runtime.store)
            urgent = sorted(set(counted.overdue) | set(counted.failing) | set(counted.quarantined))
            names = urgent[: self.max_entries]
            names += first_names(self.runtime.store, self.max_entries - len(names), set(urgent))
            chosen = self.runtime.store.glance_at(names)
        except (PeriodiqError, redis.RedisError) as error:
            logger.warning("periodiq: metrics: cannot read the schedule: %s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield _gauge("periodiq_beats_live", "Beats whose heartbeat is alive.", beats)
        staged = staged_messages(self.runtime.app, self.runtime.settings.key_prefix)
        if staged is not None:
            yield _gauge("periodiq_staged_messages", "Messages staged for their instant.", staged)
        states = GaugeMetricFamily("periodiq_entries", "Entries by state.", labels=["state"])
        for state, count in sorted(counted.statuses.items()):
            states.add_metric([state], count)
        yield states
        yield _gauge("periodiq_entries_overdue", "Entries overdue, of all.", len(counted.overdue))
        yield _gauge("periodiq_entries_failing", "Entries failing, of all.", len(counted.failing))
        yield from self._per_entry(chosen, counted)
        for prefix, name, documentation in _HISTOGRAMS:
            yield _histogram(name, documentation, counted.stats, prefix)

    def _per_entry(self, chosen: list[StoredEntry], counted: Summary) -> Iterable[Metric]:
        """Each chosen entry's own series, and the counters of all others summed."""
        chosen = sorted(chosen, key=_urgent)
        runs = CounterMetricFamily("periodiq_runs", "Runs by outcome.", labels=["entry", "outcome"])
        skips = CounterMetricFamily(
            "periodiq_skips", "Ticks not run, by reason.", labels=["entry", "reason"]
        )
        overdue = GaugeMetricFamily(
            "periodiq_entry_overdue", "1 while the entry is overdue.", labels=["entry"]
        )
        failing = GaugeMetricFamily(
            "periodiq_entry_failing", "1 while the entry is failing.", labels=["entry"]
        )
        success = GaugeMetricFamily(
            "periodiq_entry_last_success_timestamp_seconds",
            "When a run of the entry last succeeded (Unix time).",
            labels=["entry"],
        )
        groups: list[tuple[str, Counter[str]]] = [
            (item.name, Counter(item.counters)) for item in chosen
        ]
        if counted.total > len(chosen):
            rest = Counter(counted.counters)
            for _, counters in groups:
                rest.subtract(counters)
            groups.append((OTHER, rest))
        for label, counters in groups:
            for outcome in RUN_OUTCOMES:
                runs.add_metric([label, outcome], counters.get(outcome, 0))
            for reason in SKIP_REASONS:
                skips.add_metric([label, reason], counters.get(reason, 0))
        for item in chosen:
            overdue.add_metric([item.name], 1 if item.overdue_since else 0)
            failing.add_metric([item.name], 1 if item.failing_since else 0)
            if item.last_success is not None:
                success.add_metric([item.name], item.last_success.timestamp())
        yield from (runs, skips, overdue, failing, success)


def _urgent(item: StoredEntry) -> tuple[bool, str]:
    """Overdue, failing and quarantined entries first, then by name."""
    return (not (item.overdue_since or item.failing_since or item.invalid), item.name)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation)
    gauge.add_metric([], value)
    return gauge


def _histogram(name: str, documentation: str, stats: dict[str, Any], prefix: str) -> Metric:
    buckets, running = [], 0
    for index, bound in enumerate(BUCKETS, 1):
        running += stats.get(f"{prefix}{index}", 0)
        buckets.append((_bound(bound), running))
    running += stats.get(f"{prefix}{len(BUCKETS) + 1}", 0)
    buckets.append(("+Inf", running))
    return HistogramMetricFamily(
        name, documentation, buckets=buckets, sum_value=stats.get(f"{prefix}sum", 0) / 1000
    )


def _bound(seconds: float) -> str:
    return repr(float(seconds))
