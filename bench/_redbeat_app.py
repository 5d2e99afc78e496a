"""The Celery app the benchmark runs as ``celery beat`` with celery-redbeat.

Configured from the environment by bench/beat.py: BENCH_BROKER_URL,
BENCH_REDIS_URL (RedBeat's Redis), BENCH_MAX_INTERVAL
(``beat_max_loop_interval``: how often RedBeat looks at its schedule when
nothing is due, and how often a standby beat retries the lock) and
BENCH_LOCK_TIMEOUT (``redbeat_lock_timeout``; RedBeat's own default is five
times the loop interval).

The scheduler is RedBeat's, unchanged, except that each message it sends
carries two headers so the broker listener can map it back to its tick:
``bench_entry`` (the entry name) and ``bench_due`` (the instant RedBeat itself
considered the tick due: the entry's stored ``last_run_at`` plus its interval,
in ms). Both values are already in memory; computing them is one addition.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from redbeat import RedBeatScheduler

app = Celery("bench_redbeat", broker=os.environ["BENCH_BROKER_URL"])
app.conf.beat_scheduler = "_redbeat_app:StampedRedBeatScheduler"
app.conf.redbeat_redis_url = os.environ["BENCH_REDIS_URL"]
app.conf.beat_max_loop_interval = float(os.environ.get("BENCH_MAX_INTERVAL", "1"))
if os.environ.get("BENCH_LOCK_TIMEOUT"):
    app.conf.redbeat_lock_timeout = float(os.environ["BENCH_LOCK_TIMEOUT"])
app.conf.broker_connection_retry_on_startup = True
app.conf.result_expires = None  # no celery.backend_cleanup entry


def due_ms(entry: Any) -> int | None:
    """When RedBeat considers ``entry``'s current tick due (ms since the epoch)."""
    if entry.last_run_at is None:
        return None
    return round((entry.last_run_at + entry.schedule.run_every).timestamp() * 1000)


class StampedRedBeatScheduler(RedBeatScheduler):  # type: ignore[misc]
    """RedBeat, with the tick's entry name and due instant in two message headers."""

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        headers = {"bench_entry": entry.name, "bench_due": due_ms(entry)}
        entry.options = {**entry.options, "headers": headers}
        return super().apply_async(entry, producer, advance, **kwargs)
