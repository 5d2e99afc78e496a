"""The ``--json`` output of ``celery periodiq``: one stable shape per command.

Every key is always present (null when there is no value). Instants are ISO
8601 strings with an offset: in UTC, except the run times of a schedule
(``show`` upcoming, ``next`` runs), which are on the schedule's own zone.

- **entry** (``list`` prints an array of them)::

    name, state (active|paused|running|quarantined|disabled|ended), note (why
    paused), paused_until (when a timed pause ends; null otherwise), in_window (the
    maintenance window it is in now: {id, policy, until}; null otherwise), problem (why
    quarantined), task, schedule (as written), form (cron|calendar|every|at),
    description, tz, owner, group (its ``group``, else its owner: whose
    ``periodiq_group_limits`` limit applies), source (code|config|runtime),
    enabled, next_run, last_run (when the last run began), last_status,
    last_error, last_duration_ms, last_finished, last_task_id, running_task_id,
    counters ({reason: count}: enqueued, started, succeeded, failed, timeboxed,
    revoked, retrying, expired, duplicate, dropped_too_soon, dropped_group_limit,
    skipped_overlap, missed),
    last_success, overdue_since and failing_since (null when the entry is not
    overdue, failing), failures_in_a_row, runs (ticks the beat published: what
    max_runs counts), max_runs and runs_left (null when the runs are not limited)

- **show**: an entry, then version, definition (the stored definition as an
  object; null when quarantined), raw_definition (the stored text when
  quarantined, else null), effective ({interval, tolerance, timebox,
  time_limit, alert_after} in seconds for the next tick), upcoming (10 instants),
  checkpoint (true when a checkpoint is saved), history (10 events).
- **event** (``history`` prints an array of them; ``failures`` adds ``entry``
  first)::

    id, kind, at, tick, task_id, host, duration_ms, missed (ticks the run
    stands for), error ("Type: message"), error_type, error_message, note

- **next**: spec, form, description, tz, from, runs (instants).
- **beat** (``beats`` prints an array of them): id, host, pid, version,
  started, seen, last_tick, ticks_claimed, partitions (how many it watches), uptime_s,
  last_tick_age_s, declared (the digest of its declaration set; "" when it says none),
  publishing (false while it cannot reach its broker: the others have its share).
- **doctor**: ok (false when a check failed), checks ([{name, status
  (ok|warn|fail|skip), detail}]).
- **simulate**::

    from, to, down ({from, to} or null), origin (stored|definition: where each
    entry's first tick comes from), limit (fires listed per entry), assumes
    (what the simulation cannot know), entries: [{name, state, tz, schedule,
    origin (stored|definition|none), reason (why nothing fires, or when an event
    entry fires; else null), fires: [{kind (on_time|caught_up|reboot|shutdown),
    tick, tick_local, due, due_local, sent, stands_for, task_id}], more_fires,
    more_exact (false: more_fires is a floor), dropped: [{at, reason
    (missed|skipped_overlap), count, first, ticks}], totals {fires, caught_up,
    missed}}], totals {entries, fires, caught_up, missed, exact}

  ``tick_local``/``due_local`` are on the entry's zone; every other instant is UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from celery_periodiq.model import policy
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.simulation import EntrySimulation, Fire, Simulation
from celery_periodiq.ops.backfill import BackfillReport
from celery_periodiq.ops.doctor import Check
from celery_periodiq.present.terminal import iso, number, stored_instant, utc_iso
from celery_periodiq.schedules import Schedule
from celery_periodiq.schedules.zones import zone
from celery_periodiq.store.views import BeatInfo, Event, StoredEntry

__all__ = [
    "Details",
    "backfill_json",
    "beat_json",
    "doctor_json",
    "dumps",
    "effective",
    "entry_json",
    "error_parts",
    "event_json",
    "next_json",
    "schedule_of",
    "show_json",
    "simulation_json",
    "zone_of",
]


@dataclass(frozen=True, slots=True)
class Details:
    """What ``show`` reports beside the stored entry."""

    upcoming: Sequence[datetime]
    """The next fire instants (10; none when quarantined)."""
    checkpoint: bool
    events: Sequence[Event]
    """The newest history events."""
    default_grace: float
    """The ``periodiq_default_grace`` setting, for the hard time limit."""
    now: datetime
    """The instant the policy numbers are for (the next tick after it)."""
    plain: bool = False
    """The entry's task is known to be plain (not a ``PeriodicTask``): with ``timebox``
    auto, its runs keep the task's own time limits."""


