"""Pages of a whole schedule, in name order or by next run, with a search and filters,
each costing about a page of reads, not the schedule.

A page is read one of two ways, whichever reads less:

* **from an index, whole**: when one of the indexes that list every match (the state's
  set, the alert's, the owner's, the names that start with the prefix) holds at most
  :data:`ENUMERATE` names, they are read, tested and sorted, and the page cut from
  them; how many match in all is then known;
* **by walking the order**: the names index (or the due sets, by next run) merged
  across partitions (:mod:`~celery_periodiq.store.lanes`), a batch at a time, each
  batch tested against the filters by the indexes in one pipeline
  (:func:`~celery_periodiq.store.filters.keeps`), until the page is full, or
  ``budget`` names were looked at, or ``deadline`` passed; then the page says how far it
  searched, and its next cursor goes on from there.

By next run, the entries with no next run (paused, disabled, ended, quarantined, or
firing on a cluster event) come after all the others, by name. The entries of a page
are read with :meth:`Store.load <celery_periodiq.store.reads.Reads.load>`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from celery_periodiq.errors import PageError, shown
from celery_periodiq.store.cursor import ORDERS, Cursor, Key, decode, encode
from celery_periodiq.store.filters import Query, Source, ask_members, ask_size, keeps, sources
from celery_periodiq.store.lanes import Lane, by_due, by_name, lex_bounds
from celery_periodiq.store.store import Store
from celery_periodiq.store.summary import ensure_indexed
from celery_periodiq.store.views import StoredEntry

__all__ = ["BUDGET", "ENUMERATE", "LIMIT", "EntryPage", "page"]

LIMIT = 1000
"""The most entries a page holds."""
BUDGET = 100_000
"""The most names a page looks at before it answers with what it found so far ..."""
DEADLINE = 0.2
"""... and the longest it looks (seconds), whichever comes first."""
ENUMERATE = 20_000
"""An index of at most this many names is read whole rather than walking the order."""
_CHUNK = 5000
_SEARCH_CHUNK = 50_000
"""Names read per partition per round by a search over the whole names index."""


@dataclass(frozen=True, slots=True)
class EntryPage:
    """One page of entries, and the cursors of the pages around it."""

    entries: list[StoredEntry]
    next: str | None
    """The cursor of the next page; None when this one is the last."""
    previous: str | None
    """The cursor of the page before; None when this one is the first."""
    total: int
    """How many entries the schedule has."""
    matched: int | None = None
    """How many entries match, when that is known (no filter, or an index read whole)."""
    searched: tuple[int, int] | None = None
    """When the search stopped before the page was full: how many of how many names it
    went through (in its order); ``next`` (or ``previous``) goes on from there."""


Check = Callable[[list[Lane]], list[bool]] | None
Phase = tuple[str, Callable[[], tuple[Iterator[list[Lane]], Check]]]
"""A stretch of the order: its kind (``name``, ``due`` or ``tail``), and what reads it
when it is reached: its lanes merged, in batches, and their test (None: every name
matches)."""


def page(
    store: Store,
    *,
    limit: int = 100,
    cursor: str | None = None,
    q: str | None = None,
    state: str | None = None,
    alert: str | None = None,
    owner: str | None = None,
    sort: str | None = None,
    budget: int = BUDGET,
    deadline: float | None = DEADLINE,
) -> EntryPage:
    """The page of ``store``'s entries that ``cursor`` points to (the first without).

    Args:
        limit: how many entries at most, 1 to :data:`LIMIT`.
        cursor: the ``next`` or ``previous`` of a page.
        q: a search: names that contain it (any case), or with ``text*`` that start with
            ``text``.
        state: active, running, paused, disabled, ended or quarantined.
        alert: overdue or failing.
        owner: an owner tag.
        sort: ``name`` or ``next`` (next run); default the cursor's order, or ``name``.
        budget: how many names to look at, at most, before answering.
        deadline: how long to look, at most (seconds; None: no limit), before
            answering; at least one batch is looked at.

    Raises:
        PageError: a value is invalid, or the cursor is of another order than ``sort``.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT:
        raise PageError(f"limit={shown(limit)} is invalid (allowed: a whole number 1 to {LIMIT})")
    if sort is not None and sort not in ORDERS:
        raise PageError(f"sort={shown(sort)} is invalid (allowed: {', '.join(ORDERS)})")
    query = Query.of(q, state, alert, owner)
    at = decode(cursor) if cursor else Cursor(sort or "name")
    if sort is not None and at.order != sort:
        raise PageError(f"the cursor pages by {at.order}, not by {sort}: drop it, or the sort")
    ensure_indexed(store)
    return _Reader(store, query, at, limit, max(budget, 1), deadline).read()


