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
from celery_periodiq.cli.options import EXIT_NOT_FOUND, api_of, confirm, fail, handled
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
@click.argument("name")
@click.option("--note", metavar="TEXT", help="Why; `list` and `show` print it.")
@click.pass_context
@handled
def pause_command(ctx: click.Context, name: str, note: str | None) -> None:
    """Pause an entry until `resume` (definition and state are kept)."""
    api_of(ctx).pause(name, note)
    click.echo(f"Paused {name}" + (f" (note: {note})." if note else "."))


@periodiq.command("resume")
@click.argument("name")
@click.pass_context
@handled
def resume_command(ctx: click.Context, name: str) -> None:
    """Resume a paused entry from its next run after now."""
    api = api_of(ctx)
    stored = api.resume(name)
    click.echo(f"Resumed {name}; {_next_run(stored, api.now())}.")


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
