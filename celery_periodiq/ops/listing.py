"""Reading many entries, as the runtime API lists them: every entry (or an owner's)
soonest next run first, a bounded list that reads only what it shows, a walk through
all of them a page at a time, and the newest failed runs across entries. Each runs
inside the caller's :meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from celery_periodiq.model.plan import from_ms
from celery_periodiq.ops.steer import check_owner
from celery_periodiq.store import walk
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import Event, StoredEntry

__all__ = ["FAILURE_KINDS", "failures", "listed", "pages"]

FAILURE_KINDS = frozenset({"failed", "timeboxed"})


def listed(store: Store, owner: str | None, limit: int | None) -> list[StoredEntry]:
    """Every entry (or those of ``owner``), soonest next run first; with ``limit``, only
    that many are read: those due soonest, then others in no particular order."""
    names = None if owner is None else store.owned_by(check_owner(owner))
    if limit is None:
        stored = store.load(names)
    else:
        chosen = store.soonest(limit, names)
        if len(chosen) < limit:
            chosen += _others(store, chosen, limit, names)
        stored = store.load(chosen)
    far = datetime.max.replace(tzinfo=from_ms(0).tzinfo)
    return sorted(stored, key=lambda item: (item.next_run or far, item.name))


def pages(store: Store, owner: str | None, batch: int) -> Iterator[list[StoredEntry]]:
    """Every entry (or those of ``owner``), about ``batch`` at a time, in the order Redis
    scans them: one page of entries is held at a time, never the schedule."""
    names = store.scan(batch) if owner is None else walk.owned_pages(store, owner, batch)
    for page in names:
        yield store.load(page)


def _others(store: Store, chosen: list[str], limit: int, names: list[str] | None) -> list[str]:
    """Up to ``limit - len(chosen)`` more names, not due (paused, ended, ...)."""
    taken, more = set(chosen), []
    pages = [names] if names is not None else store.scan()
    for page in pages:
        more += [name for name in page if name not in taken]
        if len(chosen) + len(more) >= limit:
            break
    return more[: limit - len(chosen)]


def failures(store: Store, limit: int) -> list[tuple[str, Event]]:
    """The newest failed or timeboxed runs across all entries, newest first."""
    found: list[tuple[str, Event]] = []
    for stored in store.load():
        if not any(stored.counters.get(kind) for kind in FAILURE_KINDS):
            continue
        events = store.history(stored.name, limit, failures=True)
        found.extend((stored.name, event) for event in events)
    found.sort(key=lambda pair: (pair[1].at, pair[0]), reverse=True)
    return found[:limit]
