"""The commands that operate the cluster: ``backfill`` (run past ticks now), ``beats``,
``doctor``, ``metrics`` (Prometheus) and ``serve`` (the web dashboard).
"""

from __future__ import annotations

from datetime import datetime

import click
from click.core import ParameterSource

from celery_periodiq.cli.group import periodiq, print_text, style_of, width
from celery_periodiq.cli.options import (
    EXIT_PROBLEM,
    Instant,
    api_of,
    fail,
    handled,
    json_option,
    print_json,
)
from celery_periodiq.ops import backfill as backfills
from celery_periodiq.ops.doctor import DEFAULT_SAMPLE
from celery_periodiq.present import shapes
from celery_periodiq.present.cluster import beats_text, doctor_text
from celery_periodiq.present.events import backfill_summary
from celery_periodiq.present.terminal import when

__all__ = [
    "backfill_command",
    "beats_command",
    "doctor_command",
    "metrics_command",
    "serve_command",
]


@periodiq.command("backfill")
@click.argument("name")
@click.option(
    "--from",
    "start",
    type=Instant(),
    required=True,
    metavar="ISO",
    help="First instant of the range (no offset: the entry's zone).",
)
@click.option(
    "--to",
    "end",
    type=Instant(),
    required=True,
    metavar="ISO",
    help="End of the range, itself excluded; not after now.",
)
@click.option(
    "--overlap",
    type=click.Choice(backfills.OVERLAPS),
    default="buffer_all",
    show_default=True,
    help="buffer_all: one run after another; allow: all at once.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="buffer_all: how long to wait for a worker to begin each run.",
)
@click.option("--dry-run", is_flag=True, help="Say what would run; publish nothing.")
@json_option
@click.pass_context
@handled
def backfill_command(
    ctx: click.Context,
    name: str,
    start: datetime,
    end: datetime,
    overlap: str,
    timeout: float,
    dry_run: bool,
    as_json: bool,
) -> None:
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
        name,
        start,
        end,
        overlap=overlap,
        dry_run=dry_run,
        timeout=timeout,
        progress=None if as_json else shown,
    )
    if as_json:
        print_json(shapes.backfill_json(report))
    else:
        click.echo(backfill_summary(report))
    if report.stalled:
        if not as_json:
            click.echo(f"Stopped: {report.stalled}", err=True)
        ctx.exit(EXIT_PROBLEM)


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
        print_text(ctx, beats_text(beats, now, style_of(ctx), width()))


@periodiq.command("doctor")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    default=DEFAULT_SAMPLE,
    show_default=True,
    metavar="N",
    help="Up to N entries, read them all; above N, read the quarantined ones and N "
    "others drawn at random.",
)
@click.option("--full", is_flag=True, help="Read every entry, however many (no sample).")
@click.option(
    "--reindex",
    is_flag=True,
    help="First build the read indexes afresh (what a scrape and the dashboard read).",
)
@json_option
@click.pass_context
@handled
def doctor_command(
    ctx: click.Context, sample: int, full: bool, reindex: bool, as_json: bool
) -> None:
    """Check Redis, scripts, beats, clock, broker and entries.

    Redis reachable and 6.2+, the Lua scripts load, at least one live beat,
    this host's clock against Redis's (warn from 1 s, fail from 10 s), the
    broker reachable; then the entries: none quarantined, overdue or failing,
    every task known to the app, sent runs started by a worker; the read
    indexes built and naming every entry (--reindex rebuilds them first). On a schedule
    larger than --sample the entries checked are every quarantined one and a
    random sample, and each of those checks says so ("checked 10,000 of
    1,000,000 entries"); --full reads them all. Exits 1 when a check fails.

    --json: {ok, sampled, checks: [{name, status (ok, warn, fail, skip),
    detail}]}; the checks of the entries also {checked, total, sampled}.
    """
    if full and ctx.get_parameter_source("sample") == ParameterSource.COMMANDLINE:
        fail("give --sample N or --full, not both")
    api = api_of(ctx)
    if reindex:
        indexed = api.reindex()
        if not as_json:
            click.echo(f"rebuilt the read indexes of {indexed} entries", err=True)
    checks = api.diagnose(sample=None if full else sample)
    report = shapes.doctor_json(checks)
    if as_json:
        print_json(report)
    else:
        print_text(ctx, doctor_text(checks, style_of(ctx), width()))
    if not report["ok"]:
        ctx.exit(EXIT_PROBLEM)


# Beside the dashboard's 8765 (whose /metrics says the same). Not 9808, celery-exporter's,
# which often runs beside it; Prometheus' exporter range, 9100-9999, is all allocated.
METRICS_PORT = 8766


@periodiq.command("metrics")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=METRICS_PORT,
    show_default=True,
    help="Port to listen on (0: any free one).",
)
@click.option(
    "--max-entries",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="Entries labelled by name; the others are summed as _other.",
)
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
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0: every interface).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on.",
)
@click.option(
    "--token",
    envvar="PERIODIQ_WEB_TOKEN",
    metavar="TEXT",
    help="What changes need (or PERIODIQ_WEB_TOKEN); without: read-only.",
)
@click.pass_context
@handled
def serve_command(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Serve the web dashboard.

    Entries, an entry's history and runs, beats, /api/ and /metrics. Reads are
    open to whoever reaches the port; creating and editing entries, pause,
    resume, run now and delete need the token (a browser signs in once; API
    clients send Authorization: Bearer TOKEN). Needs the web extra: pip
    install 'celery-periodiq[web]'.
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
