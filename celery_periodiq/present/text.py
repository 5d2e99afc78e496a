"""The text ``celery periodiq`` prints: one function per command, readable at 80 columns.

Pure functions of what the API returned and of "now", so the same inputs
always print the same text. Absolute times are on each entry's own time zone,
with its abbreviation.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo

from celery_periodiq.model.entry import AUTO, Entry
from celery_periodiq.ops.backfill import BackfillReport
from celery_periodiq.ops.doctor import Check
from celery_periodiq.present.shapes import Details, effective, error_parts, schedule_of, zone_of
from celery_periodiq.present.terminal import (
    Column,
    Row,
    Style,
    duration,
    hanging,
    number,
    pairs,
    relative,
    seconds,
    span,
    table,
    when,
    when_near,
)
from celery_periodiq.schedules import EventSchedule, IntervalSchedule, Schedule
from celery_periodiq.store.views import BeatInfo, Event, StoredEntry

__all__ = [
    "backfill_summary", "beats_text", "count_text", "doctor_text", "failures_text",
    "history_text", "list_text", "next_text", "show_text", "upcoming_text",
]  # fmt: skip

# (counter, one, many): the counters worth a glance in `list`, in this order.
_GLANCE = (
    ("started", "run", "runs"), ("failed", "failed", "failed"),
    ("timeboxed", "timeboxed", "timeboxed"), ("revoked", "revoked", "revoked"),
    ("expired", "expired", "expired"), ("skipped_overlap", "skipped", "skipped"),
    ("missed", "missed", "missed"), ("dropped_too_soon", "dropped", "dropped"),
    ("duplicate", "duplicate", "duplicates"),
)  # fmt: skip
# Counters in the order a run meets them; any others follow alphabetically.
_LIFECYCLE = (
    "enqueued", "started", "succeeded", "failed", "timeboxed", "revoked", "retrying",
    "expired", "skipped_overlap", "missed", "dropped_too_soon", "duplicate",
)  # fmt: skip
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
_HINTS = {
    "redis": "check periodiq_redis_url (or broker_url) and that Redis runs",
    "beats": "start one: celery -A PROJ beat -S periodiq",
    "broker": "check broker_url and that the broker runs",
    "entries": "see `periodiq show NAME`; `periodiq update` or `periodiq delete` repairs it",
}


def upcoming_text(stored: StoredEntry, now: datetime, *, short: bool = False) -> str:
    """When the entry runs next: ``2026-01-01 09:00:00 CET (in 5m00s)``, or why it does not.

    ``short`` leaves out the date when it is today, and rounds the relative time.
    """
    schedule = schedule_of(stored)
    if stored.next_run is not None:
        zone = zone_of(stored)
        shown = when_near(stored.next_run, zone, now) if short else when(stored.next_run, zone)
        return f"{shown} ({relative(stored.next_run, now, coarse=short)})"
    if isinstance(schedule, EventSchedule) and stored.status in ("active", "running"):
        return _EVENT_PHRASES.get(schedule.event, schedule.describe())
    return "-"


def _written(entry: Entry, schedule: Schedule) -> str:
    """``30 2 * * * — at 02:30 every day, Europe/Berlin`` (the zone added when not said)."""
    text = schedule.describe()
    if not isinstance(schedule, EventSchedule) and not text.endswith(schedule.timezone):
        text += f" ({schedule.timezone})"
    return f"{entry.schedule} — {text}"


def _glance(stored: StoredEntry) -> str:
    counters = stored.counters
    return ", ".join(
        f"{counters[key]} {one if counters[key] == 1 else many}"
        for key, one, many in _GLANCE
        if counters.get(key)
    )


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
) -> str:
    """One row per entry, its schedule and what needs a look on the lines below.

    ``total``: how many entries there are in all, when ``items`` are only some of them;
    ``header``/``summary``: print the column titles / the closing count (a listing
    printed page by page has one of each).
    """
    if not items:
        return "No entries." if header and summary else ""
    columns = [
        Column("NAME", shrink=12), Column("STATE"), Column("NEXT RUN", shrink=23),
        Column("LAST RUN", shrink=12),
    ]  # fmt: skip
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
        if stored.paused and stored.note:
            extras.append(f"note: {stored.note}")
        if stored.invalid:
            extras.append(f"problem: {stored.invalid}")
        for kind, since in (("overdue", stored.overdue_since), ("failing", stored.failing_since)):
            if since is not None:
                extras.append(f"{kind} since {relative(since, now, coarse=True)}")
        if _glance(stored):
            extras.append(_glance(stored))
        if extras:
            details.append(" · ".join(extras))
        upcoming = upcoming_text(stored, now, short=True)
        cells = [
            (stored.name, None), (stored.status, stored.status), (upcoming, None),
            _last_cell(stored, now),
        ]  # fmt: skip
        rows.append(Row(cells, details))
    states: dict[str, int] = {}
    for stored in items:
        states[stored.status] = states.get(stored.status, 0) + 1
    lines = table(columns, rows, width, style, order)[0 if header else 1 :]
    if not summary:
        return "\n".join(lines)
    return "\n".join([*lines, "", count_text(states, len(items), total)])


def count_text(states: dict[str, int], shown: int, total: int | None = None) -> str:
    """``5 entries: 4 active, 1 paused``; for a part of a larger schedule, what to type."""
    tally = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    noun = "entry" if shown == 1 else "entries"
    if total is None or total <= shown:
        return f"{shown} {noun}: {tally}"
    return (f"{shown} of {total} entries, soonest first: {tally} "
            "(--limit N shows more, --all every one, page by page)")  # fmt: skip


def _runs_text(runs: int, most: int) -> str:
    """``2 of 5 runs sent`` (what ``max_runs`` counts)."""
    return f"{runs} of {most} {'run' if most == 1 else 'runs'} sent"


def _expires_text(entry: Entry) -> str:
    if entry.expires is None:
        return "never: a sent run waits in the queue as long as it takes"
    if entry.expires == AUTO:
        return "auto: a sent run not started by the next tick is dropped"
    return f"a sent run not started {seconds(float(entry.expires))} after its tick is dropped"


def _policy(entry: Entry, numbers: dict[str, float | None]) -> list[tuple[str, str]]:
    now = "" if isinstance(entry.parsed_schedule(), IntervalSchedule) else " now"
    tolerance, timebox, limit = numbers["tolerance"], numbers["timebox"], numbers["time_limit"]
    if entry.tolerance != AUTO:
        tolerance_text = seconds(float(entry.tolerance))
    else:
        shown = "" if tolerance is None else f" ({seconds(tolerance)}{now})"
        tolerance_text = f"auto: 10% of the interval{shown}"
    if entry.timebox is None:
        timebox_text = "off: runs have no time limit"
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
        ("window", "none" if window is None else f"a tick may still run {seconds(window)} late"),
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
        ("window", " ".join(filter(None, [start, end])) or "always"),
        ("options", options or "none"),
        ("owner", entry.owner or "none"),
        ("source", entry.source),
        ("enabled", "yes" if entry.enabled else "no"),
    ]


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
    stored: StoredEntry, details: Details, *, now: datetime, style: Style, width: int
) -> str:
    """Everything about one entry: definition, policy, state, next runs, last events."""
    entry, schedule = stored.entry, schedule_of(stored)
    state = stored.status + (f" (note: {stored.note})" if stored.paused and stored.note else "")
    lines = [f"{style(stored.name, 'head')}  {style(state, stored.status)}", ""]
    if entry is None or schedule is None:
        lines += _section("Problem", [("reason", stored.invalid or "?")], width, style)
        lines += _section("Stored", [("definition", stored.definition)], width, style)
    else:
        lines += _section("Definition", _definition(entry, schedule), width, style)
        numbers = effective(entry, details.now, details.default_grace)
        lines += _section("Policy", _policy(entry, numbers), width, style)
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
    lines += ["  " + line for line in _history_lines(events, zone_of(stored), style, width - 2)]
    return "\n".join(lines)


def _event_detail(event: Event) -> str:
    fields = event.fields
    parts = [duration(number(fields.get("duration")))]
    if fields.get("host"):
        parts.append(f"on {fields['host']}")
    missed = number(fields.get("missed"))
    text = " ".join(part for part in parts if part)
    extras = (
        [f"stands for {missed} ticks"] if event.kind == "enqueued" and (missed or 0) > 1 else []
    )
    extras += [fields["note"]] if fields.get("note") else []
    return ", ".join([text, *extras] if text else extras)


def _tick(event: Event, zone: tzinfo) -> str:
    if event.tick is None:
        return "-"
    tick, at = event.tick.astimezone(zone), event.at.astimezone(zone)
    return tick.strftime("%H:%M:%S" if tick.date() == at.date() else "%m-%d %H:%M:%S")


def _history_lines(events: Sequence[Event], zone: tzinfo, style: Style, width: int) -> list[str]:
    zone_name = getattr(zone, "key", None) or str(zone)
    columns = [
        Column(f"AT ({zone_name})"), Column("EVENT"), Column("TICK"), Column("TASK"),
        Column("DETAIL", shrink=6, overflow=True),
    ]  # fmt: skip
    rows = []
    for event in events:
        cells = [
            (event.at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S"), None),
            (event.kind, event.kind), (_tick(event, zone), None),
            ((event.task_id or "-")[:8], None), (_event_detail(event), None),
        ]  # fmt: skip
        error = event.fields.get("error")
        rows.append(Row(cells, [error] if error else [], details_role=None))
    return table(columns, rows, width, style)


def history_text(events: Sequence[Event], zone: tzinfo, style: Style, width: int) -> str:
    """An entry's events, newest first; errors on the line below their run."""
    if not events:
        return "No events."
    return "\n".join(_history_lines(events, zone, style, width))


