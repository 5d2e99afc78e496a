"""A beat's pass runs with Python's cyclic garbage collector paused.

A pass publishing a burst allocates a few tuples, dicts and lists per tick, nearly all
freed by reference counting as it goes. The collector still runs every 700 allocations,
walking the young objects, and now and then every object of the process: time spent
in cache misses more than in instructions (profiles of a burst showed the allocation
sites as hot spots). Paused for a pass, it runs at the first allocation after, on what
is left, which is what it would have found. A pass is bounded (a batch of claims), so
what a pause holds is too.
A process that had turned the collector off keeps it off.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside, unless it is off already."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
