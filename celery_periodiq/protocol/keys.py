"""Every Redis key name, built from one prefix.

A schedule is spread over P partitions by a stable hash of each entry's name. A
partition's keys share one hash tag, ``{prefix:p}``, so a Redis Cluster spreads the
partitions over its masters while every Lua script touches keys of one slot, all
of them passed in KEYS. The few keys of the whole schedule (the beats' registry,
the layout) live under ``{prefix}``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

__all__ = ["LAYOUT", "Keys", "Partition", "partition_of"]

LAYOUT = "2"
"""The key layout this version writes; a schedule written in another one is refused."""


def partition_of(name: str, partitions: int) -> int:
    """The partition of an entry: a stable hash of its name (CRC-32), the same everywhere."""
    return zlib.crc32(name.encode("utf-8")) % partitions


@dataclass(frozen=True, slots=True)
class Partition:
    """The keys of one partition, all under the hash tag ``{prefix:index}``."""

    index: int
    tag: str

    @property
    def entries(self) -> str:
        """hash: entry name -> definition JSON."""
        return f"{self.tag}:entries"

    @property
    def state(self) -> str:
        """hash: entry name -> state JSON (next tick, version, last run, markers, counters)."""
        return f"{self.tag}:state"

    @property
    def due(self) -> str:
        """zset: entry name -> when its next tick is due (ms, jitter applied)."""
        return f"{self.tag}:due"

    @property
    def inflight(self) -> str:
        """zset: tick id -> when to look at the claim again (ms)."""
        return f"{self.tag}:inflight"

    @property
    def ticks(self) -> str:
        """hash: tick id -> JSON of the claim (entry, nominal instant, owner, ...)."""
        return f"{self.tag}:ticks"

    @property
    def changed(self) -> str:
        """zset: entry name -> when a writer last changed it (ms), for 11 minutes: a
        message staged for an entry before its last change is not released."""
        return f"{self.tag}:changed"

    @property
    def redecided(self) -> str:
        """zset: entry name -> when a maintenance window was added over it while a claim
        of it was in flight (ms), for 11 minutes: its staged message is not released, and
        the beat decides the tick at its instant, with the windows as they are then."""
        return f"{self.tag}:redecided"

    @property
    def quarantine(self) -> str:
        """hash: entry name -> why it is quarantined; writing the entry again lifts it."""
        return f"{self.tag}:quarantine"

    @property
    def declared(self) -> str:
        """set: names of the entries declared in code or in beat_schedule."""
        return f"{self.tag}:declared"

    @property
    def events(self) -> str:
        """hash: names of @reboot/@shutdown entries -> "reboot" or "shutdown"."""
        return f"{self.tag}:events"

    @property
    def alive(self) -> str:
        """zset: beat id -> heartbeat expiry (ms), this partition's copy of the registry,
        so that claim.lua can tell a live claim owner within the partition's slot."""
        return f"{self.tag}:alive"

    @property
    def generations(self) -> str:
        """zset: generation of a declaration set -> when its last beat's heartbeat runs
        out (ms), this partition's copy, so that put.lua and remove.lua can tell
        atomically whether a beat of the code that wrote an entry still lives."""
        return f"{self.tag}:generations"

    @property
    def alerts(self) -> str:
        """list: alert transitions (overdue, failing, recovered) not yet sent, oldest first."""
        return f"{self.tag}:alerts"

    @property
    def sending(self) -> str:
        """zset: alert transitions a beat took to send -> when its lease ends (ms * 1000,
        plus the place in the take): taken again once it ran out (alerts.lua)."""
        return f"{self.tag}:alerts:sending"

    @property
    def stats(self) -> str:
        """hash: histogram buckets of the partition's ticks (lateness "l", start delay "s"),
        and its entries' run and skip counters summed ("n:<reason>")."""
        return f"{self.tag}:stats"

    @property
    def names(self) -> str:
        """zset, every score 0: the name of every entry (ZRANGEBYLEX pages it by name)."""
        return f"{self.tag}:names"

    @property
    def paused(self) -> str:
        """set: names of the entries whose status is paused (none quarantined)."""
        return f"{self.tag}:paused"

    @property
    def pauses(self) -> str:
        """zset: names of the entries paused until a given instant -> that instant (ms)."""
        return f"{self.tag}:pauses"

    @property
    def disabled(self) -> str:
        """set: names of the entries whose status is disabled (none quarantined or paused)."""
        return f"{self.tag}:disabled"

    @property
    def ended(self) -> str:
        """set: names of the clock-driven entries with no next tick (none quarantined,
        paused or disabled)."""
        return f"{self.tag}:ended"

    @property
    def overdue(self) -> str:
        """zset: names of the overdue entries -> since when (ms)."""
        return f"{self.tag}:overdue"

    @property
    def failing(self) -> str:
        """zset: names of the failing entries -> since when (ms)."""
        return f"{self.tag}:failing"

    @property
    def running(self) -> str:
        """zset: names of the entries with a running marker -> until when it holds (ms)."""
        return f"{self.tag}:running"

    @property
    def audit(self) -> str:
        """hash: entry name -> its audit trail, newest first: one JSON record a line
        (``[at ms, action, actor, via, note, detail]``), the last ``periodiq_audit_length``
        within ``periodiq_audit_window`` (see ``lua/_common.lua``)."""
        return f"{self.tag}:audit"

    @property
    def audit_newest(self) -> str:
        """zset: entry name -> when its newest audit record was written (ms): a trail
        whose newest record is older than ``periodiq_audit_window`` is dropped (a deleted
        entry's ends with its delete); the whole schedule's newest records are read from
        here. (Its key is named as when it held deleted entries only, as older versions
        keep it: an entry deleted gets the score of its delete in both.)"""
        return f"{self.tag}:audit:gone"

    def history(self, name: str) -> str:
        """list: the entry's newest events, newest first, each a JSON array (capped)."""
        return f"{self.tag}:history:{name}"

    def failures(self, name: str) -> str:
        """list: the entry's newest failed or timeboxed runs, newest first (the last 5)."""
        return f"{self.tag}:failures:{name}"

    def backfilled(self, name: str) -> str:
        """set: the ticks (ms) of the entry's backfill runs that began; it expires
        ``BACKFILL_MEMORY`` after the newest one."""
        return f"{self.tag}:backfilled:{name}"

    def checkpoint(self, name: str) -> str:
        """string: the entry's checkpoint JSON."""
        return f"{self.tag}:checkpoint:{name}"

    def owner(self, owner: str) -> str:
        """set: names of this partition's entries with this owner tag."""
        return f"{self.tag}:owner:{owner}"

    def group(self, group: str) -> str:
        """zset: a group's run markers, task id -> until when (ms), under the schedule's hash
        tag ``{prefix}``, not the partition's, so that a group limit counts across partitions;
        ``""`` (no limit) names an unused key of this partition, so a run with no group limit
        keeps begin.lua and finish.lua within one slot."""
        if not group:
            return f"{self.tag}:group:"
        return "{" + self.tag[1:-1].rpartition(":")[0] + "}:group:" + group

    def entry_keys(self, name: str) -> list[tuple[str, str]]:
        """The keys the scripts keep for one entry of its own, with their Redis types
        (the checkpoint, which only the task reads and writes, is not among them)."""
        return [(self.history(name), "list"), (self.failures(name), "list")]


