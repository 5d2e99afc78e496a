"""One round of ticks as a beat and a worker run it, on an injected clock.

The beat's own code claims, publishes and settles the due ticks (a
:class:`~celery_periodiq.beat.dispatch.Dispatcher`: claim.lua, ack.lua, messages
into a private broker); then each message is begun and finished as the worker's
guard calls begin.lua and finish.lua (``PeriodicTask``), with the values its
headers carry and an attempt token of its own for each delivery. What
``bench/memory.py`` fills histories with, and what ``bench/read_scale.py`` gives part
of its schedule a past with.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Container
from typing import Any

from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.protocol.records import RunEnd, RunStart
from celery_periodiq.store.store import Store


def run_round(
    dispatcher: Dispatcher,
    store: Store,
    queue: Any,
    now_ms: int,
    failing: Container[str] = (),
) -> int:
    """Dispatch every tick due at ``now_ms``, then run each message taken from
    ``queue`` (a client of the broker's Redis; its ``celery`` list is emptied): begun
    5 ms after ``now_ms``, finished 12 ms later, ``failed`` for the entries in
    ``failing``, else ``succeeded``. Returns how many runs were recorded."""
    while dispatcher.dispatch(now_ms=now_ms).full:
        pass
    messages = queue.lrange("celery", 0, -1)
    for raw in messages:
        headers, attempt = json.loads(raw)["headers"], uuid.uuid4().hex[:8]
        name, tick = headers["periodiq_entry"], headers["periodiq_tick"]
        start = RunStart(
            task_id=headers["id"], tick_ms=tick, min_gap_ms=headers["periodiq_min_gap"],
            overlap=headers["periodiq_overlap"], ttl_ms=headers["periodiq_ttl"],
            retries=0, host="worker-1", history_length=store.settings.history_length,
            expires_ms=headers.get("periodiq_expires"), attempt=attempt,
        )  # fmt: skip
        store.scripts.begin(name, start, now_ms=now_ms + 5)
        failed = name in failing
        end = RunEnd(
            task_id=headers["id"], tick_ms=tick, outcome="failed" if failed else "succeeded",
            error="RuntimeError: bench" if failed else "", duration_ms=12, host="worker-1",
            history_length=store.settings.history_length, attempt=attempt,
        )  # fmt: skip
        store.scripts.finish(name, end, now_ms=now_ms + 17)
    queue.delete("celery")
    return len(messages)
