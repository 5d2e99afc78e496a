"""A large schedule on a 3-master Redis Cluster: load time, beat start, RSS, idle pass.

    .venv/bin/python bench/cluster_scale.py [--sizes 10000,100000,1000000]

For each size: a fresh local Redis Cluster (3 masters, no replicas, on loopback;
celery_periodiq.localredis.LocalRedisCluster) and a private broker; N entries
(every 24 h, none due for an hour) are loaded with ``Periodiq.add_many``; then one
real ``celery beat`` process starts, and we time how long until it logs that it is
ready, read its RSS a few seconds later, and time 300 idle passes of a Dispatcher in
this process (what a beat does when it wakes with nothing due). Printed, never
asserted.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_size(size: int, tmp: Path) -> dict[str, float]:
    from celery import Celery

    from celery_periodiq import periodiq
    from celery_periodiq.beat.dispatch import Dispatcher
    from celery_periodiq.localredis import LocalRedis, LocalRedisCluster

    with (
        LocalRedisCluster(tmp / f"cluster-{size}", masters=3, replicas=0) as cluster,
        LocalRedis(tmp / f"broker-{size}") as broker,
    ):
        app = Celery("bench_periodiq", broker=broker.url, set_as_current=False)
        app.conf.periodiq_redis_url = cluster.url
        app.conf.periodiq_redis_cluster = True
        app.conf.periodiq_key_prefix = "periodiq"
        api = periodiq(app)
        first = datetime.now(UTC) + timedelta(hours=1)
        began = time.monotonic()
        for start in range(0, size, 50_000):
            api.add_many(
                {"name": f"tenant-{n:07d}", "task": "proj.poll", "every": 86400,
                 "start_at": first, "owner": f"o{n % 1000}"}
                for n in range(start, min(start + 50_000, size))
            )  # fmt: skip
        load_s = time.monotonic() - began
        log = tmp / f"beat-{size}.log"
        env = {
            **os.environ,
            "BENCH_BROKER_URL": broker.url,
            "BENCH_REDIS_URL": cluster.url,
            "BENCH_REDIS_CLUSTER": "1",
            "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT)]),
        }
        with log.open("wb") as out:
            beat = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "_periodiq_app", "beat", "--loglevel=INFO",
                 "-s", str(tmp / f"schedule-{size}")],
                env=env, cwd=BENCH, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        started = time.monotonic()
        while " ready; " not in log.read_text(errors="replace"):
            if time.monotonic() - started > 600 or beat.poll() is not None:
                raise RuntimeError(f"the beat did not get ready: see {log}")
            time.sleep(0.05)
        ready_s = time.monotonic() - started
        time.sleep(3)
        rss = rss_mib(beat.pid)
        beat.terminate()
        beat.wait(30)
        dispatcher = Dispatcher(app, api.store, "bench:idle:0")
        dispatcher.dispatch()  # the first pass claims every partition: nothing is due
        passes = []
        for _ in range(300):
            tick = time.perf_counter()
            dispatcher.dispatch().seconds_until_next()
            passes.append((time.perf_counter() - tick) * 1e6)
        stored = api.count()
        api.store.client.close()
        return {"entries": stored, "load_s": load_s, "ready_s": ready_s, "rss_mib": rss,
                "idle_p50_us": statistics.median(passes)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print("| entries | load with add_many (s) | beat start until ready (s) | beat RSS (MiB) "
          "| idle pass p50 (µs) |")  # fmt: skip
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="periodiq-cluster-bench-") as tmp:
        for size in (int(value) for value in args.sizes.split(",")):
            found = one_size(size, Path(tmp))
            cells = (f"{found['entries']:,.0f}", f"{found['load_s']:.1f}",
                     f"{found['ready_s']:.1f}", f"{found['rss_mib']:.1f}",
                     f"{found['idle_p50_us']:.0f}")  # fmt: skip
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
