"""What the demo prints: the entry list, one entry's history, the summary.

The list and the history come from the real ``celery periodiq`` command when
the installed celery_periodiq has it, and from the same Python API otherwise.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from celery_periodiq import Periodiq
from example_project.tally import POLICY_REASONS, Tally

__all__ = ["cli_available", "clock", "entry_list", "history", "mailbox", "summary"]

ROOT = Path(__file__).resolve().parent.parent
_COUNTERS = (
    "enqueued", "started", "succeeded", "failed", "timeboxed", "missed", "skipped_overlap",
    "dropped_too_soon", "duplicate",
)  # fmt: skip


def clock(instant: datetime | None, *, millis: bool = False) -> str:
    """``HH:MM:SS`` (UTC), or ``-``."""
    if instant is None:
        return "-"
    text = instant.astimezone(UTC).strftime("%H:%M:%S.%f" if millis else "%H:%M:%S")
    return text[:-3] if millis else text


def _ms_clock(ms: int) -> str:
    return clock(datetime.fromtimestamp(ms / 1000, UTC))


def _celery(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "example_project", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def cli_available(env: dict[str, str]) -> bool:
    """Whether ``celery -A example_project periodiq --help`` works here."""
    return _celery(env, "periodiq", "--help").returncode == 0


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _via_cli(env: dict[str, str], cli: bool, *args: str) -> bool:
    print(f"$ celery -A example_project periodiq {' '.join(args)}")
    if not cli:
        print("(this celery_periodiq has no `periodiq` CLI command yet: the same, from the API)")
        return False
    result = _celery(env, "periodiq", *args)
    print((result.stdout or result.stderr).rstrip())
    if result.returncode == 0:
        return True
    print(f"(the command exited with {result.returncode}: the same, from the API)")
    return False


def entry_list(api: Periodiq, env: dict[str, str], cli: bool) -> None:
    """Print every entry: ``celery periodiq list``, or ``periodiq(app).list()``."""
    if _via_cli(env, cli, "list"):
        return
    rows = [["NAME", "SOURCE", "STATUS", "SCHEDULE", "NEXT RUN", "LAST RUN", "COUNTERS"]]
    for stored in api.list():
        entry = stored.entry
        spec = "?" if entry is None else entry.schedule
        if entry is not None and entry.tz != "UTC":
            spec += f" ({entry.tz})"
        counters = stored.counters
        counts = " ".join(f"{key}={counters[key]}" for key in _COUNTERS if counters.get(key))
        rows.append([
            stored.name, "?" if entry is None else entry.source, stored.status, spec,
            clock(stored.next_run), clock(stored.last_run), counts,
        ])  # fmt: skip
    _table(rows)


def history(api: Periodiq, env: dict[str, str], cli: bool, name: str, limit: int = 15) -> None:
    """Print an entry's newest events: ``celery periodiq history``, or ``.history()``."""
    if _via_cli(env, cli, "history", name):
        return
    rows = [["AT (UTC)", "EVENT", "TICK", "TASK ID", "DETAILS"]]
    for event in api.history(name, limit=limit):
        details = " ".join(f"{key}={value}" for key, value in sorted(event.fields.items()))
        rows.append([
            clock(event.at, millis=True), event.kind, clock(event.tick),
            (event.task_id or "-")[:8], details,
        ])  # fmt: skip
    _table(rows)


def summary(tallies: list[Tally], start_ms: int, end_ms: int) -> None:
    """One line per entry: ticks due, executed, duplicated, lost, and why the others did not run."""
    print(f"Summary of the scheduled ticks due from {_ms_clock(start_ms)} to "
          f"{_ms_clock(end_ms)} UTC, while a beat was alive. DUE and EXECUTED count\n"
          "those ticks only (manual runs apart); list's counters count every run since "
          "the entry was added.")  # fmt: skip
    rows = [
        ["ENTRY", "DUE", "EXECUTED", "DUPLICATES", "LOST", "MANUAL", "DROPPED/SKIPPED BY REASON"]
    ]
    for item in tallies:
        reasons = [f"{r}={item.reasons[r]}" for r in POLICY_REASONS if item.reasons[r]]
        if item.refused_duplicates:
            reasons.append(f"(re-sent messages refused: {item.refused_duplicates})")
        rows.append([
            item.entry, str(item.due), str(item.executed), str(item.duplicates),
            str(len(item.lost)), str(item.manual), " ".join(reasons) or "-",
        ])  # fmt: skip
    _table(rows)
    for item in tallies:
        if item.lost:
            print(f"LOST {item.entry}: ticks {', '.join(_ms_clock(t) for t in item.lost)}")


def mailbox(records: Iterable[dict[str, Any]]) -> None:
    """One line per mailbox entry: how far its downloads got, run after run."""
    by_entry: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("kind") == "mail":
            by_entry.setdefault(str(record["entry"]), []).append(record)
    for entry, runs in sorted(by_entry.items()):
        chained = all(later["from"] == earlier["to"] for earlier, later in pairwise(runs))
        print(
            f"{entry}: {len(runs)} runs, each within its timebox, downloaded messages "
            f"{runs[0]['from'] + 1}-{runs[-1]['to']} ({runs[-1]['left']} waiting); "
            + ("each resumed where the one before stopped" if chained else "CHECKPOINT GAP")
        )
