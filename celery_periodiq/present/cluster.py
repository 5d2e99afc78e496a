"""The text of the cluster's health: the live beats, and doctor's checks with a hint
under each failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from celery_periodiq.ops.doctor import Check
from celery_periodiq.present.terminal import Column, Row, Style, hanging, relative, span, table
from celery_periodiq.store.views import BeatInfo

__all__ = ["beats_text", "doctor_text"]

_HINTS = {
    "redis": "check periodiq_redis_url (or broker_url) and that Redis runs",
    "beats": "start one: celery -A PROJ beat -S periodiq",
    "broker": "check broker_url and that the broker runs",
    "entries": "see `periodiq show NAME`; `periodiq update` or `periodiq delete` repairs it",
}


def beats_text(beats: Sequence[BeatInfo], now: datetime, style: Style, width: int) -> str:
    """Live beats: host, pid, version, uptime, last tick (or that it is cut off from its
    broker), ticks claimed, and the digest of the declaration set each runs with (beats
    of one version of the code share it)."""
    if not beats:
        return "No live beats: nothing is being scheduled."
    columns = [
        Column("HOST", shrink=8),
        Column("PID"),
        Column("VERSION"),
        Column("UPTIME"),
        Column("LAST TICK"),
        Column("TICKS CLAIMED"),
        Column("DECLARES"),
    ]
    rows = []
    for beat in beats:
        uptime = span((now - beat.started).total_seconds()) if beat.started else "?"
        last = relative(beat.last_tick, now) if beat.last_tick else "never"
        if not beat.publishing:
            last = "cut off from its broker"
        texts = [
            beat.host,
            str(beat.pid),
            beat.version,
            uptime,
            last,
            str(beat.ticks_claimed),
            beat.declared[:8] or "-",
        ]
        rows.append(Row([(text, None) for text in texts]))
    return "\n".join(table(columns, rows, width, style))


def doctor_text(checks: Sequence[Check], style: Style, width: int) -> str:
    """One line per check (wrapped under its result), a hint under each failure, a verdict."""
    lines = []
    for check in checks:
        label = check.status.upper() if check.status == "fail" else check.status
        wrapped = hanging(check.detail, width, 16, 16)
        lines.append(f"{style(label.ljust(4), check.status)}  {check.name:<8}  {wrapped[0][16:]}")
        lines += wrapped[1:]
        if check.status == "fail" and check.name in _HINTS:
            lines += [
                style(line, "dim") for line in hanging(f"→ {_HINTS[check.name]}", width, 16, 18)
            ]
    failed = sum(check.status == "fail" for check in checks)
    warned = sum(check.status == "warn" for check in checks)
    if failed:
        verdict = style(f"{failed} problem{'s' if failed > 1 else ''} found.", "bad")
    else:
        warnings = f" ({warned} warning{'s' if warned > 1 else ''})" if warned else ""
        verdict = f"All checks passed{warnings}."
    return "\n".join([*lines, "", verdict])
