"""Export and import: a schedule as one versioned JSON document, and back.

The document::

    {"format": "celery-periodiq", "version": 1, "exported_at": "<ISO>",
     "entries": [{"definition": {...Entry.to_dict()...},
                  "state": {"paused": bool, "note": str|null, "until": ISO|null,
                            "last_run": ISO|null, "checkpoint": <JSON>|null}}]}

``state`` is optional per entry. An import checks every record first and writes
nothing when one is bad (each bad record is named by its position); an entry that
exists with another definition is replaced only with ``replace``. ``last_run`` is
exported for reading; an import does not write it back (the next tick follows the
schedule from now). ``until`` is a timed pause's end: imported as it is, or as no pause
when that end has passed (the pause would be over). An export of the whole schedule (no
owner, no source) also holds its maintenance windows, ``"windows": [{...}]`` (absent
when there are none); an import writes them, replacing those of the same id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from celery_periodiq.errors import EntryError, ScheduleError, shown
from celery_periodiq.model.build import check_encodable
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.instants import to_ms
from celery_periodiq.model.windows import Window
from celery_periodiq.ops import steer
from celery_periodiq.ops.listing import pages
from celery_periodiq.ops.windows import list_windows
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.schedules.once import parse_instant
from celery_periodiq.store.checkpoint import Checkpoint
from celery_periodiq.store.store import Store
from celery_periodiq.store.windows import write_window

__all__ = [
    "FORMAT",
    "VERSION",
    "ImportReport",
    "export_header",
    "export_records",
    "export_schedule",
    "import_converted",
    "import_schedule",
]

FORMAT, VERSION = "celery-periodiq", 1
_SOURCES = ("runtime", "code", "config")
_STATE = frozenset({"paused", "note", "until", "last_run", "checkpoint"})


@dataclass
class ImportReport:
    """What an import did (or, with ``dry_run``, would do), by entry name."""

    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Records an importer could not convert, each with why (``skip_invalid`` only)."""
    notes: list[str] = field(default_factory=list)
    """What an importer converted with a loss (options dropped, ...) or left out on
    purpose, each with why."""
    dry_run: bool = False


def export_header(store: Store | None = None) -> dict[str, Any]:
    """What an export document says before its entries: format, version, when; with
    ``store`` (an export of the whole schedule), its maintenance windows too, when it has
    some (``windows``: a list of :meth:`Window.to_dict`)."""
    header = {"format": FORMAT, "version": VERSION, "exported_at": datetime.now(UTC).isoformat()}
    held = [] if store is None else list_windows(store)
    if held:
        header["windows"] = [window.to_dict() for window in held]
    return header


def export_records(
    store: Store,
    *,
    owner: str | None = None,
    source: str | None = None,
    state: bool = True,
    batch: int = 500,
) -> Iterator[dict[str, Any]]:
    """The records of an export document (of ``owner``, from ``source``), read a page of
    ``batch`` entries at a time, in the order Redis scans them (each page by name); runs
    inside the caller's guard (the whole iteration). Quarantined entries are left out.

    Raises:
        EntryError: ``owner`` or ``source`` is invalid (at once, before anything is read).
    """
    _check_source(source)
    if owner is not None:
        steer.check_owner(owner)
    steer.check_count("batch", batch)
    return _exported(store, owner, source, state, batch)


def _exported(
    store: Store, owner: str | None, source: str | None, state: bool, batch: int
) -> Iterator[dict[str, Any]]:
    for page in pages(store, owner, batch):
        kept = [item for item in page if item.entry and source in (None, item.entry.source)]
        chosen = sorted(kept, key=lambda item: item.name)
        saved = Checkpoint.load_many(store, [item.name for item in chosen]) if state else {}
        for item in chosen:
            assert item.entry is not None
            record: dict[str, Any] = {"definition": item.entry.to_dict()}
            if state:
                last = item.last_run
                until = item.paused_until
                record["state"] = {
                    "paused": item.paused,
                    "note": item.note,
                    "until": None if until is None else until.isoformat(),
                    "last_run": None if last is None else last.isoformat(),
                    "checkpoint": saved.get(item.name),
                }
            yield record


def _check_source(source: object) -> None:
    """Raise :class:`EntryError` unless ``source`` is None or an entry source."""
    if source is not None and source not in _SOURCES:
        raise EntryError(f"source={shown(source)} is invalid (allowed: {', '.join(_SOURCES)})")


def export_schedule(
    store: Store, *, owner: str | None = None, source: str | None = None, state: bool = True
) -> dict[str, Any]:
    """The entries (of ``owner``, from ``source``) as one JSON-ready document, by name;
    runs inside the caller's guard."""
    records = export_records(store, owner=owner, source=source, state=state)
    whole = owner is None and source is None
    return {
        **export_header(store if whole else None),
        "entries": sorted(records, key=lambda record: str(record["definition"]["name"])),
    }


