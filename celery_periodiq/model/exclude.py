"""An entry's exclusion dates (holidays): days on which none of its ticks runs.

Dates are read in the entry's own time zone (a tick at 23:30 UTC on 24 December is on
the 25th in Europe/Berlin). Stored as sorted ISO dates (``"2026-12-25"``), so one set of
dates is one definition whatever order it was given in.
"""

from __future__ import annotations

import functools
from datetime import date, datetime

from celery_periodiq.errors import EntryError, shown

__all__ = ["MOST_DATES", "exclusion_dates", "exclusion_list"]

MOST_DATES = 1000
"""The most dates an entry excludes."""
_ALLOWED = "a list of dates: 'YYYY-MM-DD' text or datetime.date values"


def exclusion_list(name: str, value: object) -> list[str]:
    """The canonical form of ``exclude=``: sorted ISO dates, each once.

    Raises:
        EntryError: not a list of dates, or too many (the field is ``exclude``).
    """
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
        raise _fail(name, value, _ALLOWED)
    days: set[str] = set()
    for item in value:
        if isinstance(item, datetime) or not isinstance(item, date | str):
            raise _fail(name, item, _ALLOWED)
        if isinstance(item, str):
            try:
                item = date.fromisoformat(item.strip())
            except ValueError:
                raise _fail(name, item, _ALLOWED + " (a real date, as 2026-12-25)") from None
        days.add(item.isoformat())
    if len(days) > MOST_DATES:
        raise _fail(name, f"{len(days)} dates", f"at most {MOST_DATES}")
    return sorted(days)


@functools.lru_cache(maxsize=1024)
def exclusion_dates(days: tuple[str, ...]) -> frozenset[date]:
    """The dates of a canonical list (:func:`exclusion_list`), as a set."""
    return frozenset(date.fromisoformat(day) for day in days)


def _fail(name: str, value: object, allowed: str) -> EntryError:
    error = EntryError(
        f"entry {shown(name)}: exclude={shown(value)} is invalid (allowed: {allowed})"
    )
    error.field = "exclude"
    return error
