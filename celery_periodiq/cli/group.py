"""The ``periodiq`` click group, and what its commands share: the "now" they show times
against, and the terminal they print to (colour, width).

The commands join the group from their topic modules (:mod:`~celery_periodiq.cli.inspect`,
:mod:`~celery_periodiq.cli.entries`, :mod:`~celery_periodiq.cli.ops`,
:mod:`~celery_periodiq.cli.transfer`, :mod:`~celery_periodiq.cli.simulate`), which
:mod:`celery_periodiq.cli` imports.
"""

from __future__ import annotations

import os
import shutil
import sys
from datetime import datetime

import click

from celery_periodiq.api import Periodiq
from celery_periodiq.cli.options import EXIT_CODES, Group, aware
from celery_periodiq.present.terminal import Style

__all__ = ["now_of", "periodiq", "print_text", "style_of", "width"]


@click.group(name="periodiq", cls=Group, epilog=EXIT_CODES)
def periodiq() -> None:
    """See and steer the periodiq schedule: entries, runs, beats.

    Times are shown on each entry's own time zone, but for list's NEXT RUN
    column, which is one zone for all (UTC). Every read command takes --json;
    `COMMAND --help` describes its shape.
    """


def now_of(api: Periodiq, at: datetime | None) -> datetime:
    """The instant a command shows times against: ``--now`` (UTC without an offset), else
    the Redis clock."""
    return aware(at, "UTC") or api.now()


def style_of(ctx: click.Context) -> Style:
    """Colour only on a terminal, and never with NO_COLOR or celery's --no-color."""
    off = getattr(ctx.obj, "no_color", False) or os.environ.get("NO_COLOR")
    return Style(not off and sys.stdout.isatty())


def width() -> int:
    """The terminal's width; off a terminal $COLUMNS or 80, so piped output is stable."""
    if sys.stdout.isatty():
        return max(shutil.get_terminal_size((80, 24)).columns, 40)
    columns = os.environ.get("COLUMNS", "")
    return max(int(columns), 40) if columns.isdigit() else 80


def print_text(ctx: click.Context, output: str) -> None:
    """Print a command's text (with its colour, when colour is on)."""
    click.echo(output, color=style_of(ctx).color)
