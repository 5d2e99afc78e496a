"""Alert transitions sent by the beats: each once per cluster.

The scripts decide the transitions on the Redis clock (ack.lua: overdue; finish.lua:
failing, recovered) and push each onto its partition's alerts list. A beat pops
those lists of the partitions it watches (LPOP: whichever beat pops an item is the
only one to have it) and sends each as one message to ``periodiq_alert_task``,
routed like any task; without that setting it logs them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import Celery

from celery_periodiq.keys import Partition
from celery_periodiq.plan import from_ms
from celery_periodiq.store import Store

__all__ = ["Alerts", "payload"]

logger = logging.getLogger(__name__)

_BATCH = 100  # transitions popped per partition per round


def payload(raw: str, prefix: str) -> dict[str, Any] | None:
    """The message an alert task gets for one stored transition; None for garbage."""
    try:
        name, kind, at, note = json.loads(raw)
        instant = from_ms(int(at)).isoformat()
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return {"entry": name, "transition": kind, "at": instant, "note": note, "schedule": prefix}


class Alerts:
    """Pops and sends the alert transitions of some partitions."""

    def __init__(self, app: Celery, store: Store, task: str | None) -> None:
        self.app = app
        self.store = store
        self.task = task

    def send(self, parts: list[Partition]) -> int:
        """Pop and send (or log) the pending transitions of ``parts``; returns how many.
        Transitions whose message could not be sent go back to the front of their list.

        Raises:
            redis.RedisError: Redis failed (nothing popped is lost: see above).
        """
        pipe = self.store.client.pipeline(transaction=False)
        for part in parts:
            pipe.lpop(part.alerts, _BATCH)
        sent = 0
        for part, items in zip(parts, pipe.execute(), strict=True):
            items = items or []
            for position, raw in enumerate(items):
                message = payload(raw, self.store.keys.prefix)
                if message is None:
                    logger.warning("periodiq: an unreadable alert was dropped: %r", raw)
                    continue
                try:
                    self._deliver(message)
                except Exception:
                    self.store.client.lpush(part.alerts, *reversed(items[position:]))
                    raise
                sent += 1
        return sent

    def _deliver(self, message: dict[str, Any]) -> None:
        if self.task is not None:
            self.app.send_task(self.task, args=[message])
            return
        level = logging.INFO if message["transition"] == "recovered" else logging.WARNING
        logger.log(
            level, "periodiq: entry %r is %s: %s (set periodiq_alert_task to be told)",
            message["entry"], message["transition"], message["note"],
        )  # fmt: skip
