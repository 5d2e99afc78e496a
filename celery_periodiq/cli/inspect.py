"""The commands that read the schedule: ``list``, ``show``, ``history``, ``failures``,
and ``next`` (a schedule's run times, without Redis).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import click
from celery import Celery

from celery_periodiq.api import Periodiq
from celery_periodiq.cli.group import now_of, periodiq, print_text, style_of, width
from celery_periodiq.cli.options import (
    Instant,
    api_of,
    aware,
    fail,
    handled,
    json_option,
    now_option,
    print_json,
)
from celery_periodiq.config import app_zone
from celery_periodiq.errors import ScheduleError
from celery_periodiq.present import shapes, text
from celery_periodiq.present.events import failures_text, history_text
from celery_periodiq.present.windows import in_window_json
from celery_periodiq.schedules import parse_schedule
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.worker.plain import is_plain

__all__ = ["failures_command", "history_command", "list_command", "next_command", "show_command"]

STATES = ("active", "paused", "running", "quarantined", "disabled", "ended")


@periodiq.command("list")
@click.option("--owner", metavar="TAG", help="Only entries with this owner tag.")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only entries in this state (repeat for several).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Show the N entries due soonest; a larger schedule is not read whole.",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Show every entry, each page printed as it is read: pages in the order Redis "
    "scans them, each sorted by next run.",
)
@json_option
@now_option
@click.pass_context
@handled
def list_command(
    ctx: click.Context,
    owner: str | None,
    states: tuple[str, ...],
    limit: int,
    everything: bool,
    as_json: bool,
    at: Any,
) -> None:
    """List entries, soonest next run first.

    A row per entry: name, state, next run (UTC; "due 5s ago" when no beat has
    sent it yet), last run and its outcome; below it the schedule as written
    and in words with its zone, the owner, a pause note or a problem, and the
    counters worth a look (since the entry was added). A closing line says
    when no beat is running. The N due soonest are shown
    (--limit); --all walks through every entry, page by page, and prints each
    page as it is read, so its memory stays flat at any size; its pages come in
    the order Redis scans them (sort the output if you need one order).

    --json: an array of entries {name, state, note, in_window, problem, task, schedule,
    form, description, tz, owner, source, enabled, next_run, last_run,
    last_status, last_error, last_duration_ms, last_finished, last_task_id,
    running_task_id, counters}.
    """
    api = api_of(ctx)
    if everything or states:
        pages = _pages(api, owner, states)
        if not everything:
            pages = _first(pages, limit)
        _print_pages(ctx, api, pages, as_json, at)
        return
    items = api.list(owner=owner, limit=limit)
    held, now = api.windows(), now_of(api, at)
    if as_json:
        print_json([shapes.entry_json(s, in_window_json(s, held, now)) for s in items])
        return
    total = api.count(owner=owner)
    output = text.list_text(
        items, now, style_of(ctx), width(), total=total, beats=_live_beats(api, at), windows=held
    )
    print_text(ctx, output)


def _live_beats(api: Periodiq, at: Any) -> int | None:
    """How many beats are live, for ``list`` to say when none sends the runs due; None
    with --now (which beats live then is not known)."""
    return None if at is not None else len(api.beats())


def _pages(
    api: Periodiq, owner: str | None, states: tuple[str, ...]
) -> Iterator[list[StoredEntry]]:
    """Every entry (of ``owner``, in ``states``), a page at a time, each page sorted."""
    far = datetime.max.replace(tzinfo=UTC)
    for page in api.pages(batch=500, owner=owner):
        kept = [stored for stored in page if not states or stored.status in states]
        if kept:
            yield sorted(kept, key=lambda item: (item.next_run or far, item.name))


def _first(pages: Iterator[list[StoredEntry]], limit: int) -> Iterator[list[StoredEntry]]:
    """The pages up to ``limit`` entries in all."""
    left = limit
    for page in pages:
        yield page[:left]
        left -= len(page[:left])
        if left <= 0:
            return


def _print_pages(
    ctx: click.Context,
    api: Periodiq,
    pages: Iterator[list[StoredEntry]],
    as_json: bool,
    at: Any,
) -> None:
    """Print pages as they are read: a JSON array, or one table with a closing count."""
    now, style, columns = now_of(api, at), style_of(ctx), width()
    held = api.windows()
    states: dict[str, int] = {}
    shown = 0
    if as_json:
        click.echo("[", nl=False)
    for page in pages:
        for stored in page:
            states[stored.status] = states.get(stored.status, 0) + 1
        if as_json:
            items = ",\n".join(
                shapes.dumps(shapes.entry_json(s, in_window_json(s, held, now))).rstrip()
                for s in page
            )
            click.echo(("," if shown else "\n") + items, nl=False)
        else:
            print_text(
                ctx,
                text.list_text(
                    page, now, style, columns, header=not shown, summary=False, windows=held
                ),
            )
        shown += len(page)
    if as_json:
        click.echo("\n]" if shown else "]")
    elif shown:
        print_text(ctx, "\n" + text.count_text(states, shown, beats=_live_beats(api, at)))
    else:
        print_text(ctx, "No entries.")


@periodiq.command("show")
@click.argument("name")
@json_option
@now_option
@click.pass_context
@handled
def show_command(ctx: click.Context, name: str, as_json: bool, at: Any) -> None:
    """Show everything about one entry.

    NAME's definition, policy (with the numbers for the next tick), state,
    running marker, checkpoint, counters, next 10 run times and last 10
    events.

    --json: an entry (see `list --help`) plus version, definition,
    raw_definition, effective {interval, tolerance, timebox, time_limit},
    upcoming, checkpoint, history (events, see `history --help`).
    """
    api = api_of(ctx)
    stored = api.get(name)
    now = now_of(api, at)
    details = shapes.Details(
        upcoming=api.upcoming(name, 10, after=now) if stored.entry is not None else [],
        checkpoint=api.has_checkpoint(name),
        events=api.history(name, limit=10),
        default_grace=api.settings.default_grace,
        now=now,
        plain=stored.entry is not None and bool(is_plain(api.app, stored.entry.task)),
    )
    if as_json:
        print_json(shapes.show_json(stored, details, in_window_json(stored, api.windows(), now)))
    else:
        print_text(
            ctx,
            text.show_text(
                stored, details, now=now, style=style_of(ctx), width=width(), windows=api.windows()
            ),
        )


@periodiq.command("history")
@click.argument("name")
@click.option("--failures", is_flag=True, help="Only failed and timeboxed runs.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many events, newest first.",
)
@json_option
@click.pass_context
@handled
def history_command(
    ctx: click.Context, name: str, failures: bool, limit: int, as_json: bool
) -> None:
    """Show an entry's newest events.

    Kinds: enqueued, triggered, started, succeeded, failed, timeboxed,
    revoked, expired, retrying, retry, duplicate, dropped_too_soon,
    skipped_overlap, missed.

    --json: an array of events {id, kind, at, tick, task_id, host,
    duration_ms, missed, error, error_type, error_message, note}.
    """
    api = api_of(ctx)
    stored = api.get(name)
    events = api.history(name, limit=limit, failures_only=failures)
    if as_json:
        print_json([shapes.event_json(event) for event in events])
    else:
        zone = shapes.zone_of(stored)
        output = history_text(events, zone, style_of(ctx), width(), failures=failures)
        print_text(ctx, output)


@periodiq.command("failures")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many failures, newest first.",
)
@json_option
@click.pass_context
@handled
def failures_command(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Show the newest failed runs across all entries.

    Failed and timeboxed runs, each with its error type and message.

    --json: an array of events (see `history --help`), each with its entry
    name first: {entry, id, kind, ...}.
    """
    api = api_of(ctx)
    found = api.failures(limit=limit)
    if as_json:
        print_json([shapes.event_json(event, name) for name, event in found])
        return
    zones = {stored.name: shapes.zone_of(stored) for stored in api.list()}
    items = [(name, event, zones.get(name, UTC)) for name, event in found]
    print_text(ctx, failures_text(items, style_of(ctx), width()))


