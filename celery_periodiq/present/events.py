"""The text of runs and their events: an entry's history, failures across entries, and
the one-line summary of a backfill.

Pure functions of what the API returned; times on the zone the caller passes.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from datetime import tzinfo

from celery_periodiq.ops.backfill import BackfillReport
from celery_periodiq.present.shapes import error_parts
from celery_periodiq.present.terminal import Column, Row, Style, duration, number, table, when
from celery_periodiq.store.views import Event

__all__ = ["backfill_summary", "failures_text", "history_lines", "history_text"]


def _event_detail(event: Event) -> str:
    fields = event.fields
    parts = [duration(number(fields.get("duration")))]
    if fields.get("host"):
        parts.append(f"on {fields['host']}")
    missed = number(fields.get("missed"))
    text = " ".join(part for part in parts if part)
    extras = (
        [f"stands for {missed} ticks"] if event.kind == "enqueued" and (missed or 0) > 1 else []
    )
    extras += [fields["note"]] if fields.get("note") else []
    return ", ".join([text, *extras] if text else extras)


def _tick(event: Event, zone: tzinfo) -> str:
    if event.tick is None:
        return "-"
    tick, at = event.tick.astimezone(zone), event.at.astimezone(zone)
    return tick.strftime("%H:%M:%S" if tick.date() == at.date() else "%m-%d %H:%M:%S")


def history_lines(events: Sequence[Event], zone: tzinfo, style: Style, width: int) -> list[str]:
    zone_name = getattr(zone, "key", None) or str(zone)
    columns = [
        Column(f"AT ({zone_name})"),
        Column("EVENT"),
        Column("TICK"),
        Column("TASK"),
        Column("DETAIL", shrink=6, overflow=True),
    ]
    rows = []
    for event in events:
        cells = [
            (event.at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S"), None),
            (event.kind, event.kind),
            (_tick(event, zone), None),
            ((event.task_id or "-")[:8], None),
            (_event_detail(event), None),
        ]
        error = event.fields.get("error")
        rows.append(Row(cells, [error] if error else [], details_role=None))
    return table(columns, rows, width, style)


def history_text(
    events: Sequence[Event], zone: tzinfo, style: Style, width: int, *, failures: bool = False
) -> str:
    """An entry's events, newest first; errors on the line below their run. ``failures``:
    the events are its failures only (and when there are none, the text says so)."""
    if not events:
        return "No failures." if failures else "No events."
    return "\n".join(history_lines(events, zone, style, width))


def failures_text(items: Sequence[tuple[str, Event, tzinfo]], style: Style, width: int) -> str:
    """Failed and timeboxed runs across entries, newest first, each error below its row."""
    if not items:
        return "No failures."
    columns = [Column("AT"), Column("ENTRY", shrink=10), Column("OUTCOME"), Column("TASK")]
    rows = []
    for name, event, zone in items:
        kind, message = error_parts(event.fields.get("error"))
        error = ": ".join(part for part in (kind, message) if part)
        if not error:
            error = "stopped at its timebox" if event.kind == "timeboxed" else "no error recorded"
        cells = [
            (when(event.at, zone), None),
            (name, None),
            (event.kind, event.kind),
            ((event.task_id or "-")[:8], None),
        ]
        rows.append(Row(cells, [error], details_role=None))
    return "\n".join(table(columns, rows, width, style))


def backfill_summary(report: BackfillReport) -> str:
    """One line: how many ticks the backfill had and what became of them."""
    if not report.ticks:
        return f"No tick of {report.name} in that range."
    outcomes = collections.Counter(tick.outcome for tick in report.ticks)
    parts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items())
    noun = "tick" if len(report.ticks) == 1 else "ticks"
    return f"Backfill of {report.name}: {len(report.ticks)} {noun} in range: {parts}."