def failures_text(items: Sequence[tuple[str, Event, tzinfo]], style: Style, width: int) -> str:
    """Failed and timeboxed runs across entries, newest first, each error below its row."""
    if not items:
        return "No failures."
    columns = [Column("AT"), Column("ENTRY", shrink=10), Column("OUTCOME"), Column("TASK")]
    rows = []
    for name, event, zone in items:
        kind, message = error_parts(event.fields.get("error"))
        error = ": ".join(part for part in (kind, message) if part)
        if not error:
            error = "stopped at its timebox" if event.kind == "timeboxed" else "no error recorded"
        cells = [
            (when(event.at, zone), None), (name, None), (event.kind, event.kind),
            ((event.task_id or "-")[:8], None),
        ]  # fmt: skip
        rows.append(Row(cells, [error], details_role=None))
    return "\n".join(table(columns, rows, width, style))


def beats_text(beats: Sequence[BeatInfo], now: datetime, style: Style, width: int) -> str:
    """Live beats: host, pid, version, uptime, last tick, ticks claimed, and the digest
    of the declaration set each runs with (beats of one version of the code share it)."""
    if not beats:
        return "No live beats: nothing is being scheduled."
    columns = [
        Column("HOST", shrink=8), Column("PID"), Column("VERSION"), Column("UPTIME"),
        Column("LAST TICK"), Column("TICKS CLAIMED"), Column("DECLARES"),
    ]  # fmt: skip
    rows = []
    for beat in beats:
        uptime = span((now - beat.started).total_seconds()) if beat.started else "?"
        last = relative(beat.last_tick, now) if beat.last_tick else "never"
        texts = [beat.host, str(beat.pid), beat.version, uptime, last, str(beat.ticks_claimed),
                 beat.declared[:8] or "-"]  # fmt: skip
        rows.append(Row([(text, None) for text in texts]))
    return "\n".join(table(columns, rows, width, style))


