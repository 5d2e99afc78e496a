"""Alert transitions sent by the beats: each once per cluster.

The scripts decide the transitions on the Redis clock (ack.lua: overdue; finish.lua:
failing, recovered) and push each onto its partition's alerts list. A beat takes
from those lists of the partitions it watches (alerts.lua: whichever beat takes an
item is the only one to have it, for a lease), sends each as one message to
``periodiq_alert_task``, routed like any task (without that setting it logs them),
then says they were sent. An item whose lease ran out, because its beat stopped or
lost a reply of Redis, is taken again by the next beat that asks: a transition is
sent at least once, and twice only after such a fault (the same payload again).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import redis
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

    def send(self, parts: list[Partition], now_ms: int | None = None) -> int:
        """Take and send (or log) the pending transitions of ``parts``; returns how many.
        When a message cannot be sent, those sent before it are said sent, every other
        transition taken goes back to the front of its own partition's list, in order,
        and the error is raised. ``now_ms`` replaces the Redis clock (tests).

        Raises:
            redis.RedisError: Redis failed (what was taken and not said sent is taken
                again after the lease).
        """
        lease_ms = int(self.store.settings.claim_lease * 1000)
        # A partition whose take failed (a Cluster node down) does not stop the others'
        # from being sent: what they took is only theirs now.
        replies = self.store.scripts.take_alerts(parts, _BATCH, lease_ms, now_ms)
        taken = [
            (part, items)
            for part, items in zip(parts, replies, strict=True)
            if not isinstance(items, Exception)
        ]
        failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
        sent = 0
        for number, (part, items) in enumerate(taken):
            for position, raw in enumerate(items):
                message = payload(raw, self.store.keys.prefix)
                if message is None:
                    logger.warning("periodiq: an unreadable alert was dropped: %r", raw)
                    continue
                try:
                    self._deliver(message)
                except Exception:
                    before, after = taken[:number], taken[number + 1 :]
                    self._settle(
                        [*before, (part, items[:position])], [(part, items[position:]), *after]
                    )
                    raise
                sent += 1
        self.store.scripts.alerts_done(taken)
        if failed is not None:
            raise failed
        return sent

    def _settle(
        self, sent: list[tuple[Partition, list[str]]], unsent: list[tuple[Partition, list[str]]]
    ) -> None:
        """After a message failed: say what was sent, put the rest back first in line. If
        Redis fails too, what was taken is taken again after its lease (nothing lost)."""
        with contextlib.suppress(redis.RedisError):
            self.store.scripts.alerts_done(sent)
        with contextlib.suppress(redis.RedisError):
            self.store.scripts.alerts_done(unsent, back=True)

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
