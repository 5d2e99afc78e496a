"""The text of entries and schedules: the ``list`` table, the ``show`` page of one entry,
and the ``next`` preview of a schedule's run times, readable at 80 columns.

Pure functions of what the API returned and of "now", so the same inputs
always print the same text. Absolute times are on each entry's own time zone,
with its abbreviation. Runs and events are in :mod:`celery_periodiq.present.events`,
beats and doctor in :mod:`celery_periodiq.present.cluster`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from celery_periodiq.model.entry import AUTO, Entry
from celery_periodiq.model.windows import Window
from celery_periodiq.present.events import history_lines
from celery_periodiq.present.shapes import Details, effective, schedule_of, zone_of
from celery_periodiq.present.terminal import (
    Column,
    Row,
    Style,
    duration,
    number,
    pairs,
    relative,
    seconds,
    table,
    when,
    when_near,
)
from celery_periodiq.present.windows import in_window
from celery_periodiq.schedules import EventSchedule, IntervalSchedule, Schedule
from celery_periodiq.store.views import StoredEntry

__all__ = ["count_text", "list_text", "next_text", "show_text", "upcoming_text"]

# (counter, one, many): the counters worth a glance in `list`, in this order.
_GLANCE = (
    ("started", "run", "runs"),
    ("failed", "failed", "failed"),
    ("timeboxed", "timeboxed", "timeboxed"),
    ("revoked", "revoked", "revoked"),
    ("expired", "expired", "expired"),
    ("skipped_overlap", "skipped", "skipped"),
    ("missed", "missed", "missed"),
    ("dropped_too_soon", "dropped", "dropped"),
    ("dropped_group_limit", "over its group's limit", "over its group's limit"),
    ("duplicate", "duplicate", "duplicates"),
)
# Counters in the order a run meets them; any others follow alphabetically.
_LIFECYCLE = (
    "enqueued",
    "started",
    "succeeded",
    "failed",
    "timeboxed",
    "revoked",
    "retrying",
    "expired",
    "skipped_overlap",
    "missed",
    "dropped_too_soon",
    "dropped_group_limit",
    "duplicate",
)
_NO_BEAT = "No beat is running: no run is sent (start one: celery -A PROJ beat -S periodiq)."
_FORMS = {"cron": "cron", "calendar": "calendar", "every": "interval", "at": "one-off"}
_EVENT_PHRASES = {"reboot": "at cluster start", "shutdown": "at last beat stop"}
_OVERLAP = {
    "skip": "no run starts while one is unfinished",
    "allow": "runs may overlap",
    "buffer_one": "one run may wait while one is unfinished",
}
_CATCHUP = {
    "last": "missed ticks fold into one run",
    "skip": "missed ticks do not run",
    "all": "every missed tick runs (up to the catch-up cap)",
}


def upcoming_text(stored: StoredEntry, now: datetime, *, short: bool = False) -> str:
    """When the entry runs next: ``2026-01-01 09:00:00 CET (in 5m00s)``, or why it does not.

    ``short`` leaves out the date when it is today, and rounds the relative time.
    """
    schedule = schedule_of(stored)
    if stored.next_run is not None:
        zone = zone_of(stored)
        shown = when_near(stored.next_run, zone, now) if short else when(stored.next_run, zone)
        return f"{shown} ({_due(stored.next_run, now, coarse=short)})"
    if isinstance(schedule, EventSchedule) and stored.status in ("active", "running"):
        return _EVENT_PHRASES.get(schedule.event, schedule.describe())
    return "-"


def _due(instant: datetime, now: datetime, *, coarse: bool) -> str:
    """``in 4m05s``; ``due now`` within a second, ``due 12s ago`` for a tick no beat has
    sent yet (a past next run is one: the beat moves it on as it sends it)."""
    if (instant - now).total_seconds() >= 1:
        return relative(instant, now, coarse=coarse)
    return "due " + relative(instant, now, coarse=coarse)


def paused_text(stored: StoredEntry, now: datetime) -> str:
    """``until 2026-01-01 09:00:00 CET (in 2h00m)`` for a timed pause (``ended 5s ago``
    once no beat has resumed it yet), ``until resumed``; "" when not paused."""
    if not stored.paused:
        return ""
    end = stored.paused_until
    if end is None:
        return "until resumed"
    ago = relative(end, now, coarse=True)
    if end <= now:
        ago = f"ended {ago}, a beat resumes it at its next pass"
    return f"until {when(end, zone_of(stored))} ({ago})"


def _next_cell(stored: StoredEntry, now: datetime) -> str:
    """``09:00:30 (in 30s)`` in UTC, list's one zone (the date when not today there)."""
    if stored.next_run is None:
        return upcoming_text(stored, now, short=True)
    local, today = stored.next_run.astimezone(UTC), now.astimezone(UTC).date()
    shown = local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M:%S")
    return f"{shown} ({_due(stored.next_run, now, coarse=True)})"


