"""What the dashboard's and the Django admin's pages show of entries, and the actions
they carry out: a row of the list, an entry's details, instants as text; pause, resume,
run now and delete."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from celery_periodiq.api import Periodiq
from celery_periodiq.model.windows import Window
from celery_periodiq.present import shapes
from celery_periodiq.present.text import paused_text, upcoming_text
from celery_periodiq.present.windows import in_window
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.worker.plain import is_plain

__all__ = ["act", "details", "row", "when"]


def when(iso: str | None) -> str:
    """``2026-11-24T00:03:10.009000+00:00`` as ``2026-11-24 00:03:10.009 UTC``."""
    if not iso:
        return ""
    try:
        instant = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    zone = instant.tzname() or ""
    text = instant.strftime("%Y-%m-%d %H:%M:%S")
    if instant.microsecond:
        text += f".{instant.microsecond // 1000:03d}"
    return f"{text} {'UTC' if zone in ('UTC', 'UTC+00:00') else zone}".strip()


def act(
    api: Periodiq, verb: str, name: str, note: str | None, until: str | None = None
) -> str | None:
    """Carry out one write action (a pause with its note and its end, if any); the task
    id for "run"."""
    if verb == "pause":
        api.pause(name, note=note, until=until)
    elif verb == "resume":
        api.resume(name)
    elif verb == "run":
        return api.trigger(name)
    else:
        api.delete(name, force=True)
    return None


def details(api: Periodiq, name: str) -> tuple[StoredEntry, shapes.Details]:
    """An entry and what its page shows besides: its next 10 fires, its checkpoint, its
    kept history (100 events) and the Redis clock.

    Raises:
        EntryNotFoundError: no entry has that name.
    """
    stored = api.get(name)
    now = api.now()
    return stored, shapes.Details(
        upcoming=api.upcoming(name, 10, after=now) if stored.entry is not None else [],
        checkpoint=api.has_checkpoint(name),
        events=api.history(name, limit=100),
        default_grace=api.settings.default_grace,
        now=now,
        plain=stored.entry is not None and bool(is_plain(api.app, stored.entry.task)),
    )


def row(item: StoredEntry, now: datetime, windows: Sequence[Window] = ()) -> dict[str, Any]:
    """What the entries table shows of one entry (``windows``: the maintenance windows,
    to say when it is in one)."""
    counters = item.counters
    held = in_window(item, windows, now) if windows else None
    return {
        "name": item.name,
        "status": item.status,
        "alerts": item.alerts,
        "task": None if item.entry is None else item.entry.task,
        "schedule": None if item.entry is None else item.entry.schedule,
        "owner": None if item.entry is None else item.entry.owner,
        "next": upcoming_text(item, now, short=True),
        "last_run": item.last_run,
        "last_status": item.state.get("last_status") or "",
        "note": item.note or "",
        "paused_until": paused_text(item, now) if item.paused_until is not None else "",
        "in_window": "" if held is None else held[1],
        "problem": item.invalid or "",
        "succeeded": counters.get("succeeded", 0),
        "failed": counters.get("failed", 0) + counters.get("timeboxed", 0),
        "skipped": sum(
            counters.get(reason, 0)
            for reason in (
                "missed",
                "skipped_overlap",
                "dropped_too_soon",
                "dropped_group_limit",
                "expired",
                "skipped_window",
                "excluded",
            )
        ),
    }
