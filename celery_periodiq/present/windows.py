"""How maintenance windows are told: ``window list``'s lines and JSON, and the "in window
until ..." that ``list``, ``show``, the dashboard and the admin say of an entry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from celery_periodiq.model.windows import Cover, Window
from celery_periodiq.ops.windows import held_now
from celery_periodiq.present.terminal import relative, utc_iso
from celery_periodiq.store.views import StoredEntry

__all__ = ["in_window", "in_window_json", "window_json", "window_line", "windows_text"]


def in_window(
    stored: StoredEntry, windows: Sequence[Window], now: datetime
) -> tuple[Cover, str] | None:
    """The window ``stored`` is in at ``now`` and ``in window 'db' (skip) until
    2026-03-01T04:00:00Z (in 1h59m)``; None when it is in none."""
    if not windows:
        return None
    cover = held_now(windows, stored, now)
    if cover is None:
        return None
    window = cover.window
    until = f"{_iso(cover.end)} ({relative(cover.end, now, coarse=True)})"
    what = "ticks deferred to its end" if cover.defer else "ticks skipped"
    return cover, f"in window {window.id!r} until {until}: {what}"


def in_window_json(
    stored: StoredEntry, windows: Sequence[Window], now: datetime
) -> dict[str, Any] | None:
    """The ``in_window`` of an entry's JSON: ``{id, policy, until}``, or None."""
    held = in_window(stored, windows, now)
    if held is None:
        return None
    cover = held[0]
    return {"id": cover.window.id, "policy": cover.window.policy, "until": _iso(cover.end)}


def window_line(window: Window, now: datetime) -> str:
    """``db (all, skip): at 02:00 every day, Europe/Berlin for 2h; next 2026-...``."""
    opening = window.next_opening(now)
    line = f"{window.id} ({window.scope}, {window.policy}): {window.describe()}"
    if opening is None:
        return line + "; opens no more"
    start, end = opening
    if start <= now:
        return line + f"; open now, until {_iso(end)} ({relative(end, now, coarse=True)})"
    return line + f"; next {_iso(start)} to {_iso(end)} ({relative(start, now, coarse=True)})"


def windows_text(
    found: Iterable[tuple[Window, tuple[datetime, datetime] | None]], now: datetime
) -> str:
    """``window list``: one line per window, its note below."""
    lines = []
    for window, _ in found:
        lines.append(window_line(window, now))
        if window.note:
            lines.append(f"  note: {window.note}")
    return "\n".join(lines) if lines else "No maintenance windows."


def window_json(
    window: Window, opening: tuple[datetime, datetime] | None, now: datetime
) -> dict[str, Any]:
    """``window list --json``'s object for one window."""
    return {
        **window.to_dict(),
        "open": opening is not None and opening[0] <= now,
        "opens": None if opening is None else utc_iso(opening[0]),
        "closes": None if opening is None else utc_iso(opening[1]),
    }


def _iso(instant: datetime) -> str:
    return str(utc_iso(instant))