def _written(entry: Entry, schedule: Schedule) -> str:
    """``30 2 * * * — at 02:30 every day, Europe/Berlin`` (the zone added when not said)."""
    text = schedule.describe()
    if not isinstance(schedule, EventSchedule) and not text.endswith(schedule.timezone):
        text += f" ({schedule.timezone})"
    return f"{entry.schedule} — {text}"


def _glance(stored: StoredEntry) -> str:
    """``since added: 7 runs, 1 dropped``: the entry's counters, manual runs included."""
    counters = stored.counters
    counted = ", ".join(
        f"{counters[key]} {one if counters[key] == 1 else many}"
        for key, one, many in _GLANCE
        if counters.get(key)
    )
    return counted and f"since added: {counted}"


def _counters(stored: StoredEntry) -> str:
    counters = stored.counters
    known = [key for key in _LIFECYCLE if key in counters]
    keys = known + sorted(set(counters) - set(known))
    return ", ".join(f"{key} {counters[key]}" for key in keys)


def _last_cell(stored: StoredEntry, now: datetime) -> tuple[str, str | None]:
    """``failed 2m ago`` (coloured by outcome), ``started 3s ago`` or ``never``."""
    if stored.last_run is None:
        return "never", None
    status = stored.state.get("last_status") or "began"
    shown = "started" if status == "running" else status
    return f"{shown} {relative(stored.last_run, now, coarse=True)}", status


def list_text(
    items: Sequence[StoredEntry],
    now: datetime,
    style: Style,
    width: int,
    *,
    total: int | None = None,
    header: bool = True,
    summary: bool = True,
    beats: int | None = None,
    windows: Sequence[Window] = (),
) -> str:
    """One row per entry, its schedule and what needs a look on the lines below; next
    runs in UTC (each entry's zone is on its schedule line, and in ``show``).

    ``total``: how many entries there are in all, when ``items`` are only some of them;
    ``header``/``summary``: print the column titles / the closing count (a listing
    printed page by page has one of each); ``beats``: how many beats are live, to say
    so after the count when none is; ``windows``: the maintenance windows, to say which
    entries are in one now.
    """
    if not items:
        return "No entries." if header and summary else ""
    columns = [
        Column("NAME", shrink=12),
        Column("STATE"),
        Column("NEXT RUN (UTC)", shrink=23),
        Column("LAST RUN", shrink=12),
    ]
    # A long name gives way first, to 20; then the times; then the name again.
    order = [(0, 20), (3, 16), (2, 23)]
    rows = []
    for stored in items:
        entry, schedule = stored.entry, schedule_of(stored)
        details = [] if entry is None or schedule is None else [_written(entry, schedule)]
        extras = [f"owner {entry.owner}"] if entry is not None and entry.owner else []
        if entry is not None and entry.end_at is not None:
            extras.append(f"until {when(entry.end_at, zone_of(stored))}")
        if entry is not None and entry.max_runs is not None:
            extras.append(_runs_text(stored.runs, entry.max_runs))
        if stored.paused_until is not None:
            extras.append(f"paused {paused_text(stored, now)}")
        if stored.paused and stored.note:
            extras.append(f"note: {stored.note}")
        if windows and (held := in_window(stored, windows, now)) is not None:
            extras.append(held[1])
        if stored.invalid:
            extras.append(f"problem: {stored.invalid}")
        for kind, since in (("overdue", stored.overdue_since), ("failing", stored.failing_since)):
            if since is not None:
                extras.append(f"{kind} since {relative(since, now, coarse=True)}")
        if _glance(stored):
            extras.append(_glance(stored))
        if extras:
            details.append(" · ".join(extras))
        cells = [
            (stored.name, None),
            (stored.status, stored.status),
            (_next_cell(stored, now), None),
            _last_cell(stored, now),
        ]
        rows.append(Row(cells, details))
    states: dict[str, int] = {}
    for stored in items:
        states[stored.status] = states.get(stored.status, 0) + 1
    lines = table(columns, rows, width, style, order)[0 if header else 1 :]
    if not summary:
        return "\n".join(lines)
    return "\n".join([*lines, "", count_text(states, len(items), total, beats)])


