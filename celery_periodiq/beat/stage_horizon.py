"""How far ahead a beat claims a burst to stage it (see staging.py).

Enough to claim, plan, render and stage the ticks due within ``periodiq_stage_horizon``
before the first of them is due, when there are ``periodiq_stage_min`` of them: the
count of the due sets, read once a second, times what a tick cost this beat the last
time it staged (measured), times a margin. A burst is claimed ahead whole: the ticks
claimed leave the due sets, so as a burst is staged its count falls, but the moment the
horizon once reached holds while ticks due by then are left to claim (the tail of a
burst was claimed only 2 s ahead, or at its instant once fewer than
``periodiq_stage_min`` were left: sent the usual way, after the release). Once all are
claimed it lets go: a beat claiming ahead polls the partitions it holds claims in.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from celery_periodiq.clock import elapsed
from celery_periodiq.config import Settings
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.store import Store

__all__ = ["Horizon"]

# What a tick costs to stage (s), until measured; the horizon is this many times what
# the ticks due would take, and at least _LEAST.
_COST = 300e-6
_SAFETY = 3.0
_LEAST = 2.0
_COUNT_EVERY = 1.0  # how often the due sets are counted (s)


class Horizon:
    """One beat's staging horizon."""

    def __init__(
        self, store: Store, settings: Settings, clock: Callable[[], float] = elapsed
    ) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        """``elapsed()``, or a test's clock."""
        self.cost = _COST
        """Seconds a tick took to stage, the last time this beat staged."""
        self._counted = (-math.inf, 0)
        """``elapsed()`` of the last count, and the horizon it gave (ms)."""
        self._reach = -math.inf
        """The Redis clock (ms) the horizon has reached: claimed ahead up to it while ticks
        due by then are left to claim."""

    def ms(self, parts: list[Partition], estimate_ms: float) -> int:
        """How far ahead to claim now (ms; 0: not at all), for ``parts`` at the Redis
        clock ``estimate_ms``."""
        most = self.settings.stage_horizon
        if not most or not parts or math.isinf(estimate_ms):
            return 0
        at, horizon = self._counted
        if self._clock() - at < _COUNT_EVERY:
            return horizon
        due = self.store.due_by(parts, int(estimate_ms + most * 1000))
        horizon = 0
        if due >= self.settings.stage_min:
            horizon = int(min(most, max(_LEAST, due * self.cost * _SAFETY)) * 1000)
        # (counted again only when the count's horizon falls short of the reach)
        short = self._reach - estimate_ms - horizon
        if short > 0 and self.store.due_by(parts, int(self._reach)):
            horizon = math.ceil(self._reach - estimate_ms)
        self._reach = max(self._reach, estimate_ms + horizon)
        self._counted = (self._clock(), horizon)
        return horizon

    def measured(self, seconds: float, ticks: int) -> None:
        """Staging ``ticks`` took ``seconds``."""
        if ticks:
            self.cost = max(seconds / ticks, 20e-6)
