"""``celery periodiq simulate``: the command and its instant options.

Instants are ISO 8601 (an instant written without an offset is read as UTC),
``now`` (the Redis clock) or a signed duration (``+2h``, ``-30m``, ``+1d12h``):
counted from now in ``--from``, from ``--from`` in ``--to`` and ``--down``.
The text is :mod:`celery_periodiq.present.simulation`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from celery_periodiq.cli.group import periodiq, print_text, style_of, width
from celery_periodiq.cli.options import ParamType, api_of, handled, json_option, print_json
from celery_periodiq.errors import ScheduleError
from celery_periodiq.model.simulation import DEFAULT_LIMIT, MOST_LIMIT
from celery_periodiq.present import shapes
from celery_periodiq.present.simulation import simulation_text
from celery_periodiq.schedules.interval import parse_duration

__all__ = ["NOW", "Moment", "Window", "resolve", "simulate_command"]

NOW = "now"
_FORMS = "an ISO 8601 date-time (2026-03-29T02:00, UTC unless it has an offset), now, or +2h / -30m"


def _moment(text: str) -> datetime | timedelta | str:
    """An ISO instant (naive: UTC), ``now``, or a signed duration; ValueError otherwise."""
    value = text.strip()
    if value.lower() == NOW:
        return NOW
    if value[:1] in "+-" and len(value) > 1:
        try:
            length = parse_duration(value[1:], value)
        except ScheduleError:
            raise ValueError(value) from None
        return -length if value[0] == "-" else length
    instant = datetime.fromisoformat(value)
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)


class Moment(ParamType):
    """An instant: ISO 8601 (UTC without an offset), ``now``, or ``+2h`` / ``-30m``."""

    name = "iso"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return _moment(value)
        except ValueError:
            self.fail(f"{value!r} is not {_FORMS}", param, ctx)


class Window(ParamType):
    """``FROM..TO``: two instants as :class:`Moment` reads them."""

    name = "from..to"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        parts = value.split("..")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            self.fail(f"{value!r} is not FROM..TO (such as 2026-03-29T01:00..+4h)", param, ctx)
        moments = []
        for part in parts:
            try:
                moments.append(_moment(part))
            except ValueError:
                self.fail(f"{part.strip()!r} in {value!r} is not {_FORMS}", param, ctx)
        return tuple(moments)


def resolve(value: datetime | timedelta | str, base: datetime, now: datetime) -> datetime:
    """An option's instant: ``now``, a duration after ``base``, or itself."""
    if isinstance(value, timedelta):
        return base + value
    if isinstance(value, str):
        return now
    return value


@periodiq.command("simulate")
@click.option(
    "--from",
    "start",
    type=Moment(),
    metavar="ISO",
    help="Start here (default: now, from each entry's stored next tick; given, "
    "from each definition). ISO 8601, UTC without an offset; now; or -2h.",
)
@click.option(
    "--to",
    "end",
    type=Moment(),
    metavar="ISO",
    help="End here, not included (default: --from + 24h); +2d counts from --from.",
)
@click.option(
    "--down",
    type=Window(),
    metavar="FROM..TO",
    help="The beats are down from FROM until TO (inside --from..--to; +1h counts "
    "from --from): what they publish when they come back.",
)
@click.option("--owner", metavar="TAG", help="Only entries with this owner tag.")
@click.option(
    "--name", "names", metavar="NAME", multiple=True, help="Only this entry (repeat for several)."
)
@click.option(
    "--limit",
    type=click.IntRange(0, MOST_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Fires listed per entry; the others are counted.",
)
@json_option
@click.pass_context
@handled
def simulate_command(
    ctx: click.Context,
    start: Any,
    end: Any,
    down: Any,
    owner: str | None,
    names: tuple[str, ...],
    limit: int,
    as_json: bool,
) -> None:
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
        start=None if stored else base,
        end=None if end is None else resolve(end, base, now),
        down=window,
        owner=owner,
        names=list(names) or None,
        limit=limit,
    )
    if as_json:
        print_json(shapes.simulation_json(simulation))
    else:
        print_text(ctx, simulation_text(simulation, style_of(ctx), width()))
