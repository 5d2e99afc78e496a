"""The audit trail as the writers' scripts keep it: who changes an entry (:class:`Audit`,
the context a write is given) and what the trail holds of each change
(:class:`AuditRecord`, read back from the JSON lines ``lua/_common.lua`` writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["ACTIONS", "VIAS", "Audit", "AuditRecord", "parse_trail"]

ACTIONS = (
    "add",
    "update",
    "delete",
    "pause",
    "resume",
    "trigger",
    "backfill",
    "quarantine",
    "add_window",
    "update_window",
    "remove_window",
)
"""What a record says was done to an entry, or (``*_window``) to a maintenance window."""

VIAS = ("api", "cli", "dashboard", "admin", "reconcile", "beat", "worker")
"""The ways a change comes: the Python API, the CLI, the dashboard, the Django admin, a beat
reconciling its declarations, a beat ending a timed pause, a beat or a worker
quarantining an entry."""


@dataclass(frozen=True, slots=True)
class Audit:
    """Who makes a change, how, and why: given to each write, recorded by its script."""

    actor: str
    """Who: the API's ``actor=``, the CLI's ``user@host``, the signed-in user, a beat's id."""
    via: str = "api"
    """How (one of :data:`VIAS`)."""
    note: str = ""
    """Why (a pause's note is its own): ``"imported from FILE"``, a declaration set."""

    def argument(self, keep: int, window_ms: int) -> str:
        """The context as the scripts take it: JSON ``[actor, via, note, keep, window]``."""
        return json.dumps([self.actor, self.via, self.note, keep, window_ms])


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One change to one entry, as its audit trail holds it."""

    name: str
    """The entry (the window's id for a ``*_window`` action)."""
    at: datetime
    """When (the Redis clock), aware, in UTC."""
    action: str
    """What was done (one of :data:`ACTIONS`)."""
    actor: str
    """Who did it."""
    via: str
    """How (one of :data:`VIAS`)."""
    note: str = ""
    """Why: the note given (a pause's note, an import's file, a quarantine's reason)."""
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """An update's changed fields of the stored definition: field -> (before, after), None
    for a field left out (it holds its default)."""
    until: datetime | None = None
    """A timed pause's end."""
    task_id: str | None = None
    """A trigger's task id."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (instants in ISO 8601)."""
        return {
            "name": self.name,
            "at": self.at.isoformat(),
            "action": self.action,
            "actor": self.actor,
            "via": self.via,
            "note": self.note,
            "changes": {key: list(pair) for key, pair in self.changes.items()},
            "until": None if self.until is None else self.until.isoformat(),
            "task_id": self.task_id,
        }


def _instant(ms: Any) -> datetime | None:
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def parse_trail(name: str, text: str | None, oldest_ms: int = 0) -> list[AuditRecord]:
    """The records of one entry's stored trail, newest first, those before ``oldest_ms``
    left out (the window: they leave at the next record); a line that cannot be read is
    skipped."""
    records = []
    for line in (text or "").split("\n"):
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        if not isinstance(raw, list) or len(raw) < 2:
            continue
        raw += [""] * (6 - len(raw))
        at = _instant(raw[0])
        if at is None or raw[0] < oldest_ms:
            continue
        detail = raw[5] if isinstance(raw[5], dict) else {}
        changes = detail.get("changes")
        records.append(
            AuditRecord(
                name=name,
                at=at,
                action=str(raw[1]),
                actor=str(raw[2]),
                via=str(raw[3]),
                note=str(raw[4]),
                changes={
                    str(key): (pair[0], pair[1])
                    for key, pair in (changes.items() if isinstance(changes, dict) else ())
                    if isinstance(pair, list) and len(pair) == 2
                },
                until=_instant(detail.get("until")),
                task_id=detail.get("task_id") if isinstance(detail.get("task_id"), str) else None,
            )
        )
    return records