def dumps(value: Any) -> str:
    """Indented UTF-8 JSON, keys in the documented order, with a final newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def schedule_of(stored: StoredEntry) -> Schedule | None:
    """The entry's parsed schedule; None when it is quarantined."""
    return None if stored.entry is None else stored.entry.parsed_schedule()


def zone_of(stored: StoredEntry) -> tzinfo:
    """The zone the entry's times are shown on (UTC when quarantined)."""
    schedule = schedule_of(stored)
    return UTC if schedule is None else schedule.zone


def effective(
    entry: Entry, now: datetime, default_grace: float, plain: bool = False
) -> dict[str, Any]:
    """Policy numbers for the entry's next tick after ``now``, in seconds: interval,
    tolerance, timebox, time_limit, alert_after (None: never overdue); ``plain``: of a
    plain task's entry (:func:`celery_periodiq.model.policy.timebox`)."""
    numbers = policy.now_limits(entry, now, default_grace, plain)
    return {
        "interval": numbers.interval,
        "tolerance": numbers.tolerance,
        "timebox": numbers.timebox,
        "time_limit": numbers.time_limit,
        "alert_after": policy.alert_after(entry, numbers.interval),
    }


def error_parts(error: str | None) -> tuple[str | None, str | None]:
    """``"ValueError: boom"`` -> ``("ValueError", "boom")``; a bare type name has no message."""
    if not error:
        return None, None
    kind, sep, message = error.partition(": ")
    if sep and kind.replace(".", "").isidentifier():
        return kind, message
    return (error, None) if error.isidentifier() else (None, error)


def entry_json(stored: StoredEntry, in_window: dict[str, Any] | None = None) -> dict[str, Any]:
    """One entry as ``list --json`` prints it; ``in_window``: the maintenance window it is
    in now (:func:`~celery_periodiq.present.windows.in_window_json`)."""
    entry, schedule, state = stored.entry, schedule_of(stored), stored.state
    return {
        "name": stored.name,
        "state": stored.status,
        "note": stored.note,
        "paused_until": utc_iso(stored.paused_until),
        "in_window": in_window,
        "problem": stored.invalid,
        "task": None if entry is None else entry.task,
        "schedule": None if entry is None else entry.schedule,
        "form": None if entry is None else entry.form,
        "description": None if schedule is None else schedule.describe(),
        "tz": None if schedule is None else schedule.timezone,
        "owner": None if entry is None else entry.owner,
        "group": None if entry is None else entry.group or entry.owner,
        "source": None if entry is None else entry.source,
        "enabled": None if entry is None else entry.enabled,
        "next_run": utc_iso(stored.next_run),
        "last_run": utc_iso(stored.last_run),
        "last_status": state.get("last_status") or None,
        "last_error": state.get("last_error") or None,
        "last_duration_ms": number(state.get("last_duration")),
        "last_finished": utc_iso(stored_instant(state.get("last_finished"))),
        "last_task_id": state.get("last_task_id") or None,
        "running_task_id": stored.running,
        "counters": dict(sorted(stored.counters.items())),
        "last_success": utc_iso(stored.last_success),
        "overdue_since": utc_iso(stored.overdue_since),
        "failing_since": utc_iso(stored.failing_since),
        "failures_in_a_row": number(state.get("fails")) or 0,
        "runs": stored.runs,
        "max_runs": None if entry is None else entry.max_runs,
        "runs_left": stored.runs_left,
    }


