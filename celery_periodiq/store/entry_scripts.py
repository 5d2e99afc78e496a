"""The writers' scripts: put.lua (create or replace entries), remove.lua (delete them)
and pause.lua (pause, resume)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.store.scripts import INDEXES, ScriptCalls, ScriptKeys

__all__ = [
    "INDEX",
    "INDEX_VERSION",
    "PAUSE",
    "PUT",
    "REMOVE",
    "WINDOW",
    "EntryScripts",
    "PutItem",
]

PutItem = tuple[
    str, str, str | None, str, int | None, int | None, bool, str | None, int | None, int | None, str
]
"""What put.lua writes for one entry: its name, digest, owner, source, first tick and its
due instant (ms), whether it goes in the due set, its cluster event, its alert_after (ms),
its max_runs, and its definition JSON."""


PUT = ScriptKeys(
    "put",
    ("entries", "due", "declared", "events", "quarantine", "state", "generations"),
    each=("owner:was", "owner:owner", "history:name", "failures:name"),
    tail=("stats", *INDEXES, "changed", "audit", "audit_newest"),
)
REMOVE = ScriptKeys(
    "remove",
    ("entries", "due", "declared", "events", "quarantine", "state", "generations"),
    each=("owner:owner", "history:name", "failures:name", "checkpoint:name", "backfilled:name"),
    tail=("stats", *INDEXES, "changed", "audit", "audit_newest"),
)
PAUSE = ScriptKeys(
    "pause",
    (
        "entries",
        "due",
        "state",
        "quarantine",
        "stats",
        *INDEXES,
        "changed",
        "pauses",
        "audit",
        "audit_newest",
    ),
)
WINDOW = ScriptKeys("window", ("windows", "windows_audit", "windows_audit_newest"))
INDEX = ScriptKeys(
    "index",
    (
        "entries", "state", "quarantine", "stats", *INDEXES, "audit", "audit_newest", "pauses",
        "due", "ticks", "inflight",
    ),
)  # fmt: skip # table: the KEYS of index.lua, in its order
INDEX_VERSION = "1"
"""The version of the read side's indexes: a partition whose stats hash says another
one (or none: written by an older version) has them built afresh (``lua/index.lua``)."""


class EntryScripts(ScriptCalls):
    """The wrappers of put.lua, remove.lua, pause.lua, index.lua and window.lua."""

    def put(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None = None,
        generation: int | None = None,
        audit: str = "",
    ) -> list[str]:
        """Create or replace entries of one partition; one status per item (see put.lua).

        ``was_owners``: the owner each entry had when the caller read it (None: no
        owner, or not read: "add" does not read it). ``generation``: the writing beat's
        declaration set's (reconcile). ``audit``: the audit context (see
        :meth:`Audit.argument <celery_periodiq.protocol.audit.Audit.argument>`; "": none).
        """
        if not items:
            return []
        call = self._put_call(part, mode, items, was_owners, generation, audit)
        return list(self._run(PUT.script, *call))

    def put_later(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None = None,
        generation: int | None = None,
        audit: str = "",
    ) -> Callable[[], list[str]]:
        """:meth:`put`, sent now and read when the returned function is called: Redis runs
        it while the caller prepares the next."""
        if self._clustered or not items:
            done = self.put(part, mode, items, was_owners, generation, audit)
            return lambda: done
        call = self._put_call(part, mode, items, was_owners, generation, audit)
        wait = self._later(PUT.script, [call])

        def read() -> list[str]:
            (reply,) = wait()
            if reply is not None:
                return list(reply)
            return self.put(part, mode, items, was_owners, generation, audit)

        return read

    def _put_call(
        self,
        part: Partition,
        mode: str,
        items: list[PutItem],
        was_owners: dict[str, str | None] | None,
        generation: int | None = None,
        audit: str = "",
    ) -> tuple[list[str], list[Any]]:
        keys = PUT.keys(part)
        args: list[Any] = [self.keys.changes, mode, "" if generation is None else generation]
        args.append(audit)
        owners = was_owners or {}
        for (
            name,
            digest,
            owner,
            source,
            next_ms,
            due_ms,
            scheduled,
            event,
            alert,
            most,
            text,
        ) in items:
            was = owners.get(name)
            keys += PUT.item_keys(part, was=was or "", owner=owner or "", name=name)
            args += (
                name,
                digest,
                owner or "",
                source,
                was or "",
                "" if next_ms is None else next_ms,
                "" if due_ms is None else due_ms,
                "1" if scheduled else "",
                event or "",
                "" if alert is None else alert,
                "" if most is None else most,
                text,
            )
        return keys + PUT.tail_keys(part), args

    def remove(
        self, part: Partition, owners: dict[str, str | None], sources: str = "*", audit: str = ""
    ) -> list[str]:
        """Delete entries of one partition whose source is in ``sources``, given the owner
        each had when read; returns the names removed, ``retry:NAME`` for those whose
        owner changed meanwhile, and (unless ``sources`` is ``"*"``) ``kept:NAME`` for
        those a live beat of the generation that wrote them still declares."""
        if not owners:
            return []
        keys = REMOVE.keys(part)
        args: list[Any] = [self.keys.changes, sources, audit]
        for name, owner in owners.items():
            keys += REMOVE.item_keys(part, owner=owner or "", name=name)
            args += [name, owner or ""]
        return list(self._run(REMOVE.script, keys + REMOVE.tail_keys(part), args))

    def pause(
        self,
        name: str,
        note: str,
        until_ms: int | None = None,
        fresh: bool = False,
        audit: str = "",
    ) -> str:
        """Pause an entry (until ``until_ms``, or until resumed; with ``fresh``, only one
        not paused yet): ``"ok"``, ``"paused already"``, ``"missing"`` or
        ``"damaged: <why>"``. ``audit``: the audit context ("": none)."""
        return self.pause_each([name], note, until_ms, fresh, audit)[0]

    def pause_each(
        self,
        names: list[str],
        note: str,
        until_ms: int | None = None,
        fresh: bool = False,
        audit: str = "",
    ) -> list[str]:
        """:meth:`pause` for each of ``names``, pipelined; one reply per name."""
        tail = [note, _ms(until_ms), "fresh" if fresh else "", "", audit]
        calls = []
        for name in names:
            calls.append(
                (PAUSE.keys(self.keys.of(name)), [self.keys.changes, name, "pause", *tail])
            )
        return self._pause_calls(calls)

    def resume(
        self,
        name: str,
        next_ms: int | None,
        due_ms: int | None,
        ended_ms: int | None = None,
        paused_only: bool = False,
        audit: str = "",
    ) -> str:
        """Resume an entry with its next tick: ``"ok"``, ``"missing"``, ``"damaged: <why>"``,
        or ``"changed"`` when ``ended_ms`` (a timed pause that ended then) is no longer the
        entry's pause, or ``paused_only`` and the entry is not paused."""
        return self.resume_each([(name, next_ms, due_ms)], ended_ms, paused_only, audit)[0]

    def resume_each(
        self,
        items: list[tuple[str, int | None, int | None]],
        ended_ms: int | None = None,
        paused_only: bool = False,
        audit: str = "",
    ) -> list[str]:
        """:meth:`resume` for each ``(name, next_ms, due_ms)``, pipelined; one reply each."""
        ended = "" if ended_ms is None else str(ended_ms)
        only = "paused" if paused_only else ""
        calls = [
            (
                PAUSE.keys(self.keys.of(name)),
                [self.keys.changes, name, "resume", _ms(next_ms), _ms(due_ms), ended, only, audit],
            )
            for name, next_ms, due_ms in items
        ]
        return self._pause_calls(calls)

    def _pause_calls(self, calls: list[tuple[list[str], list[Any]]]) -> list[str]:
        """pause.lua's ``calls``, pipelined (:meth:`_pipelined`)."""
        return [str(reply) for reply in self._pipelined(PAUSE.script, calls)]

    def index(self, part: Partition) -> tuple[int, list[str]]:
        """Build the read side's indexes of one partition afresh, atomically, and schedule
        again the entries no beat would ever run (neither due nor in flight); returns how
        many entries it indexed, and the names of those it scheduled again."""
        indexed, *scheduled = self._run(INDEX.script, INDEX.keys(part), [INDEX_VERSION])
        return int(indexed), [str(name) for name in scheduled]

    def window(self, action: str, window_id: str, text: str = "", audit: str = "") -> bool:
        """Add (``"add"``: only when the id is free), change (``"replace"``) or remove
        (``"remove"``) one maintenance window, recording it in the windows' audit trail;
        False when nothing was done (the id taken, no such window)."""
        keys = WINDOW.keys(self.keys)
        return bool(self._run(WINDOW.script, keys, [action, window_id, text, audit]))


def _ms(value: int | None) -> str:
    return "" if value is None else str(value)
