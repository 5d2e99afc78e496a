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

from celery_periodiq.model.plan import from_ms
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.store import Store

__all__ = ["Alerts", "payload"]

logger = logging.getLogger("celery_periodiq.alerts")

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
        When a message cannot be sent, every transition popped and not sent goes back to
        the front of its own partition's list, in order, and the error is raised.

        Raises:
            redis.RedisError: Redis failed (popped and not sent: pushed back, see above).
        """
        # A partition whose pop failed (a Cluster node down) does not stop the others'
        # from being sent: what they popped is only theirs now.
        replies = self.store.pop_alerts(parts, _BATCH)
        popped = [
            (part, items)
            for part, items in zip(parts, replies, strict=True)
            if not isinstance(items, Exception)
        ]
        failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
        sent = 0
        for number, (part, items) in enumerate(popped):
            for position, raw in enumerate(items):
                message = payload(raw, self.store.keys.prefix)
                if message is None:
                    logger.warning("periodiq: an unreadable alert was dropped: %r", raw)
                    continue
                try:
                    self._deliver(message)
                except Exception:
                    self.store.push_alerts_back([(part, items[position:]), *popped[number + 1 :]])
                    raise
                sent += 1
        if failed is not None:
            raise failed
        return sent

    def _deliver(self, message: dict[str, Any]) -> None:
        if self.task is not None:
            self.app.send_task(self.task, args=[message])
            return
        level = logging.INFO if message["transition"] == "recovered" else logging.WARNING
        logger.log(
            level,
            "periodiq: entry %r is %s: %s (set periodiq_alert_task to be told)",
            message["entry"],
            message["transition"],
            message["note"],
        )
