"""``window add``, ``window list`` and ``window remove``: maintenance windows in which
the ticks of the whole schedule, an owner's entries or one entry are skipped or
deferred (:meth:`Periodiq.add_window <celery_periodiq.api.Periodiq.add_window>`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from celery_periodiq.cli.group import now_of, periodiq, print_text
from celery_periodiq.cli.options import (
    EXIT_CODES,
    Group,
    Instant,
    api_of,
    aware,
    handled,
    json_option,
    now_option,
    print_json,
)
from celery_periodiq.ops.windows import next_windows
from celery_periodiq.present import windows as shown

__all__ = ["window_group"]


@periodiq.group("window", cls=Group, epilog=EXIT_CODES)
def window_group() -> None:
    """Maintenance windows: skip or defer the ticks inside.

    A window is recurring (--schedule, any schedule form, with --duration) or
    one-off (--start and --end); for the whole schedule, an owner's entries or
    one entry (--scope). Every beat applies a change within a second.
    """


@window_group.command("add")
@click.argument("window_id", metavar="ID")
@click.option(
    "--scope",
    default="all",
    show_default=True,
    metavar="SCOPE",
    help="all, owner:TAG or entry:NAME.",
)
@click.option(
    "--policy",
    type=click.Choice(["skip", "defer"]),
    default="skip",
    show_default=True,
    help="skip: ticks inside do not run; defer: one catch-up run at the end, standing for them.",
)
@click.option(
    "--schedule",
    metavar="SPEC",
    help="When a recurring window opens: cron, calendar event, macro, '@every 6h'.",
)
@click.option("--duration", metavar="DURATION", help="How long each opening lasts (2h, 90m).")
@click.option(
    "--start",
    type=Instant(),
    metavar="ISO",
    help="A one-off window's start (for a recurring one: none before it); "
    "without an offset it is read in --tz.",
)
@click.option(
    "--end",
    type=Instant(),
    metavar="ISO",
    help="A one-off window's end (for a recurring one: none after it).",
)
@click.option(
    "--tz",
    default="UTC",
    show_default=True,
    metavar="ZONE",
    help="The IANA zone --schedule and times without an offset are read in.",
)
@click.option("--note", metavar="TEXT", help="Why; `window list` prints it.")
@click.option("--replace", is_flag=True, help="Change the window of that id if there is one.")
@click.pass_context
@handled
def add_command(
    ctx: click.Context,
    /,
    window_id: str,
    start: datetime | None,
    end: datetime | None,
    tz: str,
    **parts: Any,
) -> None:
    """Add a maintenance window ID."""
    api = api_of(ctx)
    window = api.add_window(window_id, start=aware(start, tz), end=aware(end, tz), tz=tz, **parts)
    click.echo(f"Added window {shown.window_line(window, api.now())}.")


@window_group.command("list")
@json_option
@now_option
@click.pass_context
@handled
def list_command(ctx: click.Context, as_json: bool, at: datetime | None) -> None:
    """List the maintenance windows, each with its current or next opening.

    --json prints an array of {id, scope, policy, schedule, tz, duration (s),
    start, end, note, open (true while open), opens, closes (the current or
    next opening; null when none is left)}.
    """
    api = api_of(ctx)
    now = now_of(api, at)
    found = next_windows(api.windows(), now)
    if as_json:
        print_json([shown.window_json(window, opening, now) for window, opening in found])
        return
    print_text(ctx, shown.windows_text(found, now))


@window_group.command("remove")
@click.argument("window_id", metavar="ID")
@click.pass_context
@handled
def remove_command(ctx: click.Context, window_id: str) -> None:
    """Remove the maintenance window ID (ticks it deferred then follow their entry's
    catch-up policy)."""
    api_of(ctx).remove_window(window_id)
    click.echo(f"Removed window {window_id}.")
