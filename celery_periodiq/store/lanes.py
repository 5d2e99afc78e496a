"""Ordered reads of a whole schedule, a bounded k-way merge of its partitions: names in
name order from each partition's ``names`` index (``ZRANGEBYLEX``), or entries by next
run from each ``due`` set (by rank, ties by name as Redis orders them), forward from a
position or backward before it.

Each partition is a lane, read ``size`` names at a time, and again (twice as many, up
to :data:`_MOST`) only when the merge has taken all it read; the reads of one round go
in one pipeline, across the masters of a Cluster alike. The merge goes a round at a
time: every lane that still has names to read holds a stretch of its order, and what
all of them hold up to the shortest stretch's end is the next batch, in order; so a
page of ``n`` costs about ``n`` names read and a few round trips, not the schedule.

A position is a :data:`~celery_periodiq.store.cursor.Key`; every key a lane yields is
strictly past the position and past the one before (a set that changes between two
reads never makes a lane yield a key twice).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.cursor import Key

__all__ = ["Lane", "by_due", "by_name", "lex_bounds"]

Lane = tuple[float, str, int]
"""A key and the index of its partition: ``(score, name, partition)``."""

_MOST = 5000
"""The most a lane reads at once (it doubles from ``size`` up to this) ..."""
_MOST_ROUND = 40_000
"""... and the most all lanes read in a round (with many partitions, each reads less)."""


def lex_bounds(prefix: str | None) -> tuple[bytes, bytes]:
    """``ZRANGEBYLEX`` bounds of the names that start with ``prefix`` (all, for None):
    a byte 0xff follows no UTF-8 text, so ``(prefix\\xff`` ends them."""
    if not prefix:
        return b"-", b"+"
    return b"[" + prefix.encode(), b"(" + prefix.encode() + b"\xff"


@dataclass
class _LaneReader:
    """One lane: what it asks next (``ask(pipe, size)``), how it reads the reply into
    keys, ascending, and how many members the reply held (``take(reply)``), and what
    it holds."""

    ask: Callable[[Any, int], Any]
    take: Callable[[Any], tuple[list[Lane], int]]
    size: int
    held: list[Lane] = field(default_factory=list)
    done: bool = False


def _rounds(client: Any, lanes: list[_LaneReader], forward: bool) -> Iterator[list[Lane]]:
    """The lanes' keys in order (ascending forward, descending backward), a batch a
    round."""
    most = max(16, min(_MOST, _MOST_ROUND // max(len(lanes), 1)))
    while True:
        # Every lane short of names reads more, all in one round trip: the lanes go on
        # together, and a round is not spent on one lane at a time.
        short = [lane for lane in lanes if not lane.done and len(lane.held) < lane.size // 2]
        if short:
            pipe = client.pipeline(transaction=False)
            for lane in short:
                lane.ask(pipe, lane.size)
            for lane, reply in zip(short, pipe.execute(), strict=True):
                more, read = lane.take(reply)
                lane.done = read < lane.size
                lane.held = lane.held + more if forward else more + lane.held
                lane.size = min(lane.size * 2, most)
        holding = [lane for lane in lanes if lane.held]
        if not holding:
            return
        # What every lane still reading holds is ordered up to the end of the shortest
        # stretch held: the keys of all lanes up to there are the next batch.
        ends = [(lane.held[-1] if forward else lane.held[0]) for lane in holding if not lane.done]
        batch: list[Lane] = []
        for lane in holding:
            if not ends:
                cut = len(lane.held) if forward else 0
            elif forward:
                cut = bisect.bisect_right(lane.held, min(ends))
            else:
                cut = bisect.bisect_left(lane.held, max(ends))
            batch += lane.held[:cut] if forward else lane.held[cut:]
            lane.held = lane.held[cut:] if forward else lane.held[:cut]
        batch.sort(reverse=not forward)
        yield batch


def by_name(
    client: Any,
    parts: list[Partition],
    at: str | None,
    forward: bool,
    size: int,
    prefix: str | None = None,
    score: float = 0.0,
) -> Iterator[list[Lane]]:
    """Every name (starting with ``prefix``) after ``at`` (forward) or before it, each
    as ``(score, name, partition)``, in batches."""
    low, high = lex_bounds(prefix)
    if at is not None:
        past = b"(" + at.encode()
        if forward and (low == b"-" or past[1:] >= low[1:]):
            low = past
        if not forward and (high == b"+" or past[1:] < high[1:]):
            high = past
    return _rounds(
        client, [_lex_lane(part, low, high, forward, size, score) for part in parts], forward
    )


def _lex_lane(
    part: Partition, low: bytes, high: bytes, forward: bool, size: int, score: float
) -> _LaneReader:
    bounds = [low, high]

    def ask(pipe: Any, count: int) -> Any:
        if forward:
            return pipe.zrangebylex(part.names, bounds[0], bounds[1], start=0, num=count)
        return pipe.zrevrangebylex(part.names, bounds[1], bounds[0], start=0, num=count)

    def take(names: list[str]) -> tuple[list[Lane], int]:
        if names:
            bounds[0 if forward else 1] = b"(" + names[-1].encode()
        keys = [(score, name, part.index) for name in names]
        return (keys if forward else keys[::-1]), len(names)

    return _LaneReader(ask, take, size)


def by_due(
    client: Any, parts: list[Partition], at: Key | None, forward: bool, size: int
) -> Iterator[list[Lane]]:
    """Every entry of the due sets, by next run then name, after ``at`` (forward) or
    before it, in batches."""
    starts = _starts(client, parts, at, forward)
    lanes = [
        _due_lane(part, start, at, forward, size) for part, start in zip(parts, starts, strict=True)
    ]
    return _rounds(client, lanes, forward)


def _due_lane(part: Partition, start: int, at: Key | None, forward: bool, size: int) -> _LaneReader:
    state: dict[str, Any] = {"rank": start, "last": at}

    def ask(pipe: Any, count: int) -> Any:
        rank = state["rank"]
        if forward:
            first, last = rank, rank + count - 1
        elif rank < 0:  # backward from before the first member: nothing (ranks 1 to 0)
            first, last = 1, 0
        else:
            first, last = max(0, rank - count + 1), rank
        # Sent as a plain command: redis-py's parsing of scores costs more than Redis's
        # answer (a flat list here, read by _pairs).
        return pipe.execute_command("ZRANGE", part.due, first, last, "WITHSCORES")

    def take(reply: list[Any]) -> tuple[list[Lane], int]:
        rows = _pairs(reply)
        state["rank"] += len(rows) if forward else -len(rows)
        index = part.index
        keys = [(float(score), name, index) for name, score in rows]  # ascending
        last = state["last"]
        if last is not None:  # only what lies past the last key given (ranks may shift)
            if forward:
                keys = keys[bisect.bisect_right(keys, (*last, math.inf)) :]
            else:
                keys = keys[: bisect.bisect_left(keys, (*last, -1))]
        if keys:
            state["last"] = keys[-1][:2] if forward else keys[0][:2]
        return keys, len(rows)

    return _LaneReader(ask, take, size, done=not forward and start < 0)


def _pairs(reply: list[Any]) -> list[tuple[str, Any]]:
    """``(member, score)`` pairs of a ``ZRANGE ... WITHSCORES`` reply: flat (RESP2) or
    in pairs (RESP3)."""
    if reply and isinstance(reply[0], list | tuple):
        return [(str(member), score) for member, score in reply]
    members = iter(reply)
    return list(zip(members, members, strict=True))


def _starts(client: Any, parts: list[Partition], at: Key | None, forward: bool) -> list[int]:
    """The rank each due set is read from: the first key after ``at`` (forward), or the
    last one before it; a binary search by rank among the members tied at ``at``'s score
    when its name is not one of them (one pipeline per step, for every partition)."""
    if at is None and forward:
        return [0] * len(parts)
    pipe = client.pipeline(transaction=False)
    if at is None or math.isinf(at[0]):  # from the end, or after every due entry
        for part in parts:
            pipe.zcard(part.due)
        cards = [int(card) for card in pipe.execute()]
        return cards if forward else [card - 1 for card in cards]
    score, name = at
    text = repr(score)
    for part in parts:
        pipe.zcount(part.due, "-inf", "(" + text)
        pipe.zcount(part.due, "-inf", text)
        pipe.zscore(part.due, name)
        pipe.zrank(part.due, name)
    replies = pipe.execute()
    bounds: list[list[int]] = []
    for index in range(len(parts)):
        below, upto, mine, rank = replies[index * 4 : index * 4 + 4]
        if mine is not None and float(mine) == score and rank is not None:
            bounds.append([int(rank), int(rank) + 1, 1])  # lower, upper, found
        else:
            bounds.append([int(below), int(upto), 0])
    _search_ties(client, parts, bounds, name)
    return [upper if forward else lower - 1 for lower, upper, _ in bounds]


def _search_ties(client: Any, parts: list[Partition], bounds: list[list[int]], name: str) -> None:
    """Narrow each partition's ``[low, high)`` ranks of the members tied at the score to
    the rank of the first member named after ``name`` (the member itself is not there)."""
    while todo := [i for i, (low, high, found) in enumerate(bounds) if not found and low < high]:
        pipe = client.pipeline(transaction=False)
        for i in todo:
            middle = (bounds[i][0] + bounds[i][1]) // 2
            pipe.zrange(parts[i].due, middle, middle)
        for i, members in zip(todo, pipe.execute(), strict=True):
            low, high, _ = bounds[i]
            middle = (low + high) // 2
            if not members or members[0] > name:
                bounds[i][1] = middle
            else:
                bounds[i][0] = middle + 1
    for entry in bounds:
        if not entry[2]:
            entry[1] = entry[0]  # lower == upper: the insertion point
