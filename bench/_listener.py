"""Drain the broker's ``celery`` list and stamp when each message got there.

Run by ``bench/beat.py`` as its own process, next to the beats:

    python bench/_listener.py --url redis://127.0.0.1:PORT/0 --out FILE

It pops from the tail of the list (kombu LPUSHes to the head, so the tail is
the oldest message): ``RPOP celery 1000`` while there is a backlog, a short
``BRPOP`` when the list is empty, and stamps every popped batch with
``time.time()`` right after the reply. Pop order is publish order. Nothing is
decoded while it runs; after SIGTERM it drains what is left, decodes the
headers and writes one JSON line per message:
``[arrival, task_id, entry, due_ms, task]`` where ``entry``/``due_ms`` come
from celery_periodiq's ``periodiq_entry``/``periodiq_tick`` headers, or from
the ``bench_entry``/``bench_due`` headers that bench/_redbeat_app.py adds.

The running count of messages received is kept in the broker key
``bench:received`` so the driver can wait for a scenario to finish.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import redis

RECEIVED_KEY = "bench:received"


def _decode(raw: bytes) -> tuple[str | None, str | None, int | None, str | None]:
    headers: dict[str, Any] = json.loads(raw).get("headers") or {}
    entry = headers.get("periodiq_entry") or headers.get("bench_entry")
    due = headers.get("periodiq_tick")
    if due is None:
        due = headers.get("bench_due")
    return headers.get("id"), entry, None if due is None else int(due), headers.get("task")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", default="celery")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    client = redis.Redis.from_url(args.url, socket_timeout=10)
    client.ping()
    print("ready", flush=True)

    batches: list[tuple[float, list[bytes]]] = []
    queue = args.queue
    while True:
        items = client.rpop(queue, 1000)
        if items:
            batches.append((time.time(), items))
            client.incrby(RECEIVED_KEY, len(items))
            continue
        if stopping:
            break
        got = client.brpop([queue], timeout=0.05)
        if got:
            batches.append((time.time(), [got[1]]))
            client.incrby(RECEIVED_KEY, 1)

    with open(args.out, "w") as out:
        for arrival, items in batches:
            for raw in items:
                task_id, entry, due, task = _decode(raw)
                out.write(json.dumps([arrival, task_id, entry, due, task]) + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