def doctor_text(checks: Sequence[Check], style: Style, width: int) -> str:
    """One line per check (wrapped under its result), a hint under each failure, a verdict."""
    lines = []
    for check in checks:
        label = check.status.upper() if check.status == "fail" else check.status
        wrapped = hanging(check.detail, width, 16, 16)
        lines.append(f"{style(label.ljust(4), check.status)}  {check.name:<8}  {wrapped[0][16:]}")
        lines += wrapped[1:]
        if check.status == "fail" and check.name in _HINTS:
            lines += [
                style(line, "dim") for line in hanging(f"→ {_HINTS[check.name]}", width, 16, 18)
            ]
    failed = sum(check.status == "fail" for check in checks)
    warned = sum(check.status == "warn" for check in checks)
    if failed:
        verdict = style(f"{failed} problem{'s' if failed > 1 else ''} found.", "bad")
    else:
        warnings = f" ({warned} warning{'s' if warned > 1 else ''})" if warned else ""
        verdict = f"All checks passed{warnings}."
    return "\n".join([*lines, "", verdict])


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


def backfill_summary(report: BackfillReport) -> str:
    """One line: how many ticks the backfill had and what became of them."""
    if not report.ticks:
        return f"No tick of {report.name} in that range."
    outcomes = collections.Counter(tick.outcome for tick in report.ticks)
    parts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items())
    noun = "tick" if len(report.ticks) == 1 else "ticks"
    return f"Backfill of {report.name}: {len(report.ticks)} {noun} in range: {parts}."
