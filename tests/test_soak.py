"""Soak: a Sentinel failover every 30 s for 10 minutes under two beats and a worker.

Not run by ``make test`` (the ``soak`` marker is deselected there); run it with

    .venv/bin/python -m pytest -m soak -s tests/test_soak.py

``PERIODIQ_SOAK_MINUTES`` and ``PERIODIQ_SOAK_EVERY`` (seconds between failovers)
change its length. It prints, per failover: ticks due, ticks run, ticks folded
into a later run by the catch-up policy, duplicates, ticks not run (neither run nor
folded) and the longest gap between two runs of an entry; then why the worker's
guards refused runs (a tick not run is one of these, or lost); and asserts no tick
ran twice, with ``periodiq_replica_acks = 1``.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq.localredis import LocalRedis, LocalSentinel
from tests.processes import cluster, wait_for

pytestmark = [pytest.mark.soak, pytest.mark.timeout(3600)]

ENTRIES = 12


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[LocalSentinel]:
    with LocalSentinel(tmp_path / "sentinel") as running:
        yield running


def test_a_failover_every_30_s_runs_no_tick_twice(tmp_path: Path, sentinel: LocalSentinel) -> None:
    minutes = float(os.environ.get("PERIODIQ_SOAK_MINUTES", "10"))
    every = float(os.environ.get("PERIODIQ_SOAK_EVERY", "30"))
    with (
        LocalRedis(tmp_path / "broker") as broker,
        LocalRedis(tmp_path / "runs") as runs,
        cluster(tmp_path, sentinel.url, broker.url, TEST_RUNS_URL=runs.url,
                TEST_REDIS_OPTIONS=json.dumps({"master_name": "mymaster"}),
                TEST_REPLICA_ACKS="1") as running,
    ):  # fmt: skip
        names = [f"soak-{n}" for n in range(ENTRIES)]
        api = running.firing(names, task="guarded_record")
        began = time.time()
        kills: list[float] = []
        while time.time() - began < minutes * 60:
            wait_for(lambda: sentinel.in_sync(), 60, "both replicas in sync")
            due = began + (len(kills) + 1) * every
            wait_for(lambda: time.time() >= due, every + 60, "the next failover's time")  # noqa: B023
            killed = sentinel.kill_primary()
            kills.append(time.time())
            wait_for(lambda: sentinel.primary() not in (None, killed), 60, "a promotion")  # noqa: B023
            killed.start()
        settled = time.time() + every
        wait_for(lambda: time.time() >= settled, every + 1, "the last window to pass")
        windows = [*zip(kills, [*kills[1:], time.time() - 3], strict=True)]
        rows = [_figures(running.runs(), start, end) for start, end in windows]

        print(f"\nsoak: {len(kills)} failovers in {(time.time() - began) / 60:.1f} min, "
              f"{ENTRIES} entries every second, 2 beats, 1 worker, replica acks 1")  # fmt: skip
        print(
            f"{'#':>3} {'due':>6} {'run':>6} {'folded':>6} {'dupes':>6} {'notrun':>6} {'gap s':>6}"
        )
        for index, row in enumerate(rows, 1):
            print(f"{index:>3} {row['due']:>6} {row['run']:>6} {row['folded']:>6} "
                  f"{row['duplicates']:>6} {row['lost']:>6} {row['gap']:>6.1f}")  # fmt: skip
        totals = {key: sum(row[key] for row in rows) for key in ("due", "run", "folded", "lost")}
        print(f"all {totals['due']:>6} {totals['run']:>6} {totals['folded']:>6} "
              f"{len(running.twice()):>6} {totals['lost']:>6} "
              f"{max(row['gap'] for row in rows):>6.1f}")  # fmt: skip

        counted: dict[str, int] = {}
        for name in names:
            for reason, count in api.get(name).counters.items():
                counted[reason] = counted.get(reason, 0) + count
        refused = ("dropped_too_soon", "duplicate", "expired", "revoked", "skipped_overlap")
        print("runs refused by the worker's guards, all windows: "
              + ", ".join(f"{reason} {counted.get(reason, 0)}" for reason in refused))  # fmt: skip

        assert running.twice() == []
        assert all(process.running for process in running.processes), running.logs()
        api.delete_owner("tests")
        api.store.client.close()


def _figures(runs: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """Ticks due in [start, end) of every entry, and what became of them."""
    start_ms, end_ms = int(start) * 1000 + 1000, int(end) * 1000
    due = ENTRIES * ((end_ms - start_ms) // 1000)
    ran: dict[tuple[str, int], int] = {}
    folded: set[tuple[str, int]] = set()
    gap = 0.0
    for name in {run["entry"] for run in runs}:
        mine = sorted((run for run in runs if run["entry"] == name), key=lambda run: run["at"])
        for run in mine:
            tick = int(run["tick"])
            ran[name, tick] = ran.get((name, tick), 0) + 1
            for back in range(1, int(run.get("missed") or 1)):
                folded.add((name, tick - back * 1000))
        times = [run["at"] for run in mine if start <= run["at"] < end]
        gap = max([gap, *(b - a for a, b in itertools.pairwise(times))])
    inside = {key for key in ran if start_ms <= key[1] < end_ms}
    folded_inside = {key for key in folded if start_ms <= key[1] < end_ms} - inside
    return {
        "due": due,
        "run": len(inside),
        "folded": len(folded_inside),
        "duplicates": sum(ran[key] - 1 for key in inside),
        "lost": due - len(inside) - len(folded_inside),
        "gap": gap,
    }
