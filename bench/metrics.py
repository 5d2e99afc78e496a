"""How long one Prometheus scrape takes on a large schedule, and how big it is.

    .venv/bin/python bench/metrics.py [--entries 100000] [--max-entries 500]

Stores ENTRIES entries with ``add_many`` in a private redis-server on loopback,
then scrapes them three times through :class:`PeriodiqCollector` (what ``celery
periodiq metrics`` and ``serve``'s ``/metrics`` answer) and prints the time of
each scrape, the size of the text and how many series it holds.
"""

from __future__ import annotations

import argparse
import time

from celery import Celery
from prometheus_client import CollectorRegistry, generate_latest

from celery_periodiq import periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.ops.metrics import PeriodiqCollector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--max-entries", type=int, default=500)
    args = parser.parse_args()
    with LocalRedis() as server:
        app = Celery("bench-metrics", broker="memory://", set_as_current=False)
        app.conf.periodiq_redis_url = server.url
        api = periodiq(app)
        began = time.perf_counter()
        api.add_many(
            {"name": f"tenant-{n:06d}", "task": "proj.poll", "every": 300}
            for n in range(args.entries)
        )
        print(f"stored {args.entries:,} entries in {time.perf_counter() - began:.1f} s")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(PeriodiqCollector(api, args.max_entries))
        for attempt in range(1, 4):
            began = time.perf_counter()
            text = generate_latest(registry)
            took = time.perf_counter() - began
            series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
            print(f"scrape {attempt}: {took:.2f} s, {len(text):,} bytes, {series:,} series")


if __name__ == "__main__":
    main()
