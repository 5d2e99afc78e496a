"""The ``audit`` command: who changed what, one entry's trail or the whole schedule's."""

from __future__ import annotations

import click

from celery_periodiq.cli.group import periodiq, print_text, style_of, width
from celery_periodiq.cli.options import api_of, handled, json_option, print_json
from celery_periodiq.config import app_zone
from celery_periodiq.present.audit import audit_json, audit_text
from celery_periodiq.schedules.zones import zone

__all__ = ["audit_command"]


@periodiq.command("audit")
@click.argument("name", required=False)
@click.option(
    "--since",
    metavar="WHEN",
    help="Only records at or after WHEN: a duration back from now (2h, 7d) or an ISO 8601 "
    "instant with an offset.",
)
@click.option("--actor", metavar="WHO", help="Only records whose actor contains WHO.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="How many records, newest first.",
)
@json_option
@click.pass_context
@handled
def audit_command(
    ctx: click.Context,
    name: str | None,
    since: str | None,
    actor: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show who changed what: an entry's audit trail, or every entry's.

    Each change is recorded by the script that makes it: add, update (with
    the fields it changed), delete, pause and resume (with their note),
    trigger, backfill, a beat's reconcile and the end of a timed pause, an
    import, a quarantine; with who (the API's actor=, the CLI's user@host,
    the dashboard's or the admin's signed-in user, a beat's id), when (the
    Redis clock) and why. A deleted entry's trail stays for
    periodiq_audit_window.

    --json: an array of records {name, at, action, actor, via, note,
    changes, until, task_id}; changes: field -> [before, after].
    """
    api = api_of(ctx)
    records = api.audit(name, since=since, actor=actor, limit=limit)
    if as_json:
        print_json([audit_json(record) for record in records])
    else:
        local = zone(app_zone(api.app))
        print_text(ctx, audit_text(records, local, style_of(ctx), width(), entry=name is None))
