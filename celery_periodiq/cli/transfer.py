"""The commands that move a schedule in and out: ``export`` to a versioned JSON
document or JSON Lines, ``import`` from either, from celery-redbeat or from
django-celery-beat.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from click.core import ParameterSource

from celery_periodiq.cli.group import periodiq
from celery_periodiq.cli.options import api_of, fail, handled
from celery_periodiq.errors import EntryError
from celery_periodiq.ops.export_file import LAYOUTS, read_export
from celery_periodiq.ops.import_redbeat import DEFAULT_PREFIX
from celery_periodiq.ops.transfer import ImportReport

__all__ = ["export_command", "import_command"]


@periodiq.command("export")
@click.option("--owner", metavar="TAG", help="Only entries with this owner tag.")
@click.option(
    "--source",
    type=click.Choice(["runtime", "code", "config"]),
    help="Only entries from the API, from code, or from beat_schedule.",
)
@click.option("--no-state", is_flag=True, help="Definitions only: no pause state, no checkpoint.")
@click.option(
    "--format",
    "layout",
    type=click.Choice(LAYOUTS),
    default="json",
    show_default=True,
    help="json: one document; jsonl: JSON Lines, one entry a line.",
)
@click.pass_context
@handled
def export_command(
    ctx: click.Context, owner: str | None, source: str | None, no_state: bool, layout: str
) -> None:
    """Print the schedule as a versioned JSON document, or as JSON Lines.

    Definitions and, unless --no-state, each entry's pause state and note, last
    run and checkpoint: celery periodiq export > schedule.json. Entries are
    printed as they are read, a page at a time, so memory stays flat at any
    size; they come in the order Redis scans them, not by name.

    --format jsonl: a header line {format, version, exported_at}, one entry a
    line {definition, state}, and a closing line {"count": N}; import reads
    both formats and refuses a JSON Lines file without its closing line.
    """
    api_of(ctx).export_to(
        sys.stdout,
        layout=layout,
        owner=owner,
        source=source,
        state=not no_state,
    )


@periodiq.command("import")
@click.argument("file", type=click.File("r"), required=False)
@click.option(
    "--from-redbeat",
    is_flag=True,
    help="Read celery-redbeat's entries (static and dynamic) from its Redis.",
)
@click.option(
    "--redbeat-url",
    metavar="URL",
    help="RedBeat's Redis (default: redbeat_redis_url, else the broker).",
)
@click.option(
    "--redbeat-key-prefix",
    metavar="PREFIX",
    default=DEFAULT_PREFIX,
    show_default=True,
    help="RedBeat's redbeat_key_prefix.",
)
@click.option(
    "--from-django-celery-beat",
    "django_dump",
    type=click.File("r"),
    metavar="DUMP",
    help="Read the output of manage.py dumpdata django_celery_beat (- for stdin).",
)
@click.option(
    "--naive-tz",
    metavar="ZONE",
    help="With --from-django-celery-beat: the zone of naive times (USE_TZ=False: "
    "TIME_ZONE; default: the app's timezone).",
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="With --from-*: import what converts and list the records that do not.",
)
@click.option(
    "--replace", is_flag=True, help="Also replace entries that exist with another definition."
)
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.pass_context
@handled
def import_command(
    ctx: click.Context,
    file: Any,
    from_redbeat: bool,
    redbeat_url: str | None,
    redbeat_key_prefix: str,
    django_dump: Any,
    naive_tz: str | None,
    skip_invalid: bool,
    replace: bool,
    dry_run: bool,
) -> None:
    """Import a schedule: an export, RedBeat or django-celery-beat.

    FILE is what `periodiq export` printed, in either format (- for stdin);
    --from-redbeat reads celery-redbeat's entries, static and dynamic, from its
    Redis; --from-django-celery-beat reads a dumpdata file (no Django needed). Each entry
    keeps its name (imported ones become runtime entries). Every record is checked
    first: with any bad one nothing is written and each is named (by position in FILE,
    by Redis key in RedBeat, by pk in a dump); with --from-* --skip-invalid imports the
    others. What is not carried over (options periodiq does not keep, entries this app
    declares) is printed as notes.
    """
    given = {
        "FILE": file is not None,
        "--from-redbeat": from_redbeat,
        "--from-django-celery-beat": django_dump is not None,
    }
    if sum(given.values()) != 1:
        fail(f"give one of {', '.join(given)} (not several, not none)")
    _only_with(ctx, "--from-redbeat", from_redbeat, "redbeat_url", "redbeat_key_prefix")
    _only_with(ctx, "--from-django-celery-beat", django_dump is not None, "naive_tz")
    _only_with(ctx, "--from-*", not given["FILE"], "skip_invalid")
    api = api_of(ctx)
    if django_dump is not None:
        try:
            dump = json.load(django_dump)
        except ValueError as error:
            fail(f"{django_dump.name} is not JSON: {error}")
        report = api.import_django_celery_beat(
            dump, replace=replace, dry_run=dry_run, skip_invalid=skip_invalid, naive_tz=naive_tz
        )
    elif from_redbeat:
        report = api.import_redbeat(
            url=redbeat_url,
            key_prefix=redbeat_key_prefix,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
        )
    else:
        try:
            document = read_export(file)
        except EntryError as error:
            fail(f"{file.name} {error}")
        report = api.import_schedule(document, replace=replace, dry_run=dry_run)
    _print_import(report)


def _only_with(ctx: click.Context, needed: str, present: bool, *parameters: str) -> None:
    """Fail when one of ``parameters`` is given on the command line without ``needed``."""
    for parameter in parameters:
        if not present and ctx.get_parameter_source(parameter) == ParameterSource.COMMANDLINE:
            fail(f"--{parameter.replace('_', '-')} applies only with {needed}")


def _print_import(report: ImportReport) -> None:
    """What an import did (or, under --dry-run, would do): one line per kind of outcome
    (names sorted: an export lists entries in the order Redis scans them), then each
    record skipped and each note on its own line."""
    verb = "would be" if report.dry_run else "were"
    for what, names in (
        ("created", report.created),
        ("replaced", report.replaced),
        ("unchanged", report.unchanged),
    ):
        if names:
            click.echo(f"{len(names)} {verb} {what}: {', '.join(sorted(names))}")
    if not (report.created or report.replaced or report.unchanged):
        click.echo("nothing to import: no entries found")
    if report.skipped:
        click.echo(f"{len(report.skipped)} {verb} skipped:")
        for why in report.skipped:
            click.echo(f"  {why}")
    for note in report.notes:
        click.echo(f"note: {note}")
