"""begin.lua's cost with a group limit, against the same run without one.

    .venv/bin/python bench/group_begin.py [--runs 5000] [--held 50]

Against a private redis-server on loopback, each run is one begin.lua (started) and
one finish.lua (succeeded) of an entry, called through the worker's wrappers, as the
guard calls them: first with no group limit, then in a group limited to ``--held`` + 1
whose other ``--held`` slots are held by runs that have not ended (each begin prunes,
counts and adds its marker; each finish removes it), then with the group full (each
begin refused as ``dropped_group_limit``). Prints per case the round trip p50/p99 (ms)
and the server's own time per begin.lua and finish.lua call (``INFO commandstats``, µs),
which is what a group limit adds to Redis.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.records import RunEnd, RunStart


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


def case(api: Any, runs: int, group: str, limit: int, prefix: str) -> dict[str, float]:
    """p50/p99 of one begin + finish, and the server's µs per script call."""
    scripts, client = api.store.scripts, api.store.client
    client.config_resetstat()
    spent = []
    outcomes: dict[str, int] = {}
    for index in range(runs):
        task_id = f"{prefix}-{index}"
        start = RunStart(
            task_id, None, 0, "skip", 600_000, 0, "bench", 40, attempt=task_id,
            group=group, group_limit=limit,
        )  # fmt: skip
        end = RunEnd(task_id, None, "succeeded", "", 1, "bench", 40, attempt=task_id, group=group)
        began = time.perf_counter()
        outcome = scripts.begin("job", start).outcome
        if outcome == "started":
            scripts.finish("job", end)
        spent.append((time.perf_counter() - began) * 1000)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    stats = client.info("commandstats")
    calls = stats.get("cmdstat_evalsha", {})
    return {
        "p50": percentile(spent, 0.5),
        "p99": percentile(spent, 0.99),
        "mean": statistics.fmean(spent),
        "server_us": float(calls.get("usec_per_call", 0.0)),
        "outcomes": outcomes,  # type: ignore[dict-item]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--held", type=int, default=50)
    args = parser.parse_args()

    with LocalRedis() as server:
        app = Celery("bench_group", broker="memory://", set_as_current=False)
        app.conf.periodiq_redis_url = server.url
        app.conf.periodiq_group_limits = {"reports": args.held + 1}
        api = periodiq(app)
        api.add("job", "bench.noop", every=3600, group="reports")
        for n in range(args.held):  # the other runs of the group, not ended
            api.add(f"other-{n}", "bench.noop", every=3600, group="reports")
            api.store.scripts.begin(
                f"other-{n}",
                RunStart(f"o{n}", None, 0, "allow", 3_600_000, 0, "bench", 40, attempt=f"o{n}",
                         group="reports", group_limit=args.held + 1),
            )  # fmt: skip
        rows = [
            ("no group limit", case(api, args.runs, "", 0, "free")),
            (f"limit {args.held + 1}, {args.held} held", case(
                api, args.runs, "reports", args.held + 1, "limited")),
            (f"limit {args.held}, full: refused", case(
                api, args.runs, "reports", args.held, "refused")),
        ]  # fmt: skip
        print(f"begin.lua + finish.lua, {args.runs} runs each, Redis {server.url}")
        print(f"{'case':<28} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'server µs/call':>15}")
        for label, row in rows:
            print(
                f"{label:<28} {row['p50']:8.3f} {row['p99']:8.3f} {row['mean']:8.3f} "
                f"{row['server_us']:15.1f}   {row['outcomes']}"
            )
        api.store.client.close()


if __name__ == "__main__":
    main()
