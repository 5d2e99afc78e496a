"""The limit: Celery's own ``send_task`` in a loop, one reused producer, same broker.

    python bench/_limit.py --broker URL --count 10000 --at EPOCH_SECONDS

Sends one warm-up message (so the connection is open), sleeps until ``--at``,
then sends ``--count`` messages as fast as it can through one producer and
prints ``{"sent": N, "seconds": S, "cpu_seconds": C}`` (C: this process's CPU time in
that loop). Each message has the shape of a
celery_periodiq tick: a fixed task id, ``expires``, soft and hard time limits
and the same seven ``periodiq_*`` headers (the entry is ``limit-<i>``, the tick
is ``--at`` in ms), so the listener measures it exactly like a beat's output.

With ``--batch N`` (a reference, not the limit) the loop runs inside kombu's
``producer.batch(N)`` (kombu 5.7+), which pipelines the ``LPUSH``es: what a
beat could gain by publishing a claimed batch that way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

from celery import Celery


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--at", type=float, required=True)
    parser.add_argument("--batch", type=int, default=0, help="publish inside producer.batch(N)")
    args = parser.parse_args()

    app = Celery("bench_limit", broker=args.broker, set_as_current=False)
    app.conf.result_expires = None
    tick_ms = round(args.at * 1000)
    expires = datetime.fromtimestamp(args.at, UTC) + timedelta(hours=1)
    namespace = uuid.uuid4()

    def options(name: str) -> dict[str, object]:
        return {
            "task_id": str(uuid.uuid5(namespace, name)),
            "expires": expires,
            "soft_time_limit": 1800.0,
            "time_limit": 1810.0,
            "headers": {
                "periodiq_entry": name,
                "periodiq_overlap": "skip",
                "periodiq_ttl": 1_810_000,
                "periodiq_tick": tick_ms,
                "periodiq_interval": 3600.0,
                "periodiq_missed": 1,
                "periodiq_min_gap": 3_240_000,
            },
        }

    with app.producer_or_acquire() as producer:
        app.send_task(
            "bench.noop", args=[], kwargs={}, producer=producer, **options("warmup-limit")
        )
        names = [f"limit-{index:06d}" for index in range(args.count)]
        time.sleep(max(args.at - time.time(), 0))
        began, cpu_began = time.perf_counter(), time.process_time()
        step = args.batch or args.count
        for start in range(0, args.count, step):
            context = producer.batch(args.batch) if args.batch else contextlib.nullcontext()
            with context:
                for name in names[start : start + step]:
                    app.send_task(
                        "bench.noop", args=[], kwargs={}, producer=producer, **options(name)
                    )
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu_began
    print(json.dumps({"sent": args.count, "seconds": seconds, "cpu_seconds": cpu_seconds}),
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
