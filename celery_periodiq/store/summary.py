"""What the read side shows of a whole schedule without reading every entry: counts
by status and alert, the run and skip counters summed, and the names that need a look
(overdue, failing, quarantined), from the indexes the scripts keep per partition (see
``keep_indexes`` in ``lua/_common.lua``). A scrape costs a round trip or two and
O(partitions + paused + quarantined + running entries), not O(entries).

A partition whose indexes were never built (a schedule written by an older version)
has them built first (``lua/index.lua``), once.
"""

from __future__ import annotations

import heapq
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.entry_scripts import INDEX_VERSION
from celery_periodiq.store.lost_pauses import lost_pauses
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import _int

__all__ = [
    "Summary",
    "ensure_indexed",
    "first_names",
    "forget_indexes",
    "index_report",
    "reindex",
    "summary",
]

logger = logging.getLogger("celery_periodiq.summary")

STATUSES = ("quarantined", "paused", "running", "disabled", "ended", "active")


@dataclass(frozen=True, slots=True)
class Summary:
    """A whole schedule, counted."""

    total: int
    statuses: dict[str, int]
    """Entries by status (as :attr:`StoredEntry.status <celery_periodiq.store.views.
    StoredEntry.status>` says), those with none left out."""
    counters: dict[str, int]
    """Every entry's counters by reason, summed: enqueued, started, succeeded, ..."""
    overdue: list[str] = field(default_factory=list)
    """Names of the overdue entries, sorted."""
    failing: list[str] = field(default_factory=list)
    """Names of the failing entries, sorted."""
    quarantined: list[str] = field(default_factory=list)
    """Names of the quarantined entries, sorted."""
    stats: dict[str, int] = field(default_factory=dict)
    """The histograms' fields, summed over the partitions (see :meth:`Store.stats`)."""


def ensure_indexed(store: Store) -> int:
    """Build the indexes of every partition that has none of this version; returns how
    many partitions were built."""
    parts = store.keys.all()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        pipe.hget(part.stats, "idx")
    marks = pipe.execute(raise_on_error=False)
    unbuilt = [part for part, mark in zip(parts, marks, strict=True) if mark != INDEX_VERSION]
    for part in unbuilt:
        _build(store, part)
    return len(unbuilt)


def _build(store: Store, part: Partition) -> None:
    indexed, scheduled = store.scripts.index(part)
    logger.info("periodiq: built the read indexes of %s (%d entries)", part.tag, indexed)
    _said_scheduled(scheduled)


def _said_scheduled(names: list[str]) -> None:
    """Warn of the entries :meth:`EntryScripts.index` scheduled again."""
    if names:
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        logger.warning(
            "periodiq: scheduled again %d %s neither due nor in flight "
            "(no beat would have run %s again): %s",
            len(names),
            "entry that was" if len(names) == 1 else "entries that were",
            "it" if len(names) == 1 else "them",
            ", ".join(sorted(names)[:5]) + more,
        )


def forget_indexes(store: Store) -> None:
    """Mark every partition's indexes as not built: the next read builds them afresh."""
    pipe = store.client.pipeline(transaction=False)
    for part in store.keys.all():
        pipe.hdel(part.stats, "idx")
    pipe.execute(raise_on_error=False)


def summary(store: Store) -> Summary:
    """Count the schedule from its indexes (two round trips; a partition whose indexes
    were never built has them built first, then the count is read again)."""
    parts = store.keys.all()
    rows = _rows(store, parts)
    unbuilt = [
        part for part, row in zip(parts, rows, strict=True) if row[9].get("idx") != INDEX_VERSION
    ]
    if unbuilt:  # the marks come with the stats hash: no round trip of their own
        for part in unbuilt:
            _build(store, part)
        rows = _rows(store, parts)
    second = store.client.pipeline(transaction=False)
    for part, row in zip(parts, rows, strict=True):
        _ask_overlaps(second, part, row)
    overlaps = iter(second.execute(raise_on_error=False) if len(second) else [])
    statuses: Counter[str] = Counter()
    counters: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    total = 0
    overdue: list[str] = []
    failing: list[str] = []
    quarantined: list[str] = []
    for row in rows:
        total += row[0]
        statuses.update(_statuses(row, overlaps))
        overdue += row[5]
        failing += row[6]
        quarantined += row[1]
        for key, value in row[9].items():
            if key.startswith("n:"):
                counters[key[2:]] += _int(value)
            elif key != "idx":
                stats[key] += _int(value)
    return Summary(
        total=total,
        statuses={status: n for status, n in statuses.items() if n > 0},
        counters=dict(counters),
        overdue=sorted(overdue),
        failing=sorted(failing),
        quarantined=sorted(quarantined),
        stats=dict(stats),
    )


