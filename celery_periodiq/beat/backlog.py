"""The settlements of a released burst that are not written yet.

A release pushes a whole burst into the queues at once; writing its settlements
(ack.lua, tens of microseconds each in the schedule's Redis) takes seconds for a large
one. Ticks due at the same instant that were not staged (claimed at the instant, a
batch a pass) must not wait behind them: the backlog is written once a pass finds
nothing more due, or once it has waited a quarter of the claims' lease (they must be
settled before the lease ends and another beat may take them over; one that does finds
them released and sends nothing again, but it warns and writes them twice).
"""

from __future__ import annotations

from celery_periodiq.clock import elapsed
from celery_periodiq.protocol.records import Settlement

__all__ = ["PATIENCE", "Backlog"]

PATIENCE = 0.25
"""The share of a lease a released burst's settlements may wait for the ticks due with
it: writing 100,000 takes about 6 s of the schedule's Redis, the rest of a 10 s lease."""


class Backlog:
    """One beat's settlements of released claims (partition index, settlement)."""

    def __init__(self, lease: float) -> None:
        self._patience = lease * PATIENCE
        self._waiting: list[tuple[int, Settlement]] = []
        self._since = 0.0
        """:func:`elapsed` at the release of the oldest settlement waiting."""

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, released: list[tuple[int, Settlement]]) -> None:
        """Keep the settlements of what a release just pushed."""
        if released and not self._waiting:
            self._since = elapsed()
        self._waiting += released

    def take(self, more_due: bool) -> list[tuple[int, Settlement]]:
        """What to write at the end of this pass: nothing while ``more_due`` and the
        oldest may wait, else everything waiting."""
        if more_due and elapsed() - self._since < self._patience:
            return []
        taken, self._waiting = self._waiting, []
        return taken
