"""Walking a large schedule without holding it: an owner's names a page at a time, and
how many entries an owner has. Each costs what it returns, not the schedule (:meth:`Store.scan
<celery_periodiq.store.reads.Reads.scan>` pages through every name)."""

from __future__ import annotations

from collections.abc import Iterator

from celery_periodiq.store.store import Store

__all__ = ["owned_count", "owned_pages"]


def owned_pages(store: Store, owner: str, batch: int = 500) -> Iterator[list[str]]:
    """The names of the entries tagged with ``owner``, ``batch`` or so at a time,
    partition after partition (``SSCAN``), in no particular order."""
    for part in store.keys.all():
        names: list[str] = []
        for name in store.client.sscan_iter(part.owner(owner), count=batch):
            names.append(name)
            if len(names) >= batch:
                yield names
                names = []
        if names:
            yield names


def owned_count(store: Store, owner: str) -> int:
    """How many entries are tagged with ``owner`` (``SCARD`` per partition)."""
    pipe = store.client.pipeline(transaction=False)
    for part in store.keys.all():
        pipe.scard(part.owner(owner))
    return sum(int(count) for count in pipe.execute())
