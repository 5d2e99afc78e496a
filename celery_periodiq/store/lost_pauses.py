"""Timed pauses their partition's ``pauses`` index lacks.

A timed pause is ended by the first beat pass at its end, which finds it in the index
(``lua/claim.lua``); one the index lacks (damaged, or written outside periodiq) would
stay paused for ever, and nothing else would say so. ``doctor``'s indexes check counts
them, among a sample of the paused entries on a large schedule (so that it answers in
about a second at any size), and ``lua/index.lua`` (``doctor --reindex``) adds them back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import _ms, _state

__all__ = ["LostPauses", "lost_pauses"]

_CHUNK = 1_000
"""States read a command: no long command on a schedule with many paused."""


@dataclass(frozen=True, slots=True)
class LostPauses:
    """What a look at the paused entries found."""

    lost: int
    """Entries paused until an instant that the index lacks, among those checked."""
    checked: int
    """Paused entries looked at."""
    paused: int
    """Paused entries in all."""

    def said(self) -> str:
        """The finding, or "" when nothing was lost."""
        if not self.lost:
            return ""
        pauses = "pause: it" if self.lost == 1 else "pauses: they"
        said = f"the pauses index misses {self.lost:,} timed {pauses} would never end"
        if self.checked < self.paused:
            said += f" (in a sample of {self.checked:,} of {self.paused:,} paused entries)"
        return said


def lost_pauses(
    store: Store, counted: Sequence[tuple[Partition, int]], sample: int | None
) -> LostPauses:
    """Look at the paused entries of ``counted`` (each partition with how many its
    ``paused`` set holds): all of them, or about ``sample`` drawn at random in proportion
    to each partition's share when there are more. Two round trips."""
    paused = sum(count for _, count in counted)
    share = 1.0 if sample is None or paused <= sample else sample / paused
    pipe = store.client.pipeline(transaction=False)
    asked = [(part, count) for part, count in counted if count > 0]
    for part, count in asked:
        if share < 1:
            pipe.srandmember(part.paused, max(math.floor(count * share), 1))
        else:
            pipe.smembers(part.paused)
    drawn = pipe.execute(raise_on_error=False) if asked else []
    pipe = store.client.pipeline(transaction=False)
    groups = []
    for (part, _), names in zip(asked, drawn, strict=True):
        chosen = sorted(names) if isinstance(names, set | list) else []
        for first in range(0, len(chosen), _CHUNK):
            group = chosen[first : first + _CHUNK]
            pipe.hmget(part.state, group)
            pipe.zmscore(part.pauses, group)
            groups.append(group)
    replies = pipe.execute(raise_on_error=False) if groups else []
    lost = checked = 0
    for index, group in enumerate(groups):
        states, scores = replies[2 * index : 2 * index + 2]
        if not (isinstance(states, list) and isinstance(scores, list)):
            continue  # a key of another type: the types check names it
        checked += len(group)
        for raw, score in zip(states, scores, strict=True):
            state = _state(raw)
            if score is None and state.get("paused") == "1" and _ms(state.get("until")):
                lost += 1
    return LostPauses(lost, checked, paused)
