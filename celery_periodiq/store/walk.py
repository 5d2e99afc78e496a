"""Walking a large schedule without holding it: an owner's names a page at a time, how
many entries an owner has, a random sample of names, and the quarantined names up to a
bound. Each costs what it returns, not the schedule (:meth:`Store.scan
<celery_periodiq.store.reads.Reads.scan>` pages through every name)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from celery_periodiq.store.reads import in_batches
from celery_periodiq.store.store import Store

__all__ = ["owned_count", "owned_pages", "quarantined_names", "random_names"]


def owned_pages(store: Store, owner: str, batch: int = 500) -> Iterator[list[str]]:
    """The names of the entries tagged with ``owner``, ``batch`` or so at a time,
    partition after partition (``SSCAN``), in no particular order."""
    for part in store.keys.all():
        yield from in_batches(store.client.sscan_iter(part.owner(owner), count=batch), batch)


def owned_count(store: Store, owner: str) -> int:
    """How many entries are tagged with ``owner`` (``SCARD`` per partition)."""
    pipe = store.client.pipeline(transaction=False)
    for part in store.keys.all():
        pipe.scard(part.owner(owner))
    return sum(int(count) for count in pipe.execute())


def random_names(store: Store, count: int) -> list[str]:
    """About ``count`` distinct entry names drawn at random (``HRANDFIELD`` per partition,
    each partition's share in proportion to its size, rounded up); every name when there
    are fewer."""
    parts = store.keys.all()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        pipe.hlen(part.entries)
    sizes = [int(size) for size in pipe.execute()]
    total = sum(sizes)
    if not total:
        return []
    pipe = store.client.pipeline(transaction=False)
    for part, size in zip(parts, sizes, strict=True):
        if size:
            pipe.hrandfield(part.entries, min(size, math.ceil(count * size / total)))
    return [name for drawn in pipe.execute() for name in drawn or ()]


def quarantined_names(store: Store, limit: int) -> list[str]:
    """Up to ``limit`` names of entries a beat quarantined (``HSCAN`` of each partition's
    quarantine hash, stopping at ``limit``)."""
    names: list[str] = []
    for part in store.keys.all():
        for name, _ in store.client.hscan_iter(part.quarantine, count=min(limit, 1000)):
            if len(names) >= limit:
                return names
            names.append(name)
    return names