def count_text(
    states: dict[str, int], shown: int, total: int | None = None, beats: int | None = None
) -> str:
    """``5 entries: 4 active, 1 paused``; for a part of a larger schedule, what to type;
    with ``beats`` 0, that no beat sends the runs due."""
    tally = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    noun = "entry" if shown == 1 else "entries"
    if total is None or total <= shown:
        counted = f"{shown} {noun}: {tally}"
    else:
        counted = (
            f"{shown} of {total} entries, soonest first: {tally} "
            "(--limit N shows more, --all every one, page by page)"
        )
    if beats == 0:
        counted += f"\n{_NO_BEAT}"
    return counted


def _runs_text(runs: int, most: int) -> str:
    """``2 of 5 runs sent`` (what ``max_runs`` counts)."""
    return f"{runs} of {most} {'run' if most == 1 else 'runs'} sent"


def _expires_text(entry: Entry) -> str:
    if entry.expires is None:
        return "never: a sent run waits in the queue as long as it takes"
    if entry.expires == AUTO:
        return "auto: a sent run not started by the next tick is dropped"
    return f"a sent run not started {seconds(float(entry.expires))} after its tick is dropped"


def _policy(entry: Entry, numbers: dict[str, float | None], plain: bool) -> list[tuple[str, str]]:
    now = "" if isinstance(entry.parsed_schedule(), IntervalSchedule) else " now"
    tolerance, timebox, limit = numbers["tolerance"], numbers["timebox"], numbers["time_limit"]
    if entry.tolerance != AUTO:
        tolerance_text = seconds(float(entry.tolerance))
    else:
        shown = "" if tolerance is None else f" ({seconds(tolerance)}{now})"
        tolerance_text = f"auto: 10% of the interval{shown}"
    if entry.timebox is None:
        timebox_text = "off: runs have no time limit"
    elif plain and entry.timebox == AUTO:
        timebox_text = "auto: none, the plain task keeps its own time limits"
    else:
        figures = ""
        if timebox is not None and limit is not None:
            figures = f"{seconds(timebox)}{now}, hard limit {seconds(limit - timebox)} later"
        if entry.timebox == AUTO:
            timebox_text = "auto: half the interval" + (f" ({figures})" if figures else "")
        else:
            timebox_text = figures or seconds(float(entry.timebox))
    window = entry.catchup_window
    return [
        ("tolerance", tolerance_text),
        ("timebox", timebox_text),
        ("overlap", f"{entry.overlap}: {_OVERLAP[entry.overlap]}"),
        ("catch-up", f"{entry.catchup}: {_CATCHUP[entry.catchup]}"),
        (
            "window",  # catchup_window; the dates an entry runs between are its start/end
            "none: no tick is too late to run"
            if window is None
            else f"a tick may still run {seconds(window)} late",
        ),
        ("expires", _expires_text(entry)),
        ("jitter", "none" if not entry.jitter else f"up to {seconds(entry.jitter)}"),
        ("overdue", _overdue_text(entry, numbers["alert_after"], now)),
        (
            "failing",
            f"after {entry.failure_threshold} failed or timeboxed runs in a row"
            + ("; then paused" if entry.pause_on_failure else ""),
        ),
    ]


def _overdue_text(entry: Entry, after: float | None, now: str) -> str:
    if after is None:
        return "never" if entry.alert_after is None else "never: the entry has no interval"
    if entry.alert_after == AUTO:
        return f"auto: 2 intervals + the timebox without a success ({seconds(after)}{now})"
    return f"after {seconds(after)} without a successful run"


def _definition(entry: Entry, schedule: Schedule) -> list[tuple[str, str]]:
    zone = schedule.zone
    options = " ".join(f"{key}={value}" for key, value in sorted(entry.options.items()))
    start = "" if entry.start_at is None else f"from {when(entry.start_at, zone)}"
    end = "" if entry.end_at is None else f"until {when(entry.end_at, zone)}"
    return [
        ("task", entry.task),
        ("args", json.dumps(entry.args)),
        ("kwargs", json.dumps(entry.kwargs)),
        ("schedule", f"{entry.schedule} ({_FORMS[entry.form]})"),
        ("means", schedule.describe()),
        ("time zone", schedule.timezone),
        ("start/end", " ".join(filter(None, [start, end])) or "none: no start or end date"),
        ("options", options or "none"),
        ("owner", entry.owner or "none"),
        ("group", _group(entry)),
        ("source", entry.source),
        ("enabled", "yes" if entry.enabled else "no"),
    ]