def show_json(
    stored: StoredEntry, details: Details, in_window: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One entry as ``show --json`` prints it (``in_window`` as :func:`entry_json`)."""
    entry = stored.entry
    return {
        **entry_json(stored, in_window),
        "version": stored.version,
        "definition": None if entry is None else entry.to_dict(),
        "raw_definition": stored.definition if entry is None else None,
        "effective": (
            None
            if entry is None
            else effective(entry, details.now, details.default_grace, details.plain)
        ),
        "upcoming": [iso(fire) for fire in details.upcoming],
        "checkpoint": details.checkpoint,
        "history": [event_json(event) for event in details.events],
    }


def event_json(event: Event, entry: str | None = None) -> dict[str, Any]:
    """One history event; with ``entry``, that name comes first (``failures``)."""
    fields = event.fields
    error_type, error_message = error_parts(fields.get("error"))
    data: dict[str, Any] = {} if entry is None else {"entry": entry}
    data.update(
        id=event.id,
        kind=event.kind,
        at=utc_iso(event.at),
        tick=utc_iso(event.tick),
        task_id=event.task_id,
        host=fields.get("host"),
        duration_ms=number(fields.get("duration")),
        missed=number(fields.get("missed")),
        error=fields.get("error"),
        error_type=error_type,
        error_message=error_message,
        note=fields.get("note"),
    )
    return data


def next_json(schedule: Schedule, start: datetime, fires: Sequence[datetime]) -> dict[str, Any]:
    """A schedule preview as ``next --json`` prints it."""
    return {
        "spec": schedule.spec,
        "form": schedule.kind,
        "description": schedule.describe(),
        "tz": schedule.timezone,
        "from": iso(start.astimezone(schedule.zone)),
        "runs": [iso(fire) for fire in fires],
    }


def beat_json(beat: BeatInfo, now: datetime) -> dict[str, Any]:
    """One live beat as ``beats --json`` prints it."""
    return {
        "id": beat.id,
        "host": beat.host,
        "pid": beat.pid,
        "version": beat.version,
        "started": utc_iso(beat.started),
        "seen": utc_iso(beat.seen),
        "last_tick": utc_iso(beat.last_tick),
        "ticks_claimed": beat.ticks_claimed,
        "partitions": beat.partitions,
        "uptime_s": None if beat.started is None else (now - beat.started).total_seconds(),
        "last_tick_age_s": (
            None if beat.last_tick is None else (now - beat.last_tick).total_seconds()
        ),
        "declared": beat.declared,
        "publishing": beat.publishing,
    }


def doctor_json(checks: Sequence[Check]) -> dict[str, Any]:
    """The doctor's findings: {ok, sampled, checks: [{name, status, detail}]}, a check of
    the entries also with {checked, total, sampled} (how many it read, of how many)."""
    shown = []
    for check in checks:
        item: dict[str, Any] = {"name": check.name, "status": check.status, "detail": check.detail}
        if check.scope is not None:
            item.update(
                checked=check.scope.checked, total=check.scope.total, sampled=check.scope.sampled
            )
        shown.append(item)
    return {
        "ok": not any(check.status == "fail" for check in checks),
        "sampled": any(check.scope is not None and check.scope.sampled for check in checks),
        "checks": shown,
    }


def backfill_json(report: BackfillReport) -> dict[str, Any]:
    """``backfill --json``: {entry, overlap, dry_run, ticks: [{tick, task_id, outcome}],
    stalled (why it stopped early, or null)}."""
    return {
        "entry": report.name,
        "overlap": report.overlap,
        "dry_run": report.dry_run,
        "ticks": [
            {"tick": utc_iso(tick.nominal), "task_id": tick.task_id, "outcome": tick.outcome}
            for tick in report.ticks
        ],
        "stalled": report.stalled,
    }


ASSUMES = "no run is unfinished when a tick is due: overlap policies cannot be known ahead"


def _fire_json(fire: Fire, local: tzinfo) -> dict[str, Any]:
    return {
        "kind": fire.kind,
        "tick": utc_iso(fire.tick),
        "tick_local": iso(fire.tick.astimezone(local)),
        "due": utc_iso(fire.due),
        "due_local": iso(fire.due.astimezone(local)),
        "sent": utc_iso(fire.sent),
        "stands_for": fire.stands_for,
        "task_id": fire.task_id,
    }


def _simulated_json(item: EntrySimulation) -> dict[str, Any]:
    local = zone(item.tz)
    return {
        "name": item.name,
        "state": item.state,
        "tz": item.tz,
        "schedule": item.schedule,
        "origin": item.origin,
        "reason": item.reason,
        "fires": [_fire_json(fire, local) for fire in item.fires],
        "more_fires": item.more,
        "more_exact": item.more_exact,
        "dropped": [
            {
                "at": utc_iso(dropped.at),
                "reason": dropped.reason,
                "count": dropped.count,
                "first": utc_iso(dropped.first),
                "ticks": [utc_iso(tick) for tick in dropped.ticks],
            }
            for dropped in item.dropped
        ],
        "totals": {
            "fires": item.fire_count,
            "caught_up": item.caught_up_count,
            "missed": item.missed_count,
        },
    }


def simulation_json(simulation: Simulation) -> dict[str, Any]:
    """A simulation as ``simulate --json`` prints it."""
    down = simulation.down
    return {
        "from": utc_iso(simulation.start),
        "to": utc_iso(simulation.end),
        "down": None if down is None else {"from": utc_iso(down[0]), "to": utc_iso(down[1])},
        "origin": "stored" if simulation.from_stored else "definition",
        "limit": simulation.limit,
        "assumes": ASSUMES,
        "entries": [_simulated_json(item) for item in simulation.entries],
        "totals": {
            "entries": len(simulation.entries),
            "fires": simulation.fire_count,
            "caught_up": simulation.caught_up_count,
            "missed": simulation.missed_count,
            "exact": simulation.exact,
        },
    }
