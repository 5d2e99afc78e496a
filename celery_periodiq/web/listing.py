"""The entries page and ``/api/entries``: a page of the whole schedule
(:meth:`Periodiq.page <celery_periodiq.api.Periodiq.page>`) from the query string, and
what each of them shows of it.

Query parameters, the same for both: ``limit`` (1 to 1000, default 100), ``cursor``
(the ``next`` or ``previous`` of a page), ``q`` (a search; ``text*``: names that start
with ``text``), ``state``, ``alert``, ``owner`` and ``sort`` (``name`` or ``next``; the
dashboard's default is ``next``, the API's ``name``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import QueryParams

from celery_periodiq.api import Periodiq
from celery_periodiq.errors import PageError, shown
from celery_periodiq.present import shapes
from celery_periodiq.store.cursor import decode
from celery_periodiq.store.pages import LIMIT, EntryPage
from celery_periodiq.store.summary import STATUSES, summary

__all__ = ["FILTERS", "links", "page_json", "read_page", "totals"]

FILTERS = ("q", "state", "alert", "owner", "sort")
"""The parameters a page's links carry on (with the cursor and the limit)."""
DEFAULT_LIMIT = 100


def read_page(api: Periodiq, params: QueryParams, sort: str | None = None) -> EntryPage:
    """The page the query string asks for (``sort``: the default order).

    Raises:
        PageError: a parameter is invalid.
    """
    text = params.get("limit") or str(DEFAULT_LIMIT)
    try:
        limit = int(text)
    except ValueError:
        raise PageError(
            f"limit={shown(text)} is invalid (allowed: a whole number 1 to {LIMIT})"
        ) from None
    cursor = params.get("cursor") or None
    return api.page(
        limit=limit,
        cursor=cursor,
        q=params.get("q") or None,
        state=params.get("state") or None,
        alert=params.get("alert") or None,
        owner=params.get("owner") or None,
        sort=params.get("sort") or (None if cursor else sort),
    )


def page_json(page: EntryPage) -> dict[str, Any]:
    """``/api/entries``: the entries as ``list --json`` shows each, the cursors, the
    schedule's total, how many match (when known) and how far a search that stopped
    early went."""
    searched = page.searched
    return {
        "entries": [shapes.entry_json(item) for item in page.entries],
        "next": page.next,
        "previous": page.previous,
        "total": page.total,
        "matched": page.matched,
        "searched": None if searched is None else {"through": searched[0], "of": searched[1]},
    }


def links(params: QueryParams, page: EntryPage, path: str = "/") -> dict[str, str | None]:
    """The URLs of the first, previous and next pages, with the same filters, and the
    one that goes on with a search that stopped early (``onward``)."""
    kept = {key: params[key] for key in (*FILTERS, "limit") if params.get(key)}

    def to(cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return f"{path}?{urlencode({**kept, 'cursor': cursor})}"

    first = f"{path}?{urlencode(kept)}" if kept else path
    cursor = params.get("cursor")
    backward = not decode(cursor).forward if cursor else False  # read_page checked it
    return {
        "first": first if cursor else None,
        "previous": to(page.previous),
        "next": to(page.next),
        "onward": to(page.previous if backward else page.next) if page.searched else None,
    }


def totals(api: Periodiq) -> list[tuple[str, int, str]]:
    """The schedule counted from the summaries the scripts keep (no entry read): each
    status and alert with its count and the link that filters by it."""
    with api.runtime.guard():
        counted = summary(api.store)
    found = [("entries", counted.total, "/")]
    found += [
        (status, counted.statuses[status], f"/?state={status}")
        for status in reversed(STATUSES)
        if counted.statuses.get(status)
    ]
    found += [
        (alert, len(names), f"/?alert={alert}")
        for alert, names in (("overdue", counted.overdue), ("failing", counted.failing))
        if names
    ]
    return found
