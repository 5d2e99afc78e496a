"""Redis memory per entry at steady state: celery_periodiq against celery-redbeat.

    .venv/bin/python bench/memory.py [--entries 10000] [--rounds 20]

celery_periodiq: N entries, every second, are driven on an injected clock through
the real beat code (the Dispatcher: claim.lua and ack.lua, messages into a private
broker) and the worker's guard (begin.lua and finish.lua, called as PeriodicTask
calls them) for --rounds ticks: enough to fill each entry's history and its
duplicate-tick window, and paused and resumed until each entry's audit trail is full
(periodiq_audit_length records), which is steady state with default settings. RedBeat: N
entries saved with RedBeatSchedulerEntry and rescheduled once (its steady state: a
definition and a meta with last_run_at). Both on private redis-servers of the same
version, measured the same way: the server's used_memory before and after, and
MEMORY USAGE of every key, by kind, divided by N. Printed, never asserted.
Runs in the bench venv (bench/_venv.py) so that RedBeat is importable.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from _venv import bootstrap

START = datetime(2030, 1, 1, tzinfo=UTC)


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def by_kind(client: redis.Redis, classify: Any) -> dict[str, int]:
    """MEMORY USAGE (exact, SAMPLES 0) of every key, summed by kind."""
    totals: dict[str, int] = defaultdict(int)
    for key in client.scan_iter(count=1000):
        totals[classify(key)] += int(client.memory_usage(key, samples=0) or 0)
    return dict(totals)


def periodiq_kind(key: str) -> str:
    found = re.match(r"\{[^}]*\}:(\w+)", key)
    return found.group(1) if found else "other"


def drive_periodiq(entries: int, rounds: int) -> dict[str, Any]:
    from _ticks import run_round
    from celery import Celery

    from celery_periodiq import periodiq
    from celery_periodiq.beat.dispatch import Dispatcher
    from celery_periodiq.localredis import LocalRedis
    from celery_periodiq.model.plan import to_ms

    with LocalRedis() as schedule, LocalRedis() as broker:
        client = redis.Redis.from_url(schedule.url, decode_responses=True)
        queue = redis.Redis.from_url(broker.url, decode_responses=True)
        app = Celery("memory", broker=broker.url, set_as_current=False)
        app.conf.periodiq_redis_url = schedule.url
        api = periodiq(app)
        store = api.store
        before = used_memory(client)
        definitions = [
            api.add(f"tenant-{n}", "proj.tasks.poll", every=1, start_at=START,
                    owner=f"tenant-{n % 100}").entry
            for n in range(entries)
        ]  # fmt: skip
        store.put("update", [e for e in definitions if e is not None], now_ms=to_ms(START))
        dispatcher = Dispatcher(app, store, "bench:1:memory")
        began = time.monotonic()
        for round_ in range(1, rounds + 1):
            now = to_ms(START + timedelta(seconds=round_))
            run_round(dispatcher, store, queue, now)
        spent = time.monotonic() - began
        # a full audit trail (periodiq_audit_length records each, the default): entries
        # paused and resumed until the trail is at its cap, the most it holds
        for _ in range(api.settings.audit_length // 2):
            api.pause_many(all=True, note="maintenance", actor="bench@memory")
            api.resume_many(all=True, actor="bench@memory")
        after = used_memory(client)
        kinds = by_kind(client, periodiq_kind)
        sample = api.get("tenant-0")
        figures = {
            "used_memory_per_entry": (after - before) / entries,
            "kinds": {kind: total / entries for kind, total in kinds.items()},
            "history_events": len(api.history("tenant-0", limit=1000)),
            "audit_records": len(api.audit("tenant-0", limit=None)),
            "runs": sample.counters.get("succeeded", 0),
            "seconds": spent,
        }
        client.close()
        queue.close()
        store.client.close()
        return figures


def measure_redbeat(entries: int) -> dict[str, Any] | None:
    try:
        from redbeat import RedBeatSchedulerEntry
    except ImportError:
        return None
    from celery import Celery
    from celery.schedules import schedule

    from celery_periodiq.localredis import LocalRedis

    with LocalRedis() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        app = Celery("memory-redbeat", broker=server.url, set_as_current=False)
        app.conf.redbeat_redis_url = server.url
        before = used_memory(client)
        for n in range(entries):
            entry = RedBeatSchedulerEntry(f"tenant-{n}", "proj.tasks.poll", schedule(1), app=app)
            entry.save()
            entry.reschedule(datetime.now(UTC))  # as a beat does after each run
        after = used_memory(client)
        kinds = by_kind(client, lambda key: "schedule" if key.endswith("::schedule") else "entry")
        client.close()
        return {
            "used_memory_per_entry": (after - before) / entries,
            "kinds": {kind: total / entries for kind, total in kinds.items()},
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20, help="ticks per entry")
    args = parser.parse_args()
    bootstrap(__file__, sys.argv[1:])

    ours = drive_periodiq(args.entries, args.rounds)
    theirs = measure_redbeat(args.entries)
    print(f"celery_periodiq: {args.entries:,} entries, {args.rounds} ticks each "
          f"({ours['seconds']:.0f} s); tenant-0 ran {ours['runs']} times and keeps "
          f"{ours['history_events']} history events and {ours['audit_records']} audit "
          "records")  # fmt: skip
    print()
    print("| key kind | celery_periodiq bytes/entry | RedBeat bytes/entry |")
    print("|---|---|---|")
    for kind, size in sorted(ours["kinds"].items(), key=lambda item: -item[1]):
        print(f"| {kind} | {size:,.0f} | |")
    if theirs is not None:
        for kind, size in sorted(theirs["kinds"].items(), key=lambda item: -item[1]):
            print(f"| redbeat {kind} | | {size:,.0f} |")
    total_ours = sum(ours["kinds"].values())
    total_theirs = "–" if theirs is None else f"{sum(theirs['kinds'].values()):,.0f}"
    print(f"| **all keys (MEMORY USAGE)** | **{total_ours:,.0f}** | **{total_theirs}** |")
    theirs_used = "–" if theirs is None else f"{theirs['used_memory_per_entry']:,.0f}"
    print(f"| **server used_memory growth** | **{ours['used_memory_per_entry']:,.0f}** | "
          f"**{theirs_used}** |")  # fmt: skip
    if theirs is None:
        print("RedBeat is not importable here: its column is empty (bench/_venv.py makes one).")


if __name__ == "__main__":
    main()
