"""The tasks' own record of what they did: one JSON line per run in a Redis list.

It stands in for the side effects a real project has (a report written, an
invoice sent, a mail downloaded). The demo reads it to check, from outside
celery_periodiq's own bookkeeping, that no tick ran twice and none was lost.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from typing import Any

import redis
from celery import Task
from celery.signals import task_revoked

from celery_periodiq import PeriodicTask

__all__ = ["client", "record", "runs", "runs_key"]

_clients: dict[str, redis.Redis] = {}


def runs_key(prefix: str) -> str:
    """The Redis list of run records for the app whose ``periodiq_key_prefix`` is ``prefix``."""
    return f"example:{prefix}:runs"


def client(task: Task) -> redis.Redis:  # type: ignore[type-arg]
    """A Redis client for the app's schedule store (one per process)."""
    url = str(task.app.conf.periodiq_redis_url)
    found = _clients.get(url)
    if found is None:
        found = _clients[url] = redis.Redis.from_url(url, decode_responses=True)
    return found


def _ms(instant: datetime | None) -> int | None:
    return None if instant is None else round(instant.timestamp() * 1000)


def _push(task: Task, item: dict[str, Any]) -> None:  # type: ignore[type-arg]
    key = runs_key(str(task.app.conf.periodiq_key_prefix))
    client(task).rpush(key, json.dumps(item, default=str))


def record(task: PeriodicTask, kind: str = "ran", **details: Any) -> None:
    """Append what this guarded run is doing (``kind="ran"`` when its body begins)."""
    run = task.periodiq
    _push(
        task,
        {
            "kind": kind,
            "entry": run.entry,
            "tick": _ms(run.scheduled_for),
            "manual": run.manual,
            "missed": run.missed,
            "task_id": task.request.id,
            "pid": os.getpid(),
            "at": time.time(),
            **details,
        },
    )


def runs(redis_client: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    """Every record so far, oldest first."""
    return [json.loads(raw) for raw in redis_client.lrange(runs_key(prefix), 0, -1)]


@task_revoked.connect
def _expired(sender: Any = None, request: Any = None, expired: bool = False, **_: Any) -> None:
    """A tick's message reached the worker after it expired (at the entry's next tick).

    Celery discards it without running the task; record it so the demo can
    tell a late message from a lost tick.
    """
    entry = getattr(request, "periodiq_entry", None)
    if not expired or not isinstance(sender, Task) or entry is None:
        return
    _push(
        sender,
        {
            "kind": "expired",
            "entry": entry,
            "tick": getattr(request, "periodiq_tick", None),
            "task_id": getattr(request, "id", None),
            "pid": os.getpid(),
            "at": time.time(),
        },
    )
