"""Count what became of every tick the demo watched: pure functions, no I/O.

For each entry the demo knows the window in which beats were alive and the
entry existed. Every tick the schedule puts in that window is **due**. A due
tick is then, in this order:

- **executed**: the task's body began for it (the task's own audit record);
  a tick whose body began more than once is a **duplicate**;
- **dropped or skipped by policy**: celery_periodiq's history says why it did
  not run: ``missed`` (catch-up policy), ``skipped_overlap`` (an earlier run
  was unfinished), ``dropped_too_soon`` (tolerance), or the task's audit
  says its message ``expired`` (it reached a worker after the next tick);
- otherwise **lost**.

Manual runs (``trigger()``) have no tick and are counted apart. Messages the
worker refused because their tick had already begun (``duplicate`` events, a
re-published tick after a beat died) are counted too: each is a duplicate
that was prevented, not one that ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from celery_periodiq import Schedule

__all__ = ["POLICY_REASONS", "Tally", "Window", "due_ticks", "tally"]

POLICY_REASONS = ("missed", "skipped_overlap", "dropped_too_soon", "expired")
"""Why a due tick did not run, as named in the history (and ``expired`` by the audit)."""


@dataclass(frozen=True)
class Window:
    """An entry's watched span: ticks due after ``start_ms`` up to ``end_ms`` count."""

    start_ms: int
    end_ms: int


@dataclass
class Tally:
    """What became of one entry's due ticks."""

    entry: str
    due: int = 0
    executed: int = 0
    duplicates: int = 0
    """Ticks whose body began more than once (each extra start counts)."""
    manual: int = 0
    refused_duplicates: int = 0
    """Re-sent messages the worker dropped because their tick had already begun."""
    reasons: Counter[str] = field(default_factory=Counter)
    lost: list[int] = field(default_factory=list)
    """Nominal instants (ms) of the lost ticks."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "entry": self.entry,
            "due": self.due,
            "executed": self.executed,
            "duplicates": self.duplicates,
            "manual": self.manual,
            "refused_duplicates": self.refused_duplicates,
            "reasons": dict(self.reasons),
            "lost": self.lost,
        }


def _ms(instant: datetime) -> int:
    return round(instant.timestamp() * 1000)


def due_ticks(schedule: Schedule, window: Window) -> list[int]:
    """The schedule's fires in the window, as milliseconds since the epoch."""
    ticks: list[int] = []
    current = datetime.fromtimestamp(window.start_ms / 1000, UTC)
    while True:
        following = schedule.next_after(current)
        if following is None or _ms(following) > window.end_ms:
            return ticks
        ticks.append(_ms(following))
        current = following


def tally(
    entry: str,
    schedule: Schedule,
    window: Window,
    records: Iterable[dict[str, Any]],
    events: Iterable[tuple[str, int | None]],
) -> Tally:
    """Account for every due tick of ``entry``.

    Args:
        entry: the entry name.
        schedule: its schedule.
        window: the span in which its ticks were due.
        records: the tasks' audit records (all entries; ``kind`` ran or expired).
        events: the entry's history as ``(kind, tick_ms)`` pairs.
    """
    result = Tally(entry)
    starts: Counter[int] = Counter()
    why: dict[int, set[str]] = {}
    for record in records:
        if record.get("entry") != entry:
            continue
        kind, tick = record.get("kind"), record.get("tick")
        if kind == "ran" and record.get("manual"):
            result.manual += 1
        elif kind == "ran" and tick is not None:
            starts[int(tick)] += 1
        elif kind == "expired" and tick is not None:
            why.setdefault(int(tick), set()).add("expired")
    for kind, tick in events:
        if kind == "duplicate":
            result.refused_duplicates += 1
        if kind in POLICY_REASONS and tick is not None:
            why.setdefault(tick, set()).add(kind)
    result.duplicates = sum(count - 1 for count in starts.values() if count > 1)
    for tick in due_ticks(schedule, window):
        result.due += 1
        if starts[tick]:
            result.executed += 1
            continue
        reason = next((r for r in POLICY_REASONS if r in why.get(tick, ())), None)
        if reason is None:
            result.lost.append(tick)
        else:
            result.reasons[reason] += 1
    return result
