"""Ordered reads of a whole schedule, a bounded k-way merge of its partitions: names in
name order from each partition's ``names`` index (``ZRANGEBYLEX``), or entries by next
run from each ``due`` set (by rank, ties by name as Redis orders them), forward from a
position or backward before it.

Each partition is a lane read ``size`` names at a time (the first reads of all lanes in
one pipeline, across the masters of a Cluster alike), and read again only when the merge
has taken all it read; :func:`heapq.merge` takes from the lanes in order, so a page of
``n`` costs about ``n`` names read, not the schedule. A position is a
:data:`~celery_periodiq.store.cursor.Key`; every key a lane yields is strictly past the
position and past the one before (a set that changes between two reads never makes a
lane yield a key twice).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from typing import Any

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.cursor import Key

__all__ = ["Lane", "by_due", "by_name", "lex_bounds", "merged"]

Lane = tuple[float, str, int]
"""A key and the index of its partition: ``(score, name, partition)``."""

_MOST = 5000
"""The most a lane reads at once (it doubles from ``size`` up to this)."""


def lex_bounds(prefix: str | None) -> tuple[bytes, bytes]:
    """``ZRANGEBYLEX`` bounds of the names that start with ``prefix`` (all, for None):
    a byte 0xff follows no UTF-8 text, so ``(prefix\\xff`` ends them."""
    if not prefix:
        return b"-", b"+"
    return b"[" + prefix.encode(), b"(" + prefix.encode() + b"\xff"


def merged(lanes: list[Iterator[Lane]], forward: bool) -> Iterator[Lane]:
    """The lanes' keys in one order (ascending forward, descending backward)."""
    return heapq.merge(*lanes, reverse=not forward)


def by_name(
    client: Any,
    parts: list[Partition],
    at: str | None,
    forward: bool,
    size: int,
    prefix: str | None = None,
    score: float = 0.0,
) -> Iterator[Lane]:
    """Every name (starting with ``prefix``) after ``at`` (forward) or before it, each
    as ``(score, name, partition)``."""
    low, high = lex_bounds(prefix)
    if at is not None:
        past = b"(" + at.encode()
        if forward and (low == b"-" or past[1:] >= low[1:]):
            low = past
        if not forward and (high == b"+" or past[1:] < high[1:]):
            high = past
    pipe = client.pipeline(transaction=False)
    for part in parts:
        _lex(pipe, part.names, low, high, forward, size)
    firsts = pipe.execute()
    lanes = [
        _lex_lane(client, part, first, low, high, forward, size, score)
        for part, first in zip(parts, firsts, strict=True)
    ]
    return merged(lanes, forward)


def _lex(pipe: Any, key: str, low: bytes, high: bytes, forward: bool, size: int) -> Any:
    if forward:
        return pipe.zrangebylex(key, low, high, start=0, num=size)
    return pipe.zrevrangebylex(key, high, low, start=0, num=size)


def _lex_lane(
    client: Any,
    part: Partition,
    names: list[str],
    low: bytes,
    high: bytes,
    forward: bool,
    size: int,
    score: float,
) -> Iterator[Lane]:
    while True:
        for name in names:
            yield score, name, part.index
        if len(names) < size:
            return
        past = b"(" + names[-1].encode()
        low, high = (past, high) if forward else (low, past)
        size = min(size * 2, _MOST)
        names = _lex(client, part.names, low, high, forward, size)


def by_due(
    client: Any, parts: list[Partition], at: Key | None, forward: bool, size: int
) -> Iterator[Lane]:
    """Every entry of the due sets, by next run then name, after ``at`` (forward) or
    before it."""
    starts = _starts(client, parts, at, forward)
    pipe = client.pipeline(transaction=False)
    for part, start in zip(parts, starts, strict=True):
        if start >= 0:  # backward from before a set's first member: nothing to read
            _ranks(pipe, part.due, start, forward, size)
    replies = iter(pipe.execute() if len(pipe) else [])
    firsts = [next(replies) if start >= 0 else [] for start in starts]
    lanes = [
        _due_lane(client, part, start, first, at, forward, size)
        for part, start, first in zip(parts, starts, firsts, strict=True)
    ]
    return merged(lanes, forward)


def _ranks(pipe: Any, key: str, start: int, forward: bool, size: int) -> Any:
    """Up to ``size`` members with scores from rank ``start`` on (forward), or down to it."""
    if forward:
        return pipe.zrange(key, start, start + size - 1, withscores=True)
    return pipe.zrange(key, max(0, start - size + 1), start, withscores=True)


def _due_lane(
    client: Any,
    part: Partition,
    start: int,
    rows: list[tuple[str, float]],
    at: Key | None,
    forward: bool,
    size: int,
) -> Iterator[Lane]:
    last = at
    while True:
        ordered = rows if forward else rows[::-1]
        for name, score in ordered:
            key = (float(score), name)
            if last is None or (key > last if forward else key < last):
                last = key
                yield key[0], name, part.index
        if len(rows) < size:
            return
        start = start + len(rows) if forward else start - len(rows)
        if start < 0:
            return
        size = min(size * 2, _MOST)
        rows = _ranks(client, part.due, start, forward, size)


def _starts(client: Any, parts: list[Partition], at: Key | None, forward: bool) -> list[int]:
    """The rank each due set is read from: the first key after ``at`` (forward), or the
    last one before it; a binary search by rank among the members tied at ``at``'s score
    when its name is not one of them (one pipeline per step, for every partition)."""
    if at is None and forward:
        return [0] * len(parts)
    pipe = client.pipeline(transaction=False)
    if at is None:
        for part in parts:
            pipe.zcard(part.due)
        return [int(card) - 1 for card in pipe.execute()]
    score, name = at
    if math.isinf(score):  # after every due entry, or before the end of them
        for part in parts:
            pipe.zcard(part.due)
        cards = [int(card) for card in pipe.execute()]
        return cards if forward else [card - 1 for card in cards]
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
