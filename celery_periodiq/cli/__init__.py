"""``celery -A proj periodiq ...``: see and steer the schedule from a shell.

Registered through the ``celery.commands`` entry point, so Celery loads the
app (``-A``) and hands it over in ``ctx.obj.app``, as it does for its own
commands. Each command is a thin layer over :func:`celery_periodiq.periodiq`;
the text is rendered by :mod:`celery_periodiq.present.text`, the ``--json``
shapes (documented there) by :mod:`celery_periodiq.present.shapes`; exit codes and
option types live in :mod:`celery_periodiq.cli.options`, colour and tables in
:mod:`celery_periodiq.present.terminal`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import click
from click.core import ParameterSource

from celery_periodiq.api import Periodiq
from celery_periodiq.cli.options import (
    EXIT_CODES,
    EXIT_NOT_FOUND,
    EXIT_PROBLEM,
    Group,
    Instant,
    api_of,
    aware,
    confirm,
    entry_changes,
    entry_options,
    fail,
    handled,
    json_option,
    now_option,
    print_json,
)
from celery_periodiq.cli.simulate import NOW, Moment, Window, resolve, simulation_text
from celery_periodiq.errors import ScheduleError
from celery_periodiq.model.simulate import DEFAULT_LIMIT, MOST_LIMIT
from celery_periodiq.ops import backfill as backfills
from celery_periodiq.ops.import_redbeat import DEFAULT_PREFIX
from celery_periodiq.ops.transfer import ImportReport
from celery_periodiq.present import shapes, text
from celery_periodiq.present.terminal import print_text, style_of, when, width
from celery_periodiq.schedules import parse_schedule
from celery_periodiq.store.views import StoredEntry

__all__ = ["periodiq"]

STATES = ("active", "paused", "running", "quarantined", "disabled", "ended")


def _now(api: Periodiq, at: datetime | None) -> datetime:
    return aware(at, "UTC") or api.now()


@click.group(name="periodiq", cls=Group, epilog=EXIT_CODES)
def periodiq() -> None:
    """See and steer the periodiq schedule: entries, runs, beats.

    Times are shown on each entry's own time zone. Every read command takes
    --json; `COMMAND --help` describes its shape.
    """


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
    help="Show every entry, read and printed a page at a time (sorted per page).",
)
@json_option
@now_option
@click.pass_context
@handled
def list_command(
    ctx: click.Context, owner: str | None, states: tuple[str, ...], limit: int,
    everything: bool, as_json: bool, at: Any,
) -> None:  # fmt: skip
    """List entries, soonest next run first.

    A row per entry: name, state, next run, last run and its outcome; below
    it the schedule as written and in words, the owner, a pause note or a
    problem, and the counters worth a look. The N due soonest are shown
    (--limit); --all walks through every entry, page by page.

    --json: an array of entries {name, state, note, problem, task, schedule,
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
    if as_json:
        print_json([shapes.entry_json(stored) for stored in items])
        return
    total = api.count(owner=owner)
    output = text.list_text(items, _now(api, at), style_of(ctx), width(), total=total)
    print_text(ctx, output)


def _pages(
    api: Periodiq, owner: str | None, states: tuple[str, ...]
) -> Iterator[list[StoredEntry]]:
    """Every entry (of ``owner``, in ``states``), a page at a time, each page sorted."""
    far = datetime.max.replace(tzinfo=UTC)
    if owner is not None:
        source: Iterator[list[StoredEntry]] = iter([api.list(owner=owner)])
    else:
        source = api.pages(batch=500)
    for page in source:
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
    ctx: click.Context, api: Periodiq, pages: Iterator[list[StoredEntry]], as_json: bool,
    at: Any,
) -> None:  # fmt: skip
    """Print pages as they are read: a JSON array, or one table with a closing count."""
    now, style, columns = _now(api, at), style_of(ctx), width()
    states: dict[str, int] = {}
    shown = 0
    if as_json:
        click.echo("[", nl=False)
    for page in pages:
        for stored in page:
            states[stored.status] = states.get(stored.status, 0) + 1
        if as_json:
            items = ",\n".join(shapes.dumps(shapes.entry_json(s)).rstrip() for s in page)
            click.echo(("," if shown else "\n") + items, nl=False)
        else:
            print_text(ctx, text.list_text(page, now, style, columns, header=not shown,
                                           summary=False))  # fmt: skip
        shown += len(page)
    if as_json:
        click.echo("\n]" if shown else "]")
    elif shown:
        print_text(ctx, "\n" + text.count_text(states, shown))
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
    now = _now(api, at)
    details = shapes.Details(
        upcoming=api.upcoming(name, 10, after=now) if stored.entry is not None else [],
        checkpoint=api.has_checkpoint(name),
        events=api.history(name, limit=10),
        default_grace=api.settings.default_grace,
        now=now,
    )
    if as_json:
        print_json(shapes.show_json(stored, details))
    else:
        print_text(
            ctx, text.show_text(stored, details, now=now, style=style_of(ctx), width=width())
        )


