"""Entries no beat will ever run again: neither due nor in flight.

Every script keeps an entry that should run (enabled, clock-driven, not quarantined,
paused or ended) either in its partition's due set or, while a beat holds its tick, in
flight. Damaged data, a write from outside periodiq or a bug can leave one in neither:
it would never run again, and its status would still say "active". ``doctor``'s
"due" check finds them (:func:`unscheduled`), and the keys that would stop a whole
partition (:func:`claim_keys_report`); ``lua/index.lua`` (``doctor --reindex``)
repairs both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from celery_periodiq.schedules import EventSchedule
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import StoredEntry, _state

__all__ = ["claim_keys_report", "looks_unscheduled", "unscheduled"]

_CLAIM_KEYS = (("due", "zset"), ("inflight", "zset"), ("ticks", "hash"))
"""The keys a partition's ticks are claimed through, with their types."""


def looks_unscheduled(item: StoredEntry) -> bool:
    """Whether ``item``, as read, should be due but is not in the due set: an entry in
    flight looks so too, until :func:`unscheduled` reads its partition again."""
    entry = item.entry
    if entry is None or item.invalid or item.paused or item.due is not None:
        return False
    if not entry.enabled or isinstance(entry.parsed_schedule(), EventSchedule):
        return False
    return item.state.get("next") != ""  # "": it has ended (no state: rebuilt when due)


def unscheduled(store: Store, found: Iterable[StoredEntry]) -> list[str]:
    """The names of ``found`` (entries that :func:`looks_unscheduled`) that are neither due
    nor in flight, their definition unchanged and still not quarantined, paused or ended,
    in one atomic read (MULTI) of each of their partitions. A claim in flight is looked up
    by its id (``name@next``, as claim.lua makes it); only a partition with an entry whose
    state has no readable next tick (claimed by its due instant) has all of its ticks'
    ids read. A partition whose keys cannot
    be read (another type) is left out: the indexes check names such keys."""
    by_part: dict[str, list[StoredEntry]] = defaultdict(list)
    for item in found:
        by_part[store.keys.of(item.name).tag].append(item)
    lost: list[str] = []
    for items in by_part.values():
        part = store.keys.of(items[0].name)
        names = [item.name for item in items]
        nexts = [item.state.get("next") for item in items]
        pipe = store.client.pipeline(transaction=True)
        pipe.zmscore(part.due, names)
        pipe.hmget(part.entries, names)
        pipe.hmget(part.state, names)
        pipe.hmget(part.quarantine, names)
        pipe.hmget(part.ticks, [f"{name}@{at}" for name, at in zip(names, nexts, strict=True)])
        if any(at is None or not at.isdigit() for at in nexts):  # claimed by its due instant
            pipe.hkeys(part.ticks)
        replies = pipe.execute(raise_on_error=False)
        if any(isinstance(reply, Exception) for reply in replies):
            continue
        scores, definitions, states, reasons, claims, *every = replies
        flying = {str(tick).rpartition("@")[0] for tick in every[0]} if every else set()
        for k, item in enumerate(items):
            state = _state(states[k])
            if (
                scores[k] is None
                and reasons[k] is None
                and claims[k] is None
                and item.name not in flying
                and definitions[k] == item.definition
                and state.get("paused") != "1"
                and _text(state.get("next")) == nexts[k]  # else a beat settled it meanwhile
            ):
                lost.append(item.name)
    return sorted(lost)


def _text(value: object) -> str | None:
    """A state field as :attr:`StoredEntry.state` holds it."""
    return None if value is None else str(value)


def claim_keys_report(store: Store) -> list[str]:
    """What stops the ticks of a whole partition: its due set, in-flight set or ticks
    holding another type (every claim there fails), or ticks in flight that the in-flight
    set lacks (no beat would look at them again, nor run their entries). One round trip."""
    parts = store.keys.all()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        for role, _ in _CLAIM_KEYS:
            pipe.type(getattr(part, role))
        pipe.hlen(part.ticks)
        pipe.zcard(part.inflight)
    replies = pipe.execute(raise_on_error=False)
    width = len(_CLAIM_KEYS) + 2
    said: list[str] = []
    orphans = 0
    for index, part in enumerate(parts):
        *types, ticks, watched = replies[index * width : (index + 1) * width]
        for (role, kind), found in zip(_CLAIM_KEYS, types, strict=True):
            if found not in ("none", kind):
                said.append(
                    f"{getattr(part, role)} holds a {found}, not a {kind}: no tick of its "
                    "partition can be claimed"
                )
        if isinstance(ticks, int) and isinstance(watched, int) and ticks > watched:
            orphans += ticks - watched
    if orphans:
        noun = "tick is" if orphans == 1 else "ticks are"
        said.append(
            f"at least {orphans} {noun} in flight but not in the in-flight set: no beat "
            "would look at them again, nor run their entries"
        )
    return said
