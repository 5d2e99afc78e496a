"""The bulk actions of the dashboard's and the Django admin's lists: which entries a form
selects (the names ticked, or every entry that matches the list's search and filters)
and pausing (with a note and an end), resuming, running or deleting them through the
API's ``*_many`` methods (pipelined, whatever the count), then what to tell the user:
how many changed, and which were skipped and why.

The form's fields: ``action`` (one of :data:`VERBS`), ``names`` (repeated, the names
ticked), ``scope`` (``matching``: every entry matching ``q``, ``state``, ``alert`` and
``owner``, as the list reads them, instead of the names), and for a pause ``note`` and
``until``. Who may post it is the caller's to check, before anything here runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from celery_periodiq.api import Periodiq
from celery_periodiq.errors import EntryError, EntryNotFoundError, shown
from celery_periodiq.ops.many import BulkResult
from celery_periodiq.store.pages import LIMIT

__all__ = ["MATCHING", "SELECTS", "VERBS", "Report", "carry_out", "matching", "selection_query"]

VERBS = ("pause", "resume", "run", "delete")
"""The bulk actions, as the form's ``action`` names them."""
MATCHING = "matching"
"""The form's ``scope`` that selects every entry matching the list's filters."""
SELECTS = ("q", "state", "alert", "owner")
"""The list's parameters that decide which entries match (not how they are shown)."""
_SHOWN = 10  # names listed in a headline; the rest counted


@dataclass(frozen=True)
class Report:
    """What a bulk action did, in words for the page or the admin's messages."""

    verb: str
    result: BulkResult
    note: str | None = None
    until: str | None = None

    @property
    def headline(self) -> str:
        """``Paused 3 entries until 2h (note: db migration): a, b, c.``"""
        done = list(self.result)
        said = {"pause": "Paused", "resume": "Resumed", "run": "Ran", "delete": "Deleted"}
        how = " now" if self.verb == "run" else ""
        if self.verb == "pause":
            how = (f" until {self.until}" if self.until else "") + (
                f" (note: {self.note})" if self.note else ""
            )
        return f"{said[self.verb]} {_count(len(done))}{how}{_listed(done)}."

    @property
    def skipped(self) -> list[str]:
        """``name: why`` for each entry selected but left as it was."""
        return [f"{name}: {why}" for name, why in self.result.skipped.items()]

    @property
    def skipped_line(self) -> str:
        """``Skipped 2 entries: a (paused already), b (paused already).`` or ``""``."""
        skipped = [f"{name} ({why})" for name, why in self.result.skipped.items()]
        return f"Skipped {_count(len(skipped))}{_listed(skipped)}." if skipped else ""


def carry_out(api: Periodiq, verb: str, names: list[str], form: Mapping[str, str]) -> Report:
    """Carry out the bulk action ``verb`` on the entries the form selects; a delete is
    forced (the dashboard's and the admin's single delete are too). When one of the
    errors below is raised, nothing is changed.

    Raises:
        EntryError: an unknown action, no entry selected, a bad note or ``until``.
        EntryNotFoundError: a name ticked is no entry's (deleted meanwhile), or none
            matches.
        PageError: a filter is invalid.
    """
    if verb not in VERBS:
        raise EntryError(f"no bulk action {shown(verb)} (allowed: {', '.join(VERBS)})")
    chosen = matching(api, form) if form.get("scope") == MATCHING else names
    if not chosen:
        raise EntryError(
            "no entry selected: tick the entries to change, or choose all matching; "
            "nothing was changed"
        )
    note, until = form.get("note") or None, form.get("until") or None
    if verb == "pause":
        result = api.pause_many(names=chosen, note=note, until=until)
        return Report(verb, result, note, until)
    if verb == "resume":
        return Report(verb, api.resume_many(names=chosen))
    if verb == "run":
        return Report(verb, api.trigger_many(names=chosen))
    return Report(verb, api.delete_many(names=chosen, force=True))


def matching(api: Periodiq, params: Mapping[str, str]) -> list[str]:
    """The names of every entry matching the list's search and filters (``q``,
    ``state``, ``alert``, ``owner``), read a page of 1,000 at a time.

    Raises:
        EntryNotFoundError: none matches.
        PageError: a filter is invalid.
    """
    found: list[str] = []
    cursor: str | None = None
    filters = {key: params.get(key) or None for key in SELECTS}
    while True:
        page = api.page(limit=LIMIT, cursor=cursor, sort=None if cursor else "name", **filters)
        found += [item.name for item in page.entries]
        if page.next is None:
            break
        cursor = page.next
    if not found:
        raise EntryNotFoundError("no entry matches the search and filters; nothing was changed")
    return found


def selection_query(params: Mapping[str, str]) -> str:
    """``?q=...&owner=...``: the list's search and filters that ``params`` carry (``""``
    for none), to go back to the list as it was."""
    kept = {key: params[key] for key in (*SELECTS, "sort") if params.get(key)}
    return f"?{urlencode(kept)}" if kept else ""


def _count(number: int) -> str:
    return f"{number:,} {'entry' if number == 1 else 'entries'}"


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN:,} more" if len(names) > _SHOWN else ""
    return f": {', '.join(names[:_SHOWN])}{more}" if names else ""
