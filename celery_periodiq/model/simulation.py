"""What a simulation finds: the records :func:`~celery_periodiq.model.simulate.simulate_entry`
returns (each fire and drop of an entry, and the whole span's), the bounds a simulation keeps
within, and the settings it plans with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_SPAN",
    "MOST_LIMIT",
    "MOST_LISTED",
    "MOST_SPAN",
    "Dropped",
    "EntrySimulation",
    "Fire",
    "FireKind",
    "Settings",
    "Simulation",
]

DEFAULT_SPAN = timedelta(hours=24)
"""The span simulated when no end is given."""
MOST_SPAN = timedelta(days=366)
"""The longest span a simulation covers."""
DEFAULT_LIMIT = 1000
"""Fires listed per entry by default; the others are counted."""
MOST_LIMIT = 100_000
"""The most fires a caller may ask to have listed per entry."""
MOST_LISTED = 100_000
"""Fires listed over all entries of one simulation; past it, fires are only counted."""

FireKind = Literal["on_time", "caught_up", "reboot", "shutdown"]


@dataclass(frozen=True, slots=True)
class Fire:
    """One message the beats would publish."""

    kind: FireKind
    """``on_time``; ``caught_up`` (published late: the beats were down, or the tick was
    already overdue at the start); ``reboot``/``shutdown`` (an event entry)."""
    tick: datetime
    """The tick's nominal instant (UTC); for an event entry, when the event happens."""
    due: datetime
    """When the tick is due, its jitter applied (UTC)."""
    sent: datetime
    """When a beat publishes it (UTC): its due instant, or when the beats come back."""
    stands_for: int
    """How many ticks the run stands for (1: just itself; ``catchup="last"`` folds the
    missed ticks into one run)."""
    task_id: str
    """The Celery task id the beat would give it."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """Ticks a claim decided not to publish."""

    at: datetime
    """When the beat decided (UTC): when the beats came back, or the tick's due instant."""
    reason: Literal["missed", "skipped_overlap", "skipped_window", "deferred", "excluded"]
    """``missed``: superseded (``catchup`` last or skip), outside ``catchup_window`` or
    beyond the catch-up cap; ``skipped_overlap``: ``overlap="buffer_one"`` keeps one of a
    catch-up, whatever the runs do; ``skipped_window``: inside a ``skip`` maintenance
    window; ``deferred``: inside a ``defer`` window (its catch-up run, at the window's
    end, stands for them); ``excluded``: on one of the entry's excluded dates."""
    count: int
    first: datetime
    """The oldest of them (UTC)."""
    ticks: tuple[datetime, ...]
    """The newest of them (UTC), up to 20, as the beat's history keeps them (none when
    every one of the newest was published: ``catchup="all"`` past its cap drops the
    oldest)."""


@dataclass(frozen=True, slots=True)
class EntrySimulation:
    """What one entry would do over the simulated span."""

    name: str
    state: str
    """The entry's state now: active, paused, running, quarantined, disabled or ended."""
    tz: str
    """The zone its schedule is read in (UTC when quarantined)."""
    schedule: str | None
    """The schedule as written; None when quarantined."""
    origin: Literal["stored", "definition", "none"]
    """Where its first tick came from: the stored next tick (a simulation from now),
    its definition, or neither (nothing was simulated: see ``reason``)."""
    reason: str | None
    """Why nothing fires, or when an event entry fires; None when ticks fire."""
    fires: tuple[Fire, ...] = ()
    """The fires listed, in order (up to the limit)."""
    more: int = 0
    """Fires beyond those listed."""
    more_exact: bool = True
    """False when ``more`` is a floor (too many to count one by one)."""
    dropped: tuple[Dropped, ...] = ()
    fire_count: int = 0
    """Every fire, listed or not."""
    caught_up_count: int = 0
    """Fires published late (``caught_up``), listed or not."""
    missed_count: int = 0
    """Ticks dropped as missed (and skipped), listed or not."""


@dataclass(frozen=True, slots=True)
class Simulation:
    """What the beats would publish between ``start`` and ``end``."""

    start: datetime
    end: datetime
    down: tuple[datetime, datetime] | None
    """When the beats are down: ticks due inside are claimed when they come back."""
    from_stored: bool
    """True when the simulation starts now from each entry's stored next tick."""
    limit: int
    """Fires listed per entry."""
    entries: tuple[EntrySimulation, ...] = field(default_factory=tuple)

    @property
    def fire_count(self) -> int:
        return sum(item.fire_count for item in self.entries)

    @property
    def caught_up_count(self) -> int:
        return sum(item.caught_up_count for item in self.entries)

    @property
    def missed_count(self) -> int:
        return sum(item.missed_count for item in self.entries)

    @property
    def exact(self) -> bool:
        """False when some entry's count is a floor."""
        return all(item.more_exact for item in self.entries)


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings the beat plans with (``dispatch.py`` passes the same to plan_tick)."""

    prefix: str
    catchup_cap: int
    default_grace: float