@periodiq.command("next")
@click.argument("spec")
@click.option(
    "--tz", help="IANA time zone of the schedule (default: the app's timezone, else UTC)."
)
@click.option(
    "--from",
    "start",
    type=Instant(),
    metavar="ISO",
    help="Count from this instant (default: now); without an offset it is in --tz.",
)
@click.option(
    "-n",
    "count",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="How many run times.",
)
@click.option("--key", metavar="NAME", help="What Jenkins H hashes: the entry name.")
@json_option
@click.pass_context
@handled
def next_command(
    ctx: click.Context,
    spec: str,
    tz: str | None,
    start: datetime | None,
    count: int,
    key: str | None,
    as_json: bool,
) -> None:
    """Preview a schedule's run times (no Redis needed).

    SPEC is any form: cron, macro, '@every 30s' or a calendar event (quote it).

    --json: {spec, form, description, tz, from, runs}.
    """
    if tz is None:
        app = getattr(ctx.obj, "app", None)
        tz = app_zone(app) if isinstance(app, Celery) else "UTC"
    try:
        schedule = parse_schedule(spec, tz=tz, key=key)
    except ScheduleError as error:
        hint = "; pass --key NAME" if key is None and "H needs a key" in str(error) else ""
        fail(f"{error}{hint}")
    begin = aware(start, tz) or datetime.now(UTC)
    fires = schedule.upcoming(begin, count)
    if as_json:
        print_json(shapes.next_json(schedule, begin, fires))
    else:
        print_text(ctx, text.next_text(schedule, begin, fires, style_of(ctx)))