@periodiq.command("history")
@click.argument("name")
@click.option("--failures", is_flag=True, help="Only failed and timeboxed runs.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many events, newest first.")  # fmt: skip
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
        print_text(ctx, text.history_text(events, shapes.zone_of(stored), style_of(ctx), width()))


@periodiq.command("failures")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many failures, newest first.")  # fmt: skip
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
    print_text(ctx, text.failures_text(items, style_of(ctx), width()))


@periodiq.command("next")
@click.argument("spec")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the schedule.")
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
    ctx: click.Context, spec: str, tz: str, start: datetime | None, count: int,
    key: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Preview a schedule's run times (no Redis needed).

    SPEC is any form: cron, macro, '@every 30s' or a calendar event (quote it).

    --json: {spec, form, description, tz, from, runs}.
    """
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


@periodiq.command("backfill")
@click.argument("name")
@click.option("--from", "start", type=Instant(), required=True, metavar="ISO",
              help="First instant of the range (no offset: the entry's zone).")  # fmt: skip
@click.option("--to", "end", type=Instant(), required=True, metavar="ISO",
              help="End of the range, itself excluded; not after now.")  # fmt: skip
@click.option("--overlap", type=click.Choice(backfills.OVERLAPS), default="buffer_all",
              show_default=True,
              help="buffer_all: one run after another; allow: all at once.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300.0,
              show_default=True, metavar="SECONDS",
              help="buffer_all: how long to wait for a worker to begin each run.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Say what would run; publish nothing.")
@json_option
@click.pass_context
@handled
def backfill_command(
    ctx: click.Context, name: str, start: datetime, end: datetime, overlap: str,
    timeout: float, dry_run: bool, as_json: bool,
) -> None:  # fmt: skip
    """Run an entry's past ticks now, each with its nominal instant.

    Every tick the schedule fires at from --from up to --to runs, guarded like
    a scheduled run (without the tolerance drop); a tick that already began is
    skipped and says so. buffer_all waits for each run to end before sending
    the next, and prints each as it ends; run the same command again after an
    interruption and it goes on where it stopped. Exits 1 when it stopped early.

    --json: {entry, overlap, dry_run, ticks: [{tick, task_id, outcome}], stalled}.
    """
    api = api_of(ctx)
    zone = shapes.zone_of(api.get(name))
    start, end = (value if value.tzinfo else value.replace(tzinfo=zone) for value in (start, end))

    def shown(tick: backfills.BackfillTick) -> None:
        click.echo(f"{when(tick.nominal, zone)}  {tick.outcome:<11}  {tick.task_id}")

    report = api.backfill(
        name, start, end, overlap=overlap, dry_run=dry_run, timeout=timeout,
        progress=None if as_json else shown,
    )  # fmt: skip
    if as_json:
        print_json(shapes.backfill_json(report))
    else:
        click.echo(text.backfill_summary(report))
    if report.stalled:
        if not as_json:
            click.echo(f"Stopped: {report.stalled}", err=True)
        ctx.exit(EXIT_PROBLEM)


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
    changes = entry_changes(ctx, options, None)
    if not any(form in changes for form in ("cron", "every", "calendar", "at")):
        fail("give one of --cron, --every, --calendar, --at")
    api = api_of(ctx)
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


@periodiq.command("beats")
@json_option
@click.pass_context
@handled
def beats_command(ctx: click.Context, as_json: bool) -> None:
    """List live beats: host, pid, version, uptime, ticks, declarations.

    DECLARES is the digest of the entries a beat declares in code and
    beat_schedule: beats of one version of the code share it; two digests mean
    two versions live (a rolling deploy), as doctor says.

    --json: an array of beats {id, host, pid, version, started, seen,
    last_tick, ticks_claimed, partitions, uptime_s, last_tick_age_s, declared}.
    """
    api = api_of(ctx)
    beats, now = api.beats(), api.now()
    if as_json:
        print_json([shapes.beat_json(beat, now) for beat in beats])
    else:
        print_text(ctx, text.beats_text(beats, now, style_of(ctx), width()))


@periodiq.command("doctor")
@json_option
@click.pass_context
@handled
def doctor_command(ctx: click.Context, as_json: bool) -> None:
    """Check Redis, scripts, beats, clock, broker and entries.

    Redis reachable and 6.2+, the Lua scripts load, at least one live beat,
    this host's clock against Redis's (warn from 1 s, fail from 10 s), the
    broker reachable, no quarantined entries. Exits 1 when a check fails.

    --json: {ok, checks: [{name, status (ok, warn, fail, skip), detail}]}.
    """
    checks = api_of(ctx).diagnose()
    report = shapes.doctor_json(checks)
    if as_json:
        print_json(report)
    else:
        print_text(ctx, text.doctor_text(checks, style_of(ctx), width()))
    if not report["ok"]:
        ctx.exit(EXIT_PROBLEM)


@periodiq.command("metrics")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=9808, show_default=True,
              help="Port to listen on (0: any free one).")  # fmt: skip
@click.option("--max-entries", type=click.IntRange(min=0), default=500, show_default=True,
              help="Entries labelled by name; the others are summed as _other.")  # fmt: skip
@click.option("--once", is_flag=True, help="Print the metrics once and exit.")
@click.pass_context
@handled
def metrics_command(ctx: click.Context, host: str, port: int, max_entries: int, once: bool) -> None:
    """Serve Prometheus metrics of the schedule.

    At http://HOST:PORT/metrics, read from Redis at each scrape: beats, entries
    by state, runs and skips per entry, overdue and failing entries, tick
    lateness and start delay. Needs the metrics extra:
    pip install 'celery-periodiq[metrics]'.
    """
    try:
        from prometheus_client import CollectorRegistry, generate_latest, start_http_server

        from celery_periodiq.ops.metrics import PeriodiqCollector
    except ImportError:
        fail("metrics need prometheus-client: pip install 'celery-periodiq[metrics]'")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PeriodiqCollector(api_of(ctx), max_entries))
    if once:
        click.echo(generate_latest(registry).decode(), nl=False)
        return
    server, thread = start_http_server(port, host, registry)
    click.echo(f"periodiq metrics at http://{host}:{server.server_port}/metrics", err=True)
    thread.join()


@periodiq.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on.")  # fmt: skip
@click.option("--token", envvar="PERIODIQ_WEB_TOKEN", metavar="TEXT",
              help="What changes need (or PERIODIQ_WEB_TOKEN); without: read-only.")  # fmt: skip
@click.pass_context
@handled
def serve_command(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Serve the web dashboard.

    Entries, an entry's history and runs, beats, /api/ and /metrics. Reads are
    open to whoever reaches the port; pause, resume, run now and delete need the
    token (a browser signs in once; API clients send Authorization: Bearer
    TOKEN). Needs the web extra: pip install 'celery-periodiq[web]'.
    """
    try:
        import uvicorn

        from celery_periodiq.web import make_app
    except ImportError:
        fail("the dashboard needs the web extra: pip install 'celery-periodiq[web]'")
    if token is not None and len(token) < 8:
        fail("--token must be at least 8 characters")
    api = api_of(ctx)
    where = "read-only" if token is None else "changes need the token"
    click.echo(f"periodiq dashboard at http://{host}:{port}/ ({where})", err=True)
    uvicorn.run(make_app(api, token), host=host, port=port, log_level="warning")


