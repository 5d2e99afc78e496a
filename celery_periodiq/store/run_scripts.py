"""The worker's scripts: begin.lua and finish.lua (a run's guard, before and after its
body) and record.lua (a run published outside the beat's claims)."""

from __future__ import annotations

from typing import Any

from celery_periodiq.errors import ReplicasBehindError
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.protocol.records import Admission, RunEnd, RunStart
from celery_periodiq.store.scripts import INDEXES, ScriptCalls, ScriptKeys

__all__ = [
    "BACKFILL_MEMORY_MS",
    "BEGIN",
    "FINISH",
    "RECORD",
    "RECORDED",
    "RefusalBehindError",
    "RunScripts",
]

BACKFILL_MEMORY_MS = 30 * 24 * 3600 * 1000
"""How long an entry remembers which backfilled ticks began, after the newest one."""

BEGIN = ScriptKeys(
    "begin",
    (
        "entries",
        "state",
        "quarantine",
        "due",
        "history:name",
        "failures:name",
        "alerts",
        "stats",
        "backfilled:name",
        *INDEXES,
        "group:group",
        "audit",
        "audit_newest",
    ),
)
FINISH = ScriptKeys(
    "finish",
    (
        "entries",
        "state",
        "quarantine",
        "due",
        "history:name",
        "failures:name",
        "alerts",
        "stats",
        *INDEXES,
        "group:group",
        "audit",
        "audit_newest",
    ),
)
RECORD = ScriptKeys(
    "record", ("entries", "state", "history:name", "stats", *INDEXES, "audit", "audit_newest")
)


class RunScripts(ScriptCalls):
    """The wrappers of begin.lua, finish.lua and record.lua."""

    def _recorded_id(self, name: str, task_id: str, tick_ms: int | None) -> str:
        """The task id as the history keeps it: "" when the tick derives it."""
        if tick_ms is not None and task_id == task_id_for(self.keys.prefix, name, tick_ms):
            return ""
        return task_id

    def record(
        self,
        name: str,
        kind: str,
        task_id: str,
        tick_ms: int | None,
        note: str,
        history_length: int,
        audit: str = "",
    ) -> bool:
        """Note a run published outside the beat's claims (record.lua); with ``kind``
        ``"backfill"``, record a backfill in the audit trail alone."""
        keys = RECORD.keys(self.keys.of(name), name=name)
        args = [
            name,
            history_length,
            kind,
            "" if tick_ms is None else tick_ms,
            self._recorded_id(name, task_id, tick_ms),
            note,
            audit,
        ]
        return bool(self._run(RECORD.script, keys, args))

    def record_each(
        self,
        runs: list[tuple[str, str]],
        kind: str,
        note: str,
        history_length: int,
        audit: str = "",
    ) -> list[bool]:
        """:meth:`record` of runs published outside a tick (``(name, task_id)``, the task
        id kept whole), pipelined; one reply each."""
        calls = [
            (
                RECORD.keys(self.keys.of(name), name=name),
                [name, history_length, kind, "", task_id, note, audit],
            )
            for name, task_id in runs
        ]
        return [bool(reply) for reply in self._pipelined(RECORD.script, calls)]

    def begin(self, name: str, run: RunStart, now_ms: int | None = None) -> Admission:
        """The worker's guards before a run (begin.lua): one round trip.

        Raises:
            ReplicasBehindError: with ``replica_acks``, the run started (or resumed) but
                too few replicas acknowledged it; its ``now_ms`` is the Redis clock then.
                :class:`RefusalBehindError`: the run was refused, and that recorded, but
                too few replicas acknowledged it. Sending the same ``run`` (its attempt
                token) again writes either again.
        """
        keys = BEGIN.keys(self.keys.of(name), name=name, group=run.group)
        args = [
            run.task_id,
            "" if run.tick_ms is None else run.tick_ms,
            run.min_gap_ms,
            run.overlap,
            run.ttl_ms,
            run.retries,
            run.host,
            run.history_length,
            "" if now_ms is None else now_ms,
            name,
            "1" if run.published else "0",
            "" if run.expires_ms is None else run.expires_ms,
            self._recorded_id(name, run.task_id, run.tick_ms),
            run.attempt,
            "1" if run.backfill else "0",
            BACKFILL_MEMORY_MS,
            "1" if run.catchup else "0",
            "1" if run.plain else "0",
            run.floor_ms,
            run.group_limit if run.group else 0,
            "1" if run.group_wait else "0",
            self._audit_by(run.host, "worker"),
        ]
        if self.replica_acks:
            [(reply, behind)] = self._replicated_calls(
                BEGIN.script, [(keys, args)], "run's begin", ""
            )
            admission = _admission(reply)
            # A start must be on the replicas before the body runs, a refusal before its
            # message is let go (a failover would lose its record: the tick lost silently);
            # the caller sends it again (begin.py)
            if behind is not None and admission.outcome in RECORDED:
                if not admission.runs:
                    raise RefusalBehindError(str(behind), admission) from behind
                behind.now_ms = admission.now_ms
                raise behind
            return admission
        return _admission(self._run(BEGIN.script, keys, args))

    def finish(self, name: str, end: RunEnd, now_ms: int | None = None) -> str:
        """Record how a run ended (finish.lua): the outcome recorded, which is "duplicate"
        for a message that never ran whose tick's run began (nothing of that run changed;
        its monitors are told nothing), or "" when nothing was written (the entry is gone
        or damaged)."""
        recorded = self._run(
            FINISH.script,
            FINISH.keys(self.keys.of(name), name=name, group=end.group),
            [
                end.task_id,
                "" if end.tick_ms is None else end.tick_ms,
                end.outcome,
                end.error,
                end.duration_ms,
                end.host,
                end.history_length,
                "2" if not end.ran else "1" if end.final else "0",
                end.retry_ttl_ms,
                "" if now_ms is None else now_ms,
                name,
                self._recorded_id(name, end.task_id, end.tick_ms),
                self.keys.changes,
                end.attempt,
                "1" if end.group else "0",
                self._audit_by(end.host, "worker"),
            ],
        )
        return str(recorded or "")


class RefusalBehindError(ReplicasBehindError):
    """A run's refusal (too soon, a duplicate...) that too few replicas acknowledged."""

    def __init__(self, message: str, admission: Admission) -> None:
        super().__init__(message)
        self.admission = admission
        self.now_ms = admission.now_ms


RECORDED = frozenset(
    {
        "started",
        "resumed",
        "duplicate",
        "dropped_too_soon",
        "skipped_overlap",
        "dropped_group_limit",
        "expired",
    }
)
"""begin.lua's outcomes that it records (the others write nothing, or quarantine)."""


def _admission(reply: list[Any]) -> Admission:
    outcome, now, last, note = reply
    return Admission(
        outcome=str(outcome),
        now_ms=int(now),
        last_run_ms=None if int(last) < 0 else int(last),
        note=str(note or ""),
    )