class _Reader:
    """One page being read."""

    def __init__(
        self,
        store: Store,
        query: Query,
        at: Cursor,
        limit: int,
        budget: int,
        deadline: float | None,
    ) -> None:
        self.store, self.query, self.at = store, query, at
        self.limit, self.budget = limit, budget
        self.until = None if deadline is None else time.monotonic() + deadline
        self.client: Any = store.client
        self.parts = store.keys.all()
        self.now = store.now_ms()
        self.by_next = at.order == "next"
        self.names_total = self.due_total = 0

    def read(self) -> EntryPage:
        own = sources(self.query)
        tail = sources(Query(), tail=True)[0] if self.by_next else None
        sizes = self._census([*own, *([tail] if tail else [])])
        smallest = min(range(len(own)), key=lambda i: sizes[i], default=None)
        if smallest is not None and sizes[smallest] <= ENUMERATE:
            found = self._enumerate(own[smallest], self.query)
            past = [key for key in found if self._past(key)]
            walked = _Walked(past[: self.limit], full=len(past) > self.limit)
            return self._page(walked, len(found))
        matched = self._searched_whole() if self.query.search else None
        if matched is not None:
            found = self._kept(matched, self.query)
            past = [key for key in found if self._past(key)]
            walked = _Walked(past[: self.limit], full=len(past) > self.limit)
            return self._page(walked, len(found))
        small_tail = tail if tail is not None and sizes[-1] <= ENUMERATE else None
        walked = self._collect(self._phases(small_tail))
        return self._page(walked, None if self.query.filtered else self.names_total)

    def _census(self, wanted: list[Source]) -> list[int]:
        """The sizes of the names index, of the due sets and of each source (summed over
        its indexes and the partitions), in one pipeline; the first two are kept."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.parts:
            pipe.zcard(part.names)
            pipe.zcard(part.due)
            for source in wanted:
                for kind, key_of in source:
                    ask_size(pipe, kind, key_of(part), self.now, self.query.prefix)
        replies = iter(pipe.execute())
        sizes = [0] * len(wanted)
        for _ in self.parts:
            self.names_total += int(next(replies))
            self.due_total += int(next(replies))
            for i, source in enumerate(wanted):
                sizes[i] += sum(int(next(replies)) for _ in source)
        return sizes

    def _enumerate(self, source: Source, query: Query, not_due: bool = False) -> list[Lane]:
        """Every match of ``query`` among the members of ``source``'s indexes, in the
        page's direction (with ``not_due``: those with no next run)."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.parts:
            for kind, key_of in source:
                ask_members(pipe, kind, key_of(part), self.now, query.prefix)
        replies = iter(pipe.execute())
        candidates: list[Lane] = []
        for part in self.parts:
            members: set[str] = set()
            for _ in source:
                members.update(next(replies))
            candidates += [(0.0, name, part.index) for name in members]
        return self._kept(candidates, query, not_due)

    def _searched_whole(self) -> list[Lane] | None:
        """The names that contain the search text (any case), read from every
        partition's names index in chunks of 50,000 (the whole index at a million names
        in about 0.2 s: faster than Redis's ``ZSCAN ... MATCH``, which copies every
        member before it matches); None once there are more than :data:`ENUMERATE` of
        them (the page is then walked in order, with a budget)."""
        needle = self.query.search
        after = {part.index: "-" for part in self.parts}
        found: list[Lane] = []
        while after:
            pipe = self.client.pipeline(transaction=False)
            for index, start in after.items():
                names = self.store.keys.part(index).names
                pipe.zrangebylex(names, start, "+", start=0, num=_SEARCH_CHUNK)
            for index, rows in zip(list(after), pipe.execute(), strict=True):
                found += [(0.0, name, index) for name in rows if needle in name.casefold()]
                if len(rows) < _SEARCH_CHUNK:
                    del after[index]
                else:
                    after[index] = "(" + rows[-1]
            if len(found) > ENUMERATE:
                return None
        return found

    def _kept(self, candidates: list[Lane], query: Query, not_due: bool = False) -> list[Lane]:
        """The ``candidates`` that match ``query``, in the page's order."""
        if self.by_next or not_due:
            candidates = self._scored(candidates, listed_only=not_due)
        if not_due:
            candidates = [key for key in candidates if math.isinf(key[0])]
        kept = keeps(self.client, self.store.keys, query, candidates, self.now)
        found = [key for key, keep in zip(candidates, kept, strict=True) if keep]
        return sorted(found, reverse=not self.at.forward)

    def _scored(self, candidates: list[Lane], listed_only: bool) -> list[Lane]:
        """``candidates`` with their next run as their score (infinite: none); with
        ``listed_only``, those not in the names index (what is left of a deleted entry,
        quarantined) left out, as a walk of the names index leaves them out."""
        groups: dict[int, list[Lane]] = {}
        for key in candidates:
            groups.setdefault(key[2], []).append(key)
        pipe = self.client.pipeline(transaction=False)
        for index, group in groups.items():
            names = [name for _, name, _ in group]
            pipe.zmscore(self.parts[index].due, names)
            pipe.zmscore(self.parts[index].names, names)
        replies = iter(pipe.execute() if groups else [])
        scored: list[Lane] = []
        for group in groups.values():
            dues, listed = next(replies), next(replies)
            scored += [
                (math.inf if due is None else float(due), name, part)
                for (_, name, part), due, there in zip(group, dues, listed, strict=True)
                if there is not None or not listed_only
            ]
        return scored

    def _past(self, key: Lane) -> bool:
        """Whether ``key`` lies past the cursor, in its direction."""
        at = self.at.at
        if at is None:
            return True
        return key[:2] > at if self.at.forward else key[:2] < at

    def _phases(self, small_tail: Source | None) -> list[Phase]:
        """The stretches of the order to walk, from the cursor on, in its direction."""
        forward, at = self.at.forward, self.at.at
        if not self.by_next:
            return [("name", lambda: (self._names(at, forward), self._check()))]
        in_tail = at is not None and math.isinf(at[0])
        due: Phase = ("due", lambda: (self._dues(None if in_tail else at, forward), self._check()))
        if self.names_total == self.due_total:  # every entry has a next run
            tails: list[Phase] = []
        else:
            tails = [("tail", lambda: self._tail(small_tail, at if in_tail else None))]
        if forward:
            return tails if in_tail else [due, *tails]
        if in_tail or at is None:
            return [*tails, due]
        return [due]

    def _names(self, at: Key | None, forward: bool, score: float = 0.0) -> Iterator[list[Lane]]:
        name = None if at is None else at[1]
        size = self._size()
        return by_name(self.client, self.parts, name, forward, size, self.query.prefix, score)

    def _dues(self, at: Key | None, forward: bool) -> Iterator[list[Lane]]:
        return by_due(self.client, self.parts, at, forward, self._size())

    def _tail(self, small: Source | None, at: Key | None) -> tuple[Iterator[list[Lane]], Check]:
        """The entries with no next run, past ``at`` (in the tail) or all: read whole
        from ``small``'s indexes when they hold them all, else walked."""
        if small is not None:
            everything = self._enumerate(small, Query(), not_due=True)
            if len(everything) == self.names_total - self.due_total:
                kept = keeps(self.client, self.store.keys, self.query, everything, self.now)
                past = [
                    key
                    for key, keep in zip(everything, kept, strict=True)
                    if keep and (at is None or self._past(key))
                ]
                return iter([past] if past else []), None
        return self._names(at, self.at.forward, math.inf), self._check(not_due=True)

    def _check(self, not_due: bool = False) -> Check:
        if not (self.query.filtered or not_due):
            return None
        client, keys, query, now = self.client, self.store.keys, self.query, self.now
        return lambda lanes: keeps(client, keys, query, lanes, now, not_due)

    def _size(self) -> int:
        """The first read of each lane: its share of the page, or more to filter."""
        share = -(-(self.limit + 1) // len(self.parts)) + 2
        return share if not self.query.filtered else max(share, 2048 // len(self.parts))

    def _collect(self, phases: list[Phase]) -> _Walked:
        """Walk ``phases`` until the page and one more are found (under a test: until
        the page is full), or ``budget`` names were looked at, or the deadline passed."""
        walked = _Walked([])
        for kind, make in phases:
            batches, check = make()
            while True:
                if walked.examined and self._late():  # answer before reading more
                    walked.stopped = kind
                    return walked
                batch = next(batches, None)
                if batch is None:
                    break
                if walked.examined >= self.budget:
                    walked.stopped = kind  # there is more than it could look at
                    return walked
                room = self.budget - walked.examined
                looked = self._take(walked, batch[:room], check)
                if walked.full:
                    return walked
                if looked < len(batch):
                    walked.stopped = kind
                    return walked
        return walked

    def _take(self, walked: _Walked, batch: list[Lane], check: Check) -> int:
        """Look at ``batch`` in order, a growing chunk at a time, until the page is full
        or the deadline passed; how many of its keys it looked at."""
        walked.first = walked.first or batch[0]
        size, start = 256, 0
        while start < len(batch):
            if start and self._late():
                return start
            chunk = batch[start : start + size]
            results = check(chunk) if check is not None else [True] * len(chunk)
            for offset, (key, keep) in enumerate(zip(chunk, results, strict=True)):
                walked.examined += 1
                walked.last = key
                if keep:
                    walked.matches.append(key)
                    # Past a test the page ends full, without looking for one more.
                    if len(walked.matches) > self.limit or (
                        check is not None and len(walked.matches) == self.limit
                    ):
                        walked.full = True
                        return start + offset + 1
            start, size = start + size, min(size * 2, _CHUNK)
        return len(batch)

    def _late(self) -> bool:
        return self.until is not None and time.monotonic() > self.until

    def _page(self, walked: _Walked, matched: int | None) -> EntryPage:
        forward, order, limit = self.at.forward, self.at.order, self.limit
        found = walked.matches[:limit]
        more = walked.full
        if not forward:
            found.reverse()

        def to(ahead: bool, key: Lane | None) -> str:
            return encode(Cursor(order, ahead, None if key is None else key[:2]))

        if walked.stopped:
            beyond: str | None = to(forward, walked.last)
        else:
            beyond = to(forward, found[-1] if forward else found[0]) if more else None
        if self.at.at is None:
            behind = None
        elif found:
            behind = to(not forward, found[0] if forward else found[-1])
        else:
            behind = to(not forward, walked.first)
        names = [name for _, name, _ in found]
        return EntryPage(
            entries=self.store.load(names),
            next=beyond if forward else behind,
            previous=behind if forward else beyond,
            total=self.names_total,
            matched=matched,
            searched=self._searched(walked) if walked.stopped else None,
        )

    def _searched(self, walked: _Walked) -> tuple[int, int]:
        """How far through its order the walk went, and of how many names."""
        assert walked.last is not None
        score, name, _ = walked.last
        forward = self.at.forward
        low, high = lex_bounds(self.query.prefix)
        here = b"[" + name.encode()
        pipe = self.client.pipeline(transaction=False)
        for part in self.parts:
            if walked.stopped == "due":
                text = repr(score)
                pipe.zcount(part.due, *(("-inf", text) if forward else (text, "+inf")))
                pipe.zcard(part.due)
            else:
                pipe.zlexcount(part.names, *((low, here) if forward else (here, high)))
                pipe.zlexcount(part.names, low, high)
        replies = pipe.execute()
        return sum(map(int, replies[0::2])), sum(map(int, replies[1::2]))


@dataclass
class _Walked:
    """What a walk found: the matches (and one more), the first and the last key it
    looked at, how many, the kind of stretch where the budget or the deadline stopped
    it, and whether
    the page is full (there may be more)."""

    matches: list[Lane]
    first: Lane | None = None
    last: Lane | None = None
    examined: int = 0
    stopped: str | None = None
    full: bool = False
