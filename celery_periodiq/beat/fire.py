"""The ``@reboot`` and ``@shutdown`` entries: sent when the first beat of a schedule
starts and when its last beat stops, outside the claims of the pass."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import Celery

from celery_periodiq.beat.publish import send
from celery_periodiq.errors import MessageError
from celery_periodiq.model.plan import Tick, from_ms, tick_text
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.store import Store

__all__ = ["fire_events"]

logger = logging.getLogger("celery_periodiq.dispatch")


def fire_events(app: Celery, store: Store, event: str, done: set[str] | None = None) -> list[str]:
    """Publish every enabled, unpaused ``@reboot``/``@shutdown`` entry not in ``done``.

    Each name sent is added to ``done`` at once, so after a broker failure a
    second call sends only the rest. An entry whose message cannot be encoded is
    logged and left out. Returns the names sent by this call.

    Raises:
        BrokerUnavailableError: the broker failed.
        redis.RedisError: the schedule's Redis failed.
    """
    done = set() if done is None else done
    fired = []
    now_ms = store.now_ms()
    for stored in store.load(store.event_entries(event)):
        entry = stored.entry
        if entry is None or stored.invalid or stored.paused or not entry.enabled:
            continue
        schedule = entry.parsed_schedule()
        if entry.name in done or not isinstance(schedule, EventSchedule):
            continue
        if schedule.event != event:
            continue
        now = from_ms(now_ms)
        tick = Tick(
            nominal=now,
            missed=1,
            interval=0.0,
            gap_before=0.0,
            expires=now + timedelta(hours=1),
            soft_time_limit=None,
            time_limit=None,
            task_id=task_id_for(store.settings.key_prefix, entry.name, now_ms),
        )
        try:
            send(app, entry, tick, sent_at_ms=now_ms)
        except MessageError as error:  # its own: the others are sent
            logger.error("periodiq: entry %r not sent on @%s: %s", entry.name, event, error)
            continue
        done.add(entry.name)
        store.published(entry.name, "enqueued", tick.task_id, now_ms, f"@{event}")
        logger.info(
            "periodiq: entry %r tick %s sent on @%s as %s",
            entry.name,
            tick_text(now_ms),
            event,
            tick.task_id,
        )
        fired.append(entry.name)
    return fired
