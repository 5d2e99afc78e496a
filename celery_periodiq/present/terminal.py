"""Terminal building blocks for ``celery periodiq``: colour, time phrases, tables.

Nothing here reads the clock or the terminal: "now" and the width are arguments, and
whether to colour is the caller's choice (the CLI decides it from the terminal).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

__all__ = [
    "Column",
    "Row",
    "Style",
    "duration",
    "hanging",
    "iso",
    "number",
    "pairs",
    "relative",
    "seconds",
    "span",
    "stored_instant",
    "table",
    "utc_iso",
    "when",
    "when_near",
]

_GAP = "  "
# The ANSI escapes of each role, byte for byte what click.style writes for the look in
# the comment (tests/test_cli.py holds them to it); present/ does not depend on click.
_ROLES = {
    "head": "\x1b[1m",  # bold
    "dim": "\x1b[2m",  # dim
    "good": "\x1b[32m",  # fg green
    "bad": "\x1b[31m\x1b[1m",  # fg red, bold
    "warn": "\x1b[33m",  # fg yellow
    "info": "\x1b[36m",  # fg cyan
}
_RESET = "\x1b[0m"
# Entry states, run outcomes, history kinds and doctor statuses, by colour.
_KINDS = {
    "good": ("active", "succeeded", "ok"),
    "bad": ("quarantined", "failed", "timeboxed", "fail"),
    "warn": ("paused", "revoked", "expired", "retrying", "retry", "dropped_too_soon",
             "dropped_group_limit", "skipped_overlap", "missed", "warn"),
    "info": ("running", "started", "triggered"),
    "dim": ("disabled", "ended", "duplicate", "enqueued", "skip", "skipped_window", "deferred",
            "excluded"),
}  # fmt: skip # table: one colour per row
_ROLE_OF = {kind: role for role, kinds in _KINDS.items() for kind in kinds}


class Style:
    """Colour by role or by kind (``failed``, ``paused``, ...); a no-op when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, role: str | None) -> str:
        look = _ROLES.get(_ROLE_OF.get(role or "", role or ""))
        if not self.color or look is None or not text:
            return text  # no colour, or a kind this version does not know
        return f"{look}{text}{_RESET}"


# time


def iso(instant: datetime | None) -> str | None:
    """ISO 8601 with its offset; milliseconds only when there are some."""
    if instant is None:
        return None
    return instant.isoformat(timespec="milliseconds" if instant.microsecond else "seconds")


def utc_iso(instant: datetime | None) -> str | None:
    """:func:`iso` in UTC."""
    return None if instant is None else iso(instant.astimezone(UTC))


def when(instant: datetime, zone: tzinfo, *, precise: bool = False) -> str:
    """``2026-01-01 09:00:00 CET``: the wall time on ``zone`` with its abbreviation."""
    local = instant.astimezone(zone)
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if precise and local.microsecond:
        text += f".{local.microsecond // 1000:03d}"
    return f"{text} {local.tzname()}"


def when_near(instant: datetime, zone: tzinfo, now: datetime) -> str:
    """:func:`when`, without the date when it is the same day as ``now`` on ``zone``."""
    local = instant.astimezone(zone)
    if local.date() != now.astimezone(zone).date():
        return when(instant, zone)
    return f"{local.strftime('%H:%M:%S')} {local.tzname()}"


def span(length: float) -> str:
    """A compact length of time: ``45s``, ``4m05s``, ``3h05m``, ``2d03h``, ``64y``."""
    whole = int(length)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h" if days < 365 else f"{days // 365}y"


def relative(instant: datetime, now: datetime, *, coarse: bool = False) -> str:
    """``in 4m05s``, ``12s ago``, or ``now`` within a second; ``coarse``: ``in 4m``."""
    delta = (instant - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    length = span(abs(delta))
    if coarse:
        length = length[: next(i for i, char in enumerate(length) if char.isalpha()) + 1]
    return f"in {length}" if delta > 0 else f"{length} ago"


def seconds(value: float) -> str:
    """A policy length: ``2.5 s`` below two minutes, else ``12h00m``."""
    return f"{value:g} s" if value < 120 else span(value)


def duration(ms: int | None) -> str:
    """How long a run took: ``250 ms``, ``3.1 s``, ``4m05s``; empty when unknown."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s" if ms < 60_000 else span(ms / 1000)


def number(value: str | None) -> int | None:
    """A whole number stored as text; None when absent or unreadable."""
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def stored_instant(ms: str | None) -> datetime | None:
    """An instant stored as milliseconds since the epoch."""
    whole = number(ms)
    return None if whole is None else datetime.fromtimestamp(whole / 1000, UTC)


# layout


@dataclass(frozen=True, slots=True)
class Column:
    """A table column; ``shrink`` is the narrowest it may get when the table is too wide."""

    title: str
    shrink: int | None = None
    """Cut to this width at most (cells end in …) when the table is too wide."""
    overflow: bool = False
    """A cell too long for the column moves to a line of its own below the row."""


@dataclass(slots=True)
class Row:
    """One table row and the lines printed under it."""

    cells: list[tuple[str, str | None]]
    """(text, colour role) per column."""
    details: list[str] = field(default_factory=list)
    """Lines under the row, indented and wrapped."""
    details_role: str | None = "dim"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def table(
    columns: Sequence[Column],
    rows: Sequence[Row],
    width: int,
    style: Style,
    order: Sequence[tuple[int, int]] = (),
) -> list[str]:
    """Aligned lines no wider than ``width`` (as far as the columns may shrink).

    ``order`` lists (column, narrowest) steps to take, in turn, before each
    column's own ``shrink``: a name can give up a little before a time does.
    """
    widths = [
        max([len(column.title), *(len(row.cells[i][0]) for row in rows)])
        for i, column in enumerate(columns)
    ]
    excess = sum(widths) + len(_GAP) * (len(widths) - 1) - width
    steps = [*order, *((i, c.shrink) for i, c in enumerate(columns) if c.shrink is not None)]
    for i, narrowest in steps:
        cut = max(min(excess, widths[i] - narrowest), 0)
        widths[i] -= cut
        excess -= cut
    titles = [column.title.ljust(size) for column, size in zip(columns, widths, strict=True)]
    lines = [style(_GAP.join(titles).rstrip(), "head")]
    for row in rows:
        parts, details = [], list(row.details)
        for (text, role), column, size in zip(row.cells, columns, widths, strict=True):
            if column.overflow and len(text) > size:
                details.insert(0, text)
                text = ""
            shown = _fit(text, size)
            parts.append(style(shown, role) + " " * (size - len(shown)))
        lines.append(_GAP.join(parts).rstrip())
        for detail in details:
            wrapped = hanging(detail, width, 2, 4)
            lines.extend(style(line, row.details_role) for line in wrapped)
    return lines


def hanging(text: str, width: int, first: int, rest: int) -> list[str]:
    """``text`` wrapped to ``width``, its first line indented ``first``, the others ``rest``."""
    return textwrap.wrap(
        text,
        max(width, rest + 20),
        initial_indent=" " * first,
        subsequent_indent=" " * rest,
        break_on_hyphens=False,
    ) or [" " * first]


def pairs(items: Iterable[tuple[str, str]], width: int, style: Style, label: int = 12) -> list[str]:
    """``  label       value`` lines, long values wrapped under the value column."""
    lines = []
    for key, value in items:
        wrapped = hanging(value, width, label + 2, label + 2)
        lines.append(f"  {style(key.ljust(label), 'dim')}{wrapped[0][label + 2 :]}".rstrip())
        lines.extend(wrapped[1:])
    return lines
