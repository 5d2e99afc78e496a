"""The audit trail as the CLI and the dashboard show it: a table of who changed what,
with each update's changed fields on the lines below it, and its ``--json`` shape.

Pure functions of the records :meth:`Periodiq.audit <celery_periodiq.api.Periodiq.audit>`
returned; times on the zone the caller passes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, tzinfo
from typing import Any

from celery_periodiq.present.terminal import Column, Row, Style, table, when
from celery_periodiq.protocol.audit import AuditRecord

__all__ = ["audit_json", "audit_rows", "audit_text", "change_lines", "record_detail"]


def audit_json(record: AuditRecord) -> dict[str, Any]:
    """One record: ``{name, at, action, actor, via, note, changes, until, task_id}``
    (``changes``: field -> ``[before, after]``, null for a field left at its default)."""
    return record.as_dict()


def _value(value: Any) -> str:
    if value is None:
        return "(default)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def change_lines(record: AuditRecord) -> list[str]:
    """An update's changed fields, one a line: ``every: "@every 30s" -> "@every 1m"``."""
    return [
        f"{field}: {_value(before)} -> {_value(after)}"
        for field, (before, after) in sorted(record.changes.items())
    ]


def record_detail(record: AuditRecord, zone: tzinfo) -> str:
    """The note, a pause's end and a trigger's task id, in one phrase."""
    parts = [record.note] if record.note else []
    if record.until is not None:
        parts.append(f"until {when(record.until, zone)}")
    if record.task_id:
        parts.append(f"task {record.task_id}")
    return ", ".join(parts)


def audit_rows(records: Sequence[AuditRecord]) -> list[dict[str, Any]]:
    """What the dashboard's and the admin's "Audit" sections show of each record: its
    instant (ISO), action, actor, via, detail (:func:`record_detail`, UTC) and changes
    (:func:`change_lines`)."""
    return [
        {
            "at": record.at.isoformat(),
            "action": record.action,
            "actor": record.actor,
            "via": record.via,
            "detail": record_detail(record, UTC),
            "changes": change_lines(record),
        }
        for record in records
    ]


def audit_text(
    records: Sequence[AuditRecord], zone: tzinfo, style: Style, width: int, *, entry: bool = True
) -> str:
    """The records, newest first, each update's changes below it; ``entry`` False leaves the
    entry column out (one entry's trail). A maintenance window's record names it there as
    ``window ID``."""
    if not records:
        return "No audit records."
    columns = [Column("AT"), *([Column("ENTRY", shrink=24)] if entry else [])]
    columns += [Column("ACTION"), Column("BY", shrink=12), Column("VIA"), Column("WHY", 6, True)]
    rows = []
    for record in records:
        cells: list[tuple[str, str | None]] = [(when(record.at, zone), None)]
        name = f"window {record.name}" if record.action.endswith("_window") else record.name
        cells += [(name, None)] if entry else []
        cells += [
            (record.action, record.action),
            (record.actor, None),
            (record.via, None),
            (record_detail(record, zone) or "-", None),
        ]
        rows.append(Row(cells, change_lines(record)))
    return "\n".join(table(columns, rows, width, style))