@periodiq.command("export")
@click.option("--owner", metavar="TAG", help="Only entries with this owner tag.")
@click.option("--source", type=click.Choice(["runtime", "code", "config"]),
              help="Only entries from the API, from code, or from beat_schedule.")  # fmt: skip
@click.option("--no-state", is_flag=True, help="Definitions only: no pause state, no checkpoint.")
@click.pass_context
@handled
def export_command(
    ctx: click.Context, owner: str | None, source: str | None, no_state: bool
) -> None:
    """Print the schedule as one versioned JSON document.

    Definitions and, unless --no-state, each entry's pause state and note, last
    run and checkpoint: celery periodiq export > schedule.json.
    """
    print_json(api_of(ctx).export(owner=owner, source=source, state=not no_state))


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
    ctx: click.Context, file: Any, from_redbeat: bool, redbeat_url: str | None,
    redbeat_key_prefix: str, django_dump: Any, naive_tz: str | None, skip_invalid: bool,
    replace: bool, dry_run: bool,
) -> None:  # fmt: skip
    """Import a schedule: an export, RedBeat or django-celery-beat.

    FILE is a document of `periodiq export` (- for stdin); --from-redbeat reads
    celery-redbeat's entries, static and dynamic, from its Redis;
    --from-django-celery-beat reads a dumpdata file (no Django needed). Each entry
    keeps its name (imported ones become runtime entries). Every record is checked
    first: with any bad one nothing is written and each is named (by position in FILE,
    by Redis key in RedBeat, by pk in a dump); with --from-* --skip-invalid imports the
    others. What is not carried over (options periodiq does not keep, entries this app
    declares) is printed as notes.
    """
    given = {"FILE": file is not None, "--from-redbeat": from_redbeat,
             "--from-django-celery-beat": django_dump is not None}  # fmt: skip
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
            url=redbeat_url, key_prefix=redbeat_key_prefix, replace=replace, dry_run=dry_run,
            skip_invalid=skip_invalid,
        )  # fmt: skip
    else:
        try:
            document = json.load(file)
        except ValueError as error:
            fail(f"{file.name} is not JSON: {error}")
        report = api.import_schedule(document, replace=replace, dry_run=dry_run)
    _print_import(report)