def _rows(store: Store, parts: list[Partition]) -> list[list[Any]]:
    """Each partition's indexes, as :func:`_statuses` reads them (one round trip)."""
    now = store.now_ms()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        pipe.zcard(part.names)
        pipe.hkeys(part.quarantine)
        pipe.smembers(part.paused)
        pipe.scard(part.disabled)
        pipe.scard(part.ended)
        pipe.zrange(part.overdue, 0, -1)
        pipe.zrange(part.failing, 0, -1)
        pipe.zrangebyscore(part.running, f"({now}", "+inf")
        pipe.hkeys(part.events)
        pipe.hgetall(part.stats)
    replies = pipe.execute(raise_on_error=False)
    width = 10
    return [_clean(replies[i * width : (i + 1) * width]) for i in range(len(parts))]


def _clean(row: list[Any]) -> list[Any]:
    """A partition's replies, with an error (an index of another type: doctor repairs
    it) read as empty."""
    empty: list[Any] = [0, [], set(), 0, 0, [], [], [], [], {}]
    return [empty[i] if isinstance(value, Exception) else value for i, value in enumerate(row)]


def _higher(row: list[Any]) -> set[str]:
    """The names whose status outranks disabled and ended: quarantined, paused, running."""
    return set(row[1]) | set(row[2]) | set(row[7])


def _ask_overlaps(pipe: Any, part: Partition, row: list[Any]) -> None:
    """Queue what :func:`_statuses` needs to know of a partition's overlapping indexes."""
    higher = sorted(_higher(row))
    events = list(row[8])
    if row[3] and higher:
        pipe.smismember(part.disabled, higher)
    if row[4] and higher:
        pipe.smismember(part.ended, higher)
    if row[4] and events:
        pipe.smismember(part.ended, events)
    if row[4] and row[3]:
        # SINTER, not Redis 7.0's SINTERCARD; sent raw: redis-py's cluster pipeline refuses
        # its sinter() though both keys are of one slot
        pipe.execute_command("SINTER", part.ended, part.disabled)
        if events:
            pipe.smismember(part.disabled, events)


def _statuses(row: list[Any], overlaps: Iterable[Any]) -> Counter[str]:
    """A partition's entries by status: each is counted in the first of quarantined >
    paused > running > disabled > ended > active that it is in (ended: not of a cluster
    event), as :func:`~celery_periodiq.store.views._status` ranks them."""
    answers = iter(overlaps)
    total, quarantine, paused, disabled, ended = row[0], set(row[1]), set(row[2]), row[3], row[4]
    running = set(row[7]) - quarantine - paused
    higher = sorted(_higher(row))
    events = list(row[8])

    def next_answer(default: Any) -> Any:
        value = next(answers, default)
        return default if isinstance(value, Exception) else value

    in_disabled = next_answer([0] * len(higher)) if disabled and higher else [0] * len(higher)
    in_ended = next_answer([0] * len(higher)) if ended and higher else [0] * len(higher)
    events_ended = next_answer([0] * len(events)) if ended and events else [0] * len(events)
    both = 0
    events_both = [0] * len(events)
    if ended and disabled:
        both = len(next_answer(()))
        if events:
            events_both = next_answer([0] * len(events))
    counts: Counter[str] = Counter()
    counts["quarantined"] = len(quarantine)
    counts["paused"] = len(paused - quarantine)
    counts["running"] = len(running)
    counts["disabled"] = disabled - sum(1 for flag in in_disabled if flag)
    # ended, not of an event: E' = E - V; minus those of a higher status or disabled
    event_set = {name for name, flag in zip(events, events_ended, strict=True) if flag}
    ended_only = ended - len(event_set)
    high_e = high_ed = 0  # higher ones ended (and disabled), not of an event
    for name, e, d in zip(higher, in_ended, in_disabled, strict=True):
        if e and name not in event_set:
            high_e += 1
            high_ed += 1 if d else 0
    ed = both - sum(
        1 for name, e, d in zip(events, events_ended, events_both, strict=True) if e and d
    )
    counts["ended"] = ended_only - high_e - ed + high_ed
    counts["active"] = total - sum(counts.values())
    return counts


