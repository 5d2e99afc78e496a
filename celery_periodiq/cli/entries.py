"""The commands that change entries: ``add``, ``update``, ``delete``, ``pause``,
``resume`` and ``run``.

The schedule, message and policy options of ``add`` and ``update`` are in
:mod:`celery_periodiq.cli.entry_options`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from celery_periodiq.api import Periodiq
from celery_periodiq.cli.entry_options import entry_changes, entry_options
from celery_periodiq.cli.group import periodiq
from celery_periodiq.cli.options import EXIT_NOT_FOUND, api_of, aware, confirm, fail, handled
from celery_periodiq.ops.pauses import GLOB
from celery_periodiq.present import shapes, text
from celery_periodiq.store.views import StoredEntry

__all__ = [
    "add_command",
    "delete_command",
    "pause_command",
    "resume_command",
    "run_command",
    "update_command",
]


_FORCE_HELP = (
    "Also change an entry declared in code or beat_schedule (the next deploy, a beat "
    "starting, restores its declaration)."
)


def _check_declared(api: Periodiq, name: str, force: bool, verb: str) -> None:
    where = api.declared_in(name)
    if where is not None and not force:
        fail(
            f"entry {name!r} is declared in {where}: the next deploy (a beat starting) "
            f"restores it; pass --force to {verb} it anyway"
        )


@periodiq.command("delete")
@click.argument("name", required=False)
@click.option("--owner", metavar="TAG", help="Delete every entry with this owner tag instead.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@click.pass_context
@handled
def delete_command(
    ctx: click.Context, name: str | None, owner: str | None, yes: bool, force: bool
) -> None:
    """Delete an entry, or every entry of an owner.

    Delete the entry NAME, or with --owner every entry tagged TAG; state,
    history and checkpoints go with them. Asks first unless --yes. A damaged
    entry (quarantined) is deleted whole, whatever is wrong with its keys.
    """
    api = api_of(ctx)
    if name is not None and owner is None:
        _check_declared(api, name, force, "delete")  # an unknown name fails here too
        confirm(f"Delete entry {name!r} with its state and history?", yes)
        api.delete(name, force=True)
        click.echo(f"Deleted {name}.")
    elif owner is not None and name is None:
        names = [stored.name for stored in api.list(owner=owner)]
        if not names:
            fail(f"no entries have owner {owner!r}", EXIT_NOT_FOUND)
        noun = "entry" if len(names) == 1 else "entries"
        confirm(f"Delete {len(names)} {noun} with owner {owner!r}: {', '.join(names)}?", yes)
        click.echo(f"Deleted {', '.join(api.delete_owner(owner)) or 'nothing'}.")
    else:
        fail("give an entry NAME or --owner TAG, not both or neither")


@periodiq.command("add")
@click.argument("name")
@click.argument("task")
@entry_options
@click.pass_context
@handled
def add_command(ctx: click.Context, /, name: str, task: str, **options: Any) -> None:
    """Create an entry that runs TASK on a schedule.

    NAME is new (it is also what Jenkins H hashes); TASK is a Celery task
    name such as proj.tasks.report. Give exactly one of --cron, --every,
    --calendar, --at. Beats pick the entry up within a second.
    """
    if not any(options.get(form) is not None for form in ("cron", "every", "calendar", "at")):
        fail("give one of --cron, --every, --calendar, --at")
    api = api_of(ctx)
    changes = entry_changes(ctx, options, None, api.settings.default_tz)
    _saved(api, "Added", api.add(name, task, **changes))


@periodiq.command("update")
@click.argument("name")
@click.option("--task", metavar="TASK", help="Run this task instead.")
@entry_options
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@click.pass_context
@handled
def update_command(ctx: click.Context, /, name: str, force: bool, **options: Any) -> None:
    """Change an entry's schedule, message or policy.

    Only the options given change. Its next run is computed afresh; its
    state, counters and history are kept. Updating a damaged entry
    (quarantined because a key holds the wrong type) repairs it.
    """
    if not entry_changes(ctx, options, None):  # checked before Redis is asked anything
        fail("nothing to change: give at least one option")
    api = api_of(ctx)
    _check_declared(api, name, force, "update")
    changes = entry_changes(ctx, options, api.get(name).entry)
    _saved(api, "Updated", api.update(name, force=True, **changes))


def _next_run(stored: StoredEntry, now: datetime) -> str:
    upcoming = text.upcoming_text(stored, now)
    return f"no next run ({stored.status})" if upcoming == "-" else f"next run {upcoming}"


def _saved(api: Periodiq, verb: str, stored: StoredEntry) -> None:
    schedule = shapes.schedule_of(stored)
    what = "" if schedule is None else f": {schedule.spec} ({schedule.describe()})"
    click.echo(f"{verb} {stored.name}{what}; {_next_run(stored, api.now())}.")


@periodiq.command("pause")
@click.argument("name", required=False)
@click.option("--owner", metavar="TAG", help="Pause every entry with this owner tag instead.")
@click.option("--all", "everything", is_flag=True, help="Pause every entry of the schedule.")
@click.option("--note", metavar="TEXT", help="Why; `list` and `show` print it.")
@click.option(
    "--until",
    metavar="WHEN",
    help="End the pause by itself: a duration (2h, 1h30m), seconds, or an ISO 8601 "
    "date-time (read in the default time zone when it has no offset).",
)
@click.pass_context
@handled
def pause_command(
    ctx: click.Context,
    name: str | None,
    owner: str | None,
    everything: bool,
    note: str | None,
    until: str | None,
) -> None:
    """Pause an entry, or many, until `resume` or until --until.

    NAME is an entry, or a glob of names ('report-*'); --owner and --all
    select instead. Definition and state are kept; ticks due while paused are
    skipped. Entries paused already keep their own pause.
    """
    api = api_of(ctx)
    end = _until(api, until)
    selector = _selector(name, owner, everything)
    if selector is None:
        assert name is not None
        stored = api.pause(name, note, until=end)
        ends = f" {text.paused_text(stored, api.now())}" if stored.paused_until else ""
        click.echo(f"Paused {name}{ends}" + (f" (note: {note})." if note else "."))
        return
    paused = api.pause_many(**selector, note=note, until=end)
    ends = "" if end is None else f" until {until}"
    click.echo(_changed("Paused", paused, ends + (f" (note: {note})" if note else "")))


@periodiq.command("resume")
@click.argument("name", required=False)
@click.option("--owner", metavar="TAG", help="Resume every paused entry with this owner tag.")
@click.option("--all", "everything", is_flag=True, help="Resume every paused entry.")
@click.pass_context
@handled
def resume_command(
    ctx: click.Context, name: str | None, owner: str | None, everything: bool
) -> None:
    """Resume a paused entry, or many, from its next run after now.

    NAME is an entry, or a glob of names ('report-*'); --owner and --all
    select instead.
    """
    api = api_of(ctx)
    selector = _selector(name, owner, everything)
    if selector is None:
        assert name is not None
        stored = api.resume(name)
        click.echo(f"Resumed {name}; {_next_run(stored, api.now())}.")
        return
    click.echo(_changed("Resumed", api.resume_many(**selector)))


def _selector(name: str | None, owner: str | None, everything: bool) -> dict[str, Any] | None:
    """The selector of pause_many/resume_many that the arguments give; None: one entry."""
    given = [name is not None, owner is not None, everything]
    if sum(given) != 1:
        fail("give an entry NAME (or a glob such as 'report-*'), --owner TAG or --all; one of them")
    if name is not None and not GLOB & set(name):
        return None
    return {"match": name, "owner": owner, "all": everything}


def _until(api: Periodiq, until: str | None) -> datetime | str | float | None:
    """--until as pause() takes it: a naive date-time read in the default time zone."""
    if until is None:
        return None
    try:
        return float(until)  # seconds
    except ValueError:
        if not any(c in until for c in "-:T"):
            return until  # a duration such as 2h
    try:
        instant = datetime.fromisoformat(until.strip())
    except ValueError:
        fail(f"--until {until!r} is not a duration (2h, 1h30m), seconds or an ISO 8601 date-time")
    return aware(instant, api.settings.default_tz)


def _changed(verb: str, names: list[str], how: str = "") -> str:
    """``Paused 2 entries until 2h: a, b.`` (ten names at most)."""
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    listed = f": {', '.join(names[:10])}{more}" if names else ""
    return f"{verb} {len(names)} {'entry' if len(names) == 1 else 'entries'}{how}{listed}."


@periodiq.command("run")
@click.argument("name")
@click.pass_context
@handled
def run_command(ctx: click.Context, name: str) -> None:
    """Run an entry now, outside its schedule.

    The worker's overlap guard still applies: under overlap=skip the run is
    skipped while an earlier one is unfinished.
    """
    task_id = api_of(ctx).trigger(name)
    click.echo(f"Sent a run of {name} as task {task_id}.")