class Keys:
    """The keys of one prefix: its global keys, and its partitions'."""

    def __init__(self, prefix: str, partitions: int = 1) -> None:
        self.prefix = prefix
        self.partitions = partitions
        self.tag = "{" + prefix + "}"
        self.beats = f"{self.tag}:beats"
        """zset: beat id -> heartbeat expiry (ms)."""
        self.meta = f"{self.tag}:meta"
        """hash: layout and partitions of the schedule stored under this prefix."""
        self.changes = f"{self.tag}:changes"
        """pub/sub channel: an entry was created, changed, paused or deleted."""
        self.muted = f"{self.tag}:muted"
        """zset: live beat id that cannot publish (cut off from its broker) -> until when
        its heartbeat says so (ms)."""
        self.windows = f"{self.tag}:windows"
        """hash: maintenance window id -> its JSON (:mod:`celery_periodiq.model.windows`);
        written by ``lua/window.lua``, read by the beats in Python: one key for the whole
        schedule."""
        self.windows_audit = f"{self.tag}:windows:audit"
        """hash: window id -> its audit trail, as an entry's (``lua/window.lua``)."""
        self.windows_audit_newest = f"{self.tag}:windows:audit:newest"
        """zset: window id -> when its newest audit record was written (ms)."""
        self.declarers = f"{self.tag}:declarers"
        """hash: live beat id -> the digest of the declaration set it runs with."""
        self.generation = f"{self.tag}:generation"
        """string: the newest generation given to a declaration set (ms), so that two
        sets first declared in one millisecond still get two generations."""
        self._parts = [Partition(index, f"{{{prefix}:{index}}}") for index in range(partitions)]

    def beat(self, beat_id: str) -> str:
        """hash with TTL: one beat instance's heartbeat."""
        return f"{self.tag}:beat:{beat_id}"

    def declaration(self, digest: str) -> str:
        """hash with TTL: one declaration set: its generation and its entries' names."""
        return f"{self.tag}:declaration:{digest}"

    def partition_of(self, name: str) -> int:
        """The index of the partition ``name`` lives in."""
        return partition_of(name, self.partitions)

    def of(self, name: str) -> Partition:
        """The partition ``name`` lives in."""
        return self._parts[self.partition_of(name)]

    def part(self, index: int) -> Partition:
        """Partition number ``index``."""
        return self._parts[index]

    def all(self) -> list[Partition]:
        """Every partition, in order."""
        return list(self._parts)
