"""Ending timed pauses: a claim lists the entries whose pause came to its end
(``lua/claim.lua``), and the beat that claimed resumes each from its next tick after the
end, not after now: when no beat ran at the end, the ticks missed since follow the
entry's catch-up policy, as any ticks missed while no beat ran do.
"""

from __future__ import annotations

import logging

import redis

from celery_periodiq.model.plan import from_ms, next_tick_ms
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.store.store import Store

__all__ = ["end_pauses"]

logger = logging.getLogger(__name__)


def end_pauses(store: Store, names: list[str], by_ms: int, beat_id: str = "") -> list[str]:
    """Resume the entries of ``names`` whose timed pause ended by ``by_ms`` (the claim's
    clock and horizon), each recorded in its audit trail as resumed by ``beat_id``;
    returns those resumed.

    Each resume names the end it read, so a pause changed meanwhile (resumed, paused
    again: its new end is listed in its turn) is left as it is; one that fails here is
    listed again a claim lease later."""
    resumed = []
    audit = store.audit_argument(Audit(beat_id, "beat", "its timed pause ended"))
    try:
        loaded = store.load(names)
        for name in set(names) - {item.name for item in loaded}:
            store.scripts.resume(name, None, None, ended_ms=-1)  # gone: drops its end
        for item in loaded:
            until = item.state.get("until")
            if not item.paused or not until:
                store.scripts.resume(item.name, None, None, ended_ms=-1)  # drops the end
                continue
            if int(until) > by_ms:
                continue  # paused again since the claim, until later
            # a quarantined entry is resumed with no next tick (update repairs it)
            upcoming = None
            if item.entry is not None:
                upcoming = next_tick_ms(item.entry, from_ms(int(until)))
            next_ms, due_ms = (None, None) if upcoming is None else upcoming
            ended = int(until)
            if store.scripts.resume(item.name, next_ms, due_ms, ended, audit=audit) == "ok":
                resumed.append(item.name)
    except redis.RedisError as error:
        logger.warning("periodiq: timed pauses of %s not ended yet (%s)", names, error)
    if resumed:
        logger.info("periodiq: timed pauses ended, resumed: %s", resumed)
    return resumed