def first_names(store: Store, count: int, skip: set[str]) -> list[str]:
    """The first ``count`` names of the schedule in name order, ``skip`` left out (a
    bounded merge of each partition's names index)."""
    if count <= 0:
        return []
    pipe = store.client.pipeline(transaction=False)
    for part in store.keys.all():
        pipe.zrangebylex(part.names, "-", "+", start=0, num=count + len(skip))
    runs = [reply for reply in pipe.execute(raise_on_error=False) if isinstance(reply, list)]
    chosen: list[str] = []
    for name in heapq.merge(*runs):
        if name not in skip:
            chosen.append(name)
            if len(chosen) == count:
                break
    return chosen


def reindex(store: Store) -> int:
    """Build every partition's indexes afresh (``lua/index.lua``, atomic per partition),
    schedule again the entries no beat would have run (warned of), and wake the beats to
    claim every partition (a timed pause indexed again may have ended, an entry scheduled
    again may be due); returns how many entries were indexed."""
    indexed, scheduled = 0, []
    for part in store.keys.all():
        count, names = store.scripts.index(part)
        indexed += count
        scheduled += names
    _said_scheduled(scheduled)
    store.wake_beats(indexed)
    return indexed


def index_report(store: Store, sample: int | None = None) -> tuple[str, str]:
    """``(status, detail)`` of the indexes: ``warn`` when one holds another type, the
    names index misses entries, the pauses index misses timed pauses (a beat would never
    end them: :mod:`.lost_pauses`, among about ``sample`` of the paused entries; None:
    all) or the audit index misses trails (written by an older version, or outside
    periodiq)."""
    parts = store.keys.all()
    pipe = store.client.pipeline(transaction=False)
    for part in parts:
        pipe.hget(part.stats, "idx")
        pipe.zcard(part.names)
        pipe.hlen(part.entries)
        pipe.hlen(part.audit)
        pipe.zcard(part.audit_newest)
        pipe.scard(part.paused)
        for role, _ in _KINDS:
            pipe.type(getattr(part, role))
    replies = pipe.execute(raise_on_error=False)
    width = 6 + len(_KINDS)
    problems: list[str] = []
    unbuilt = missing = named = unindexed = 0
    paused: list[tuple[Partition, int]] = []
    for index, part in enumerate(parts):
        row = replies[index * width : (index + 1) * width]
        mark, names, entries, trails, held, count, *types = row
        typed = dict(zip((role for role, _ in _KINDS), types, strict=True))
        if isinstance(trails, int):  # an index of another type holds none
            unindexed += max(trails - (held if isinstance(held, int) else 0), 0)
        if isinstance(count, int) and typed["pauses"] in ("none", "zset"):
            paused.append((part, count))
        if isinstance(mark, Exception) or isinstance(names, Exception):
            problems.append(f"{part.stats} or {part.names} cannot be read")
            continue
        if mark != INDEX_VERSION:
            unbuilt += 1
            continue
        named += int(names)
        missing += max(int(entries if isinstance(entries, int) else 0) - int(names), 0)
        for (role, kind), found in zip(_KINDS, types, strict=True):
            if found not in ("none", kind):
                problems.append(f"{getattr(part, role)} holds a {found}, not a {kind}")
    if missing:
        problems.append(f"the names index misses {missing} entries")
    said = []
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        said.append("; ".join(problems[:3]) + more + ": counts and pages may be wrong")
    lost = lost_pauses(store, paused, sample).said()
    if lost:
        said.append(lost)
    if unindexed:  # nothing is missed: the audit reads their partitions whole
        said.append(
            f"the audit index misses {unindexed} trails: the whole schedule's audit "
            "reads every trail of their partitions"
        )
    if said:
        return "warn", "; ".join(said) + " (doctor --reindex rebuilds them)"
    built = len(parts) - unbuilt
    later = f"; {unbuilt} built at the first read" if unbuilt else ""
    return "ok", f"read indexes of {built} partitions hold {named} names{later}"


_KINDS = (
    ("names", "zset"),
    ("paused", "set"),
    ("disabled", "set"),
    ("ended", "set"),
    ("overdue", "zset"),
    ("failing", "zset"),
    ("running", "zset"),
    ("pauses", "zset"),
)
