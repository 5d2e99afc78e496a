"""The schedule, message and policy options of ``add`` and ``update``, and how the ones
typed on the command line become the API's keyword arguments.

One option per row of ``_ENTRY_OPTIONS``, in the order ``--help`` lists them; the
option types (:class:`~celery_periodiq.cli.options.Seconds`, ...) are in
:mod:`celery_periodiq.cli.options`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from celery.bin.base import CeleryOption
from click.core import ParameterSource

from celery_periodiq.cli.options import Instant, JsonValue, Maybe, Seconds, aware, fail
from celery_periodiq.config import CATCHUP_POLICIES, OVERLAP_POLICIES
from celery_periodiq.model.entry import AUTO, Entry

__all__ = ["entry_changes", "entry_options"]

F = TypeVar("F", bound=Callable[..., Any])


def _option(*decls: str, group: str, **attrs: Any) -> Callable[[F], F]:
    return click.option(*decls, cls=CeleryOption, help_group=group, **attrs)


_SCHEDULE, _MESSAGE, _POLICY = "Schedule (add needs exactly one form)", "Message", "Policy"
_ALERTS = "Alerts"
_ENTRY_OPTIONS: list[Callable[[F], F]] = [
    _option("--cron", metavar="SPEC", group=_SCHEDULE,
            help="Cron (5, 6 or 7 fields, seconds first), macro (@daily) or @reboot/@shutdown."),
    _option("--every", metavar="INTERVAL", group=_SCHEDULE,
            help="Interval: seconds (30) or a duration (30s, 1h30m, '@every 2d')."),
    _option("--calendar", metavar="SPEC", group=_SCHEDULE,
            help="systemd calendar event ('Mon..Fri 09:00', daily)."),
    _option("--at", type=Instant(), metavar="ISO", group=_SCHEDULE,
            help="Run once, at this instant (with an offset: 2026-12-01T09:00:00+01:00)."),
    _option("--tz", metavar="TZ", group=_SCHEDULE,
            help="IANA time zone the schedule is read in (default: the app's timezone, "
                 "else UTC)."),
    _option("--start-at", type=Instant(none=None), metavar="ISO", group=_SCHEDULE,
            help="Nothing fires before this (intervals anchor here); 'none' clears."),
    _option("--end-at", type=Instant(none=None), metavar="ISO", group=_SCHEDULE,
            help="Nothing fires after this; 'none' clears. Times without an offset use --tz."),
    _option("--max-runs", type=Maybe(click.INT, none=None), metavar="N|none", group=_SCHEDULE,
            help="End after the beat sent N runs (1 to 10**9); 'none' clears (no limit)."),
    _option("--exclude", metavar="DATES", group=_SCHEDULE,
            help="Dates none of its ticks runs on, comma-separated (2026-12-25,2027-01-01), "
            "in the entry's zone; '' clears."),
    _option("--enabled/--disabled", default=None, group=_SCHEDULE,
            help="A disabled entry keeps its definition but never fires."),
    _option("--args", type=JsonValue(list, '\'[1, "a"]\''), metavar="JSON", group=_MESSAGE,
            help="Positional arguments, a JSON array."),
    _option("--kwargs", type=JsonValue(dict, '\'{"full": true}\''), metavar="JSON",
            group=_MESSAGE, help="Keyword arguments, a JSON object."),
    _option("--queue", metavar="NAME", group=_MESSAGE, help="Queue to send to ('' clears)."),
    _option("--priority", type=Maybe(click.IntRange(0, 255), none=None), metavar="0-255",
            group=_MESSAGE, help="Message priority ('none' clears)."),
    _option("--owner", metavar="TAG", group=_MESSAGE,
            help="Owner tag, for `list --owner` and `delete --owner` ('' clears)."),
    _option("--group", metavar="NAME", group=_POLICY,
            help="Group whose periodiq_group_limits limit applies (default: the owner; "
                 "'' clears)."),
    _option("--tolerance", type=Seconds(auto=AUTO), group=_POLICY,
            help="How early a run may start before last run + interval (auto: 10%)."),
    _option("--timebox", type=Seconds(auto=AUTO, none=None), group=_POLICY,
            help="Soft time limit of a run (auto: half the interval; none: off)."),
    _option("--grace", type=Seconds(auto=None), group=_POLICY,
            help="From the soft to the hard time limit (auto: derived)."),
    _option("--overlap", type=click.Choice(OVERLAP_POLICIES), group=_POLICY,
            help="While a run is unfinished: skip new ones, allow them, or buffer one."),
    _option("--catchup", type=click.Choice(CATCHUP_POLICIES), group=_POLICY,
            help="After missed ticks: run the last, skip them, or run all (bounded)."),
    _option("--catchup-window", type=Seconds(none=None), group=_POLICY,
            help="How late a missed tick may still run (none: any)."),
    _option("--expires", type=Seconds(auto=AUTO, none=None), group=_POLICY,
            help="How long a sent run may wait to start (auto: until the next tick)."),
    _option("--jitter", type=Seconds(), group=_POLICY,
            help="Delay each tick by a stable random amount below this."),
    _option("--alert-after", type=Seconds(auto=AUTO, none=None), group=_ALERTS,
            help="Overdue after this long without a successful run (auto: two intervals "
                 "plus the timebox; none: never)."),
    _option("--failure-threshold", type=click.IntRange(1, 10_000), metavar="N",
            group=_ALERTS, help="Failing after N failed or timeboxed runs in a row (3)."),
    _option("--pause-on-failure/--no-pause-on-failure", default=None, group=_ALERTS,
            help="Pause the entry when it becomes failing."),
]  # fmt: skip # table: one option per row, in the order --help lists them
_ENTRY_KEYS = frozenset(
    {
        "cron",
        "every",
        "calendar",
        "at",
        "tz",
        "start_at",
        "end_at",
        "enabled",
        "args",
        "kwargs",
        "queue",
        "priority",
        "owner",
        "group",
        "tolerance",
        "timebox",
        "grace",
        "overlap",
        "catchup",
        "catchup_window",
        "expires",
        "jitter",
        "task",
        "alert_after",
        "failure_threshold",
        "pause_on_failure",
        "max_runs",
        "exclude",
    }
)


def entry_options(function: F) -> F:
    """The schedule, message and policy options of ``add`` and ``update``."""
    for option in reversed(_ENTRY_OPTIONS):
        function = option(function)
    return function


def _every(value: str) -> float | str:
    try:
        return float(value)
    except ValueError:
        return value


def entry_changes(
    ctx: click.Context, values: dict[str, Any], current: Entry | None, default_tz: str = "UTC"
) -> dict[str, Any]:
    """The API keyword arguments for the options typed on the command line.

    An option left out changes nothing; ``current`` (for ``update``) supplies
    the options that ``--queue``/``--priority`` leave as they are, and the
    zone of times written without an offset (for ``add``: ``default_tz``, the app's).
    """
    given = {
        key: value
        for key, value in values.items()
        if key in _ENTRY_KEYS and ctx.get_parameter_source(key) == ParameterSource.COMMANDLINE
    }
    if len([key for key in ("cron", "every", "calendar", "at") if key in given]) > 1:
        fail("give one of --cron, --every, --calendar, --at, not several")
    changes = {key: value for key, value in given.items() if key not in ("queue", "priority")}
    if "every" in given:
        changes["every"] = _every(given["every"])
    if "exclude" in given:
        changes["exclude"] = [day for day in given["exclude"].split(",") if day.strip()]
    for tag in ("owner", "group"):
        if tag in given:
            changes[tag] = given[tag] or None
    tz = given.get("tz") or (current.tz if current is not None else default_tz)
    for key in ("start_at", "end_at"):
        if key in given:
            changes[key] = aware(given[key], tz)
    if "queue" in given or "priority" in given:
        options = dict(current.options) if current is not None else {}
        for key in ("queue", "priority"):
            if key in given and given[key] in (None, ""):
                options.pop(key, None)
            elif key in given:
                options[key] = given[key]
        changes["options"] = options
    return changes