def _only_with(ctx: click.Context, needed: str, present: bool, *parameters: str) -> None:
    """Fail when one of ``parameters`` is given on the command line without ``needed``."""
    for parameter in parameters:
        if not present and ctx.get_parameter_source(parameter) == ParameterSource.COMMANDLINE:
            fail(f"--{parameter.replace('_', '-')} applies only with {needed}")


def _print_import(report: ImportReport) -> None:
    """What an import did (or, under --dry-run, would do): one line per kind of outcome,
    then each record skipped and each note on its own line."""
    verb = "would be" if report.dry_run else "were"
    for what, names in (("created", report.created), ("replaced", report.replaced),
                        ("unchanged", report.unchanged)):  # fmt: skip
        if names:
            click.echo(f"{len(names)} {verb} {what}: {', '.join(names)}")
    if not (report.created or report.replaced or report.unchanged):
        click.echo("nothing to import: no entries found")
    if report.skipped:
        click.echo(f"{len(report.skipped)} {verb} skipped:")
        for why in report.skipped:
            click.echo(f"  {why}")
    for note in report.notes:
        click.echo(f"note: {note}")


@periodiq.command("simulate")
@click.option("--from", "start", type=Moment(), metavar="ISO",
              help="Start here (default: now, from each entry's stored next tick; given, "
              "from each definition). ISO 8601, UTC without an offset; now; or -2h.")  # fmt: skip
@click.option(
    "--to",
    "end",
    type=Moment(),
    metavar="ISO",
    help="End here, not included (default: --from + 24h); +2d counts from --from.",
)
@click.option("--down", type=Window(), metavar="FROM..TO",
              help="The beats are down from FROM until TO (inside --from..--to; +1h counts "
              "from --from): what they publish when they come back.")  # fmt: skip
@click.option("--owner", metavar="TAG", help="Only entries with this owner tag.")
@click.option("--name", "names", metavar="NAME", multiple=True,
              help="Only this entry (repeat for several).")  # fmt: skip
@click.option("--limit", type=click.IntRange(0, MOST_LIMIT), default=DEFAULT_LIMIT,
              show_default=True,
              help="Fires listed per entry; the others are counted.")  # fmt: skip
@json_option
@click.pass_context
@handled
def simulate_command(
    ctx: click.Context, start: Any, end: Any, down: Any, owner: str | None,
    names: tuple[str, ...], limit: int, as_json: bool,
) -> None:  # fmt: skip
    """Show what the beats would publish over a span; writes nothing.

    Each tick is planned by the beat's own code: claimed when due (jitter
    applied), decided by the entry's policy. A tick due while the beats are
    --down is claimed when they come back: the catch-up policy (catchup,
    catchup_window, periodiq_catchup_cap) says what runs then and what is
    missed. A tick is in the span when it is claimed at or after --from and
    before --to (the catch-up at the end of --down is shown even at --to).
    Paused, disabled, ended and quarantined entries say why nothing fires;
    @reboot entries fire when the beats come back. No run is known ahead:
    the simulation assumes none is unfinished when a tick is due.

    --json: {from, to, down {from, to}, origin, limit, assumes, entries:
    [{name, state, tz, schedule, origin, reason, fires: [{kind (on_time,
    caught_up, reboot, shutdown), tick, tick_local, due, due_local, sent,
    stands_for, task_id}], more_fires, more_exact, dropped: [{at, reason
    (missed, skipped_overlap), count, first, ticks}], totals {fires,
    caught_up, missed}}], totals {entries, fires, caught_up, missed, exact}}.
    """
    api = api_of(ctx)
    now = api.now()
    stored = start is None or start == NOW
    base = now if stored else resolve(start, now, now)
    window = None if down is None else (resolve(down[0], base, now), resolve(down[1], base, now))
    simulation = api.simulate(
        start=None if stored else base, end=None if end is None else resolve(end, base, now),
        down=window, owner=owner, names=list(names) or None, limit=limit,
    )  # fmt: skip
    if as_json:
        print_json(shapes.simulation_json(simulation))
    else:
        print_text(ctx, simulation_text(simulation, style_of(ctx), width()))