def _group(entry: Entry) -> str:
    """The group whose limit applies to the entry's runs (``periodiq_group_limits``)."""
    if entry.group:
        return entry.group
    return f"{entry.owner} (its owner)" if entry.owner else "none"


def _last_run(stored: StoredEntry, now: datetime) -> str:
    last = stored.last_run
    if last is None:
        return "never"
    text = f"{when(last, zone_of(stored))} ({relative(last, now)})"
    status = stored.state.get("last_status")
    if status == "running":
        return f"{text}, still running"
    if status:
        took = duration(number(stored.state.get("last_duration")))
        text += f", {status}" + (f" after {took}" if took else "")
    return text


def _section(title: str, rows: list[tuple[str, str]], width: int, style: Style) -> list[str]:
    return [style(title, "head"), *pairs(rows, width, style), ""]


def _fire(fire: datetime, now: datetime) -> str:
    shown = when(fire, fire.tzinfo or UTC, precise=True)
    return f"{fire.strftime('%a')} {shown}  {relative(fire, now)}"


def show_text(
    stored: StoredEntry,
    details: Details,
    *,
    now: datetime,
    style: Style,
    width: int,
    windows: Sequence[Window] = (),
) -> str:
    """Everything about one entry: definition, policy, state (and the maintenance window
    of ``windows`` it is in now), next runs, last events."""
    entry, schedule = stored.entry, schedule_of(stored)
    state = stored.status + (f" {paused_text(stored, now)}" if stored.paused_until else "")
    state += f" (note: {stored.note})" if stored.paused and stored.note else ""
    held = in_window(stored, windows, now) if windows else None
    state += f", {held[1]}" if held is not None else ""
    lines = [f"{style(stored.name, 'head')}  {style(state, stored.status)}", ""]
    if entry is None or schedule is None:
        lines += _section("Problem", [("reason", stored.invalid or "?")], width, style)
        lines += _section("Stored", [("definition", stored.definition)], width, style)
    else:
        lines += _section("Definition", _definition(entry, schedule), width, style)
        numbers = effective(entry, details.now, details.default_grace, details.plain)
        lines += _section("Policy", _policy(entry, numbers, details.plain), width, style)
    counters = _counters(stored)
    error = stored.state.get("last_error")
    upcoming_now = upcoming_text(stored, now)
    if upcoming_now == "-":
        upcoming_now = f"none ({stored.status})"
    lines += _section(
        "State",
        [
            ("next run", upcoming_now),
            *(
                [("runs", f"{_runs_text(stored.runs, entry.max_runs)} (max_runs)")]
                if entry is not None and entry.max_runs is not None
                else []
            ),
            ("running", f"yes, task {stored.running}" if stored.running else "no"),
            ("checkpoint", "saved: the next run resumes from it" if details.checkpoint else "none"),
            ("last run", _last_run(stored, now)),
            *([("last error", error)] if error else []),
            ("counters", counters or "none"),
        ],
        width,
        style,
    )
    if schedule is not None:
        upcoming = details.upcoming
        when_on = {"paused": " once resumed", "disabled": " if enabled"}.get(stored.status, "")
        title = f"Next {len(upcoming)} runs{when_on} ({schedule.timezone})"
        lines.append(style(title, "head"))
        if isinstance(schedule, EventSchedule):
            lines.append(f"  fires {schedule.describe()}")
        else:
            lines += [f"  {_fire(fire, now)}" for fire in upcoming] or ["  none: it has ended"]
        lines.append("")
    events = details.events
    if not events:
        return "\n".join([*lines, "No events yet."])
    lines.append(style(f"Last {len(events)} events", "head"))
    lines += ["  " + line for line in history_lines(events, zone_of(stored), style, width - 2)]
    return "\n".join(lines)


def next_text(schedule: Schedule, start: datetime, fires: Sequence[datetime], style: Style) -> str:
    """A schedule preview: the schedule in words, then its run times."""
    lines = [
        f"{style('schedule', 'dim')}  {schedule.spec} ({schedule.kind})",
        f"{style('means', 'dim')}     {schedule.describe()}",
        f"{style('from', 'dim')}      {when(start, schedule.zone, precise=True)}",
        "",
    ]
    if isinstance(schedule, EventSchedule):
        lines.append(f"  no clock times: fires {schedule.describe()}")
    elif not fires:
        lines.append("  none: the schedule never fires after that")
    digits = len(str(len(fires)))
    lines += [f"  {index:>{digits}}  {_fire(fire, start)}" for index, fire in enumerate(fires, 1)]
    return "\n".join(lines)