def import_schedule(
    store: Store,
    document: Any,
    *,
    replace: bool = False,
    dry_run: bool = False,
    audit: Audit | None = None,
) -> ImportReport:
    """Create (or, with ``replace``, replace) the document's entries, with their pause
    state and checkpoint when given, each change recorded by ``audit``; runs inside the
    caller's guard.

    Raises:
        EntryError: the document or any record is invalid, or an entry exists with
            another definition and ``replace`` is not set; every problem is listed by
            position and nothing is written.
    """
    records = _records(document)
    problems: list[str] = []
    windows = _windows(document, problems)
    parsed: list[tuple[Entry, dict[str, Any] | None]] = []
    for position, record in enumerate(records):
        try:
            parsed.append(_record(record))
        except EntryError as error:
            problems.append(f"#{position}: {error}")
    names = [entry.name for entry, _ in parsed]
    problems += [
        f"entry {shown(name)} is given twice"
        for name in sorted(set(names))
        if names.count(name) > 1
    ]
    existing = {item.name: item for item in store.load(names)} if not problems else {}
    report = ImportReport(dry_run=dry_run)
    for position, (entry, _) in enumerate(parsed):
        found = existing.get(entry.name)
        if found is None:
            report.created.append(entry.name)
        elif found.entry is not None and found.entry.digest == entry.digest:
            report.unchanged.append(entry.name)
        elif replace:
            report.replaced.append(entry.name)
        else:
            problems.append(
                f"#{position}: an entry named {shown(entry.name)} exists with "
                "another definition (--replace / replace=True replaces)"
            )
    if problems:
        raise EntryError(f"{len(problems)} problems, nothing imported: " + "; ".join(problems))
    if dry_run:
        return report
    store.put("add", [entry for entry, _ in parsed if entry.name in report.created], audit=audit)
    replaced = [entry for entry, _ in parsed if entry.name in report.replaced]
    store.put("update", replaced, audit=audit)
    now_ms = store.now_ms()
    for entry, state in parsed:
        if state is not None:
            _restore(store, entry.name, state, now_ms, audit)
    for window in windows:  # as exported: one of the same id is replaced
        write_window(store, window, replace=True, audit=store.audit_argument(audit))
    return report


def _windows(document: dict[str, Any], problems: list[str]) -> list[Window]:
    """The document's maintenance windows (none when it has no ``windows``); each one
    that is not a valid window is a problem."""
    given = document.get("windows") or []
    if not isinstance(given, list):
        problems.append(f"windows={shown(given)} is invalid (allowed: a list)")
        return []
    windows = []
    for position, item in enumerate(given):
        try:
            windows.append(Window.from_json(json.dumps(item)))
        except (TypeError, ValueError) as error:  # WindowError is a ValueError
            problems.append(f"window #{position}: {error}")
    return windows


def import_converted(
    store: Store,
    document: dict[str, Any],
    problems: list[str],
    *,
    notes: Sequence[str] = (),
    replace: bool = False,
    dry_run: bool = False,
    skip_invalid: bool = False,
    audit: Audit | None = None,
) -> ImportReport:
    """Import what an importer (RedBeat, django-celery-beat) converted into a document;
    ``problems`` name the records it could not convert, one each, ``notes`` what it
    converted with a loss or left out on purpose (both end up in the report).

    Raises:
        EntryError: there are problems and ``skip_invalid`` is not set (nothing is
            written), or the document itself is refused by :func:`import_schedule`.
    """
    if problems and not skip_invalid:
        raise EntryError(
            f"{len(problems)} records cannot be imported, nothing imported: " + "; ".join(problems)
        )
    report = import_schedule(store, document, replace=replace, dry_run=dry_run, audit=audit)
    report.skipped = list(problems)
    report.notes = list(notes)
    return report


def _records(document: Any) -> list[Any]:
    if not isinstance(document, dict):
        raise EntryError(f"the document {shown(document)} is not a JSON object")
    if document.get("format") != FORMAT or document.get("version") != VERSION:
        raise EntryError(
            f"the document is format {shown(document.get('format'))} version "
            f"{shown(document.get('version'))} (allowed: {FORMAT!r} version {VERSION})"
        )
    records = document.get("entries")
    if not isinstance(records, list):
        raise EntryError(f"entries={shown(records)} is invalid (allowed: a list)")
    return records


def _record(record: Any) -> tuple[Entry, dict[str, Any] | None]:
    if not isinstance(record, dict) or set(record) - {"definition", "state"}:
        raise EntryError(f"{shown(record)} is not {{'definition': ..., 'state': ...}}")
    entry = Entry.from_dict(record.get("definition"))  # type: ignore[arg-type]
    check_encodable(entry)
    state = record.get("state")
    if state is None:
        return entry, None
    if not isinstance(state, dict) or set(state) - _STATE:
        raise EntryError(f"entry {shown(entry.name)}: state {shown(state)} is invalid")
    if not isinstance(state.get("paused", False), bool):
        raise EntryError(f"entry {shown(entry.name)}: paused={shown(state['paused'])} is invalid")
    if state.get("note") is not None and not isinstance(state["note"], str):
        raise EntryError(f"entry {shown(entry.name)}: note={shown(state['note'])} is invalid")
    if state.get("until") is not None:
        try:
            parse_instant(state["until"], "until")
        except ScheduleError as error:
            raise EntryError(f"entry {shown(entry.name)}: {error}") from None
    return entry, state


def _restore(
    store: Store, name: str, state: dict[str, Any], now_ms: int, audit: Audit | None
) -> None:
    until = state.get("until")
    end = None if until is None else to_ms(parse_instant(until, "until"))
    if state.get("paused") and (end is None or end > now_ms):
        steer.pause(store, name, state.get("note"), end, audit)
    if state.get("checkpoint") is not None:
        Checkpoint(store, name).save(state["checkpoint"])
