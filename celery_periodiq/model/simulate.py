"""What the beats would publish over a span of time, computed, not run.

:func:`simulate_entry` walks one entry through a span on a simulated clock
with the beat's own planning code: each tick is claimed when it is due (its
jitter applied, :func:`~celery_periodiq.model.plan.next_tick`) and decided by
:func:`~celery_periodiq.model.plan.plan_tick` with the settings the beat passes it
(the key prefix, ``periodiq_catchup_cap``, ``periodiq_default_grace``). A
tick due while the beats are down (``down``) is claimed when they come back,
so the entry's catch-up policy decides what that claim publishes and what it
drops, exactly as a beat coming back would. Nothing here reads a clock or
Redis: :meth:`celery_periodiq.Periodiq.simulate` reads the entries and calls it.
What it finds is in the records of :mod:`celery_periodiq.model.simulation`.

No run is known ahead, so the simulation assumes that no run is unfinished
when a tick is claimed (``running=False, queued=False``): overlap policies
never hold a tick back here.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Literal

from celery_periodiq.errors import SimulationError, shown
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import (
    Plan,
    from_ms,
    next_tick,
    past_ms,
    plan_tick,
    task_id_for,
    to_ms,
)
from celery_periodiq.model.simulation import (
    DEFAULT_LIMIT,
    DEFAULT_SPAN,
    MOST_SPAN,
    Dropped,
    EntrySimulation,
    Fire,
    FireKind,
    Settings,
)
from celery_periodiq.model.window_plan import plan_held
from celery_periodiq.model.windows import Window
from celery_periodiq.schedules import EventSchedule, IntervalSchedule, Schedule

__all__ = ["MOST_COUNTED", "check_range", "event_fires", "simulate_entry"]

MOST_COUNTED = 50_000
"""Ticks counted one by one per entry past the listed ones; beyond, the count is a floor.
(A fixed interval without jitter is counted by arithmetic, exactly, however many.)"""

_SAMPLE = 20  # dropped ticks listed per claim, as the beat's history keeps them


def _aware(what: str, value: object) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise SimulationError(
            f"{what}={shown(value)} is invalid (allowed: an aware datetime, such as "
            "datetime(2026, 3, 29, tzinfo=UTC))"
        )
    return value


def check_range(
    start: datetime, end: datetime | None, down: object, *, now: bool = False
) -> tuple[datetime, datetime, tuple[datetime, datetime] | None]:
    """The span and down window, checked: aware, ``end`` after ``start`` and at most
    ``MOST_SPAN`` later, the window inside the span (its end may be the span's end).

    ``now``: ``start`` is the Redis clock and the entries continue from their stored
    state, which holds what the beats missed so far: a window that began earlier
    counts from ``start`` (the beats are down now).

    Returns:
        ``(start, end, down)`` in whole milliseconds (the beat's precision); ``end``
        defaults to ``start + DEFAULT_SPAN``.

    Raises:
        SimulationError: which value is wrong, and what is allowed.
    """
    start = from_ms(to_ms(_aware("start", start)))
    end = start + DEFAULT_SPAN if end is None else from_ms(to_ms(_aware("end", end)))
    if end <= start:
        raise SimulationError(
            f"end {end.isoformat()} is not after start {start.isoformat()} (allowed: an end "
            "after the start)"
        )
    if end - start > MOST_SPAN:
        raise SimulationError(
            f"the span from {start.isoformat()} to {end.isoformat()} is longer than "
            f"{MOST_SPAN.days} days (allowed: at most {MOST_SPAN.days} days)"
        )
    if down is None:
        return start, end, None
    if not isinstance(down, tuple | list) or len(down) != 2:
        raise SimulationError(
            f"down={shown(down)} is invalid (allowed: a pair (from, to) of aware datetimes)"
        )
    gone = from_ms(to_ms(_aware("down[0]", down[0])))
    back = from_ms(to_ms(_aware("down[1]", down[1])))
    if now and gone < start < back:
        gone = start
    if back <= gone:
        raise SimulationError(
            f"down window {gone.isoformat()}..{back.isoformat()} ends before it starts "
            "(allowed: from < to)"
        )
    if gone < start or back > end:
        raise SimulationError(
            f"down window {gone.isoformat()}..{back.isoformat()} is not inside the simulated "
            f"span {start.isoformat()}..{end.isoformat()} (allowed: start <= from < to <= "
            "end; start earlier to see what the window misses)"
        )
    return start, end, (gone, back)


def _due_of(entry: Entry, schedule: Schedule, nominal: datetime) -> datetime:
    """When a tick of the schedule is due, its jitter applied (as next_tick gives it)."""
    if entry.jitter <= 0:
        return nominal
    found = next_tick(entry, schedule, nominal - timedelta(microseconds=1))
    return found[1] if found is not None and to_ms(found[0]) == to_ms(nominal) else nominal


def _first_tick(
    entry: Entry, schedule: Schedule, start: datetime
) -> tuple[datetime, datetime] | None:
    """The first tick due at or after ``start``: what a beat running all along holds
    as the entry's next tick at ``start``."""
    # a tick with its nominal instant this far back is due before start, whatever its jitter
    back = timedelta(seconds=entry.jitter, milliseconds=1)
    cursor = next_tick(entry, schedule, start - back)
    while cursor is not None and to_ms(cursor[1]) < to_ms(start):
        cursor = next_tick(entry, schedule, past_ms(cursor[0]))
    return cursor


class _Walk:
    """One entry's fires and drops as they are found, listed up to ``room``."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.fires: list[Fire] = []
        self.dropped: list[Dropped] = []
        self.fire_count = 0
        self.caught_up = 0
        self.missed = 0
        self.counted = 0
        self.exact = True
        self.owed = 0
        """Ticks folded into the next run, which stands for them (as the state keeps it)."""
        self.previous: datetime | None = None
        """The newest tick a claim handled (as the state's ``prev``)."""

    def fire(self, fire: Fire) -> None:
        self.fire_count += 1
        self.caught_up += fire.kind == "caught_up"
        if len(self.fires) < self.room:
            self.fires.append(fire)

    def drop(self, dropped: Dropped) -> None:
        self.missed += dropped.count
        self.dropped.append(dropped)

    @property
    def full(self) -> bool:
        return len(self.fires) >= self.room


def simulate_entry(
    entry: Entry,
    *,
    state: str,
    start: datetime,
    end: datetime,
    down: tuple[datetime, datetime] | None,
    settings: Settings,
    first: tuple[datetime, datetime] | None = None,
    limit: int = DEFAULT_LIMIT,
    runs: int = 0,
    windows: tuple[Window, ...] = (),
) -> EntrySimulation:
    """Walk one entry through ``[start, end)`` as the beats would.

    A tick is claimed at its due instant, at ``start`` if it is overdue then, or,
    when that falls inside ``down``, when the beats come back (``down[1]``, also
    when that is ``end``); each claim is decided by ``plan_tick`` as the beat
    decides it, and the next tick is the plan's. An event entry fires when the
    beats come back (``@reboot``) or go down (``@shutdown``).

    Args:
        entry: the entry, as stored.
        state: its state now (reported as it is; paused, disabled and quarantined
            entries are not simulated: the caller says why nothing fires).
        start, end, down: as :func:`check_range` returns them.
        settings: what the beat plans with.
        first: the entry's stored next tick and its due instant; None: from the
            definition, the first tick due at or after ``start``.
        limit: fires to list; the others are counted.
        runs: the ticks the beats published for it so far: an entry with ``max_runs``
            fires only the runs it has left.
        windows: the maintenance windows that hold the entry: each claim is decided
            with them (and its excluded dates) as the beat decides it (:func:`plan_held`).
    """
    schedule = entry.parsed_schedule()
    name, tz, spec = entry.name, schedule.timezone, entry.schedule
    if isinstance(schedule, EventSchedule):
        fires, when = event_fires(entry, schedule, down, settings.prefix)
        return EntrySimulation(
            name,
            state,
            tz,
            spec,
            "definition",
            when,
            fires=tuple(fires[:limit]),
            more=len(fires[limit:]),
            fire_count=len(fires),
        )
    origin: Literal["stored", "definition"] = "definition" if first is None else "stored"
    cursor = _first_tick(entry, schedule, start) if first is None else first
    walk = _Walk(limit)
    start_ms, end_ms = to_ms(start), to_ms(end)
    gone_ms, back_ms = (to_ms(down[0]), to_ms(down[1])) if down else (math.inf, math.inf)
    reason: str | None = _idle(schedule, cursor, start, origin)
    held = bool(windows or entry.exclude)  # each claim decided, none counted
    while cursor is not None:
        nominal_ms, due_ms = to_ms(cursor[0]), to_ms(cursor[1])
        at_ms = max(due_ms, start_ms)
        if gone_ms <= at_ms < back_ms:
            at_ms = int(back_ms)
        if at_ms >= end_ms and at_ms != back_ms:
            if not walk.fire_count and not walk.missed:
                reason = _after(schedule, cursor[0], end)
            break
        if (
            at_ms == due_ms
            and not held
            and walk.full
            and entry.max_runs is None
            and (entry.catchup_window is None or entry.jitter <= 0)
        ):
            # Claimed when due, one tick: plan_tick publishes it (it cannot be outside a
            # window). Counted without planning it; an interval without jitter jumps to
            # the end of the stretch at once.
            if walk.counted >= MOST_COUNTED:
                walk.exact = False
                break
            stop = min(gone_ms, end_ms) if nominal_ms < gone_ms else end_ms
            cursor = _count_on_time(entry, schedule, cursor, stop, walk)
            continue
        cursor = _claim(entry, schedule, nominal_ms, due_ms, at_ms, settings, walk, runs, windows)
    if walk.fire_count or walk.missed:
        reason = None
    return EntrySimulation(
        name,
        state,
        tz,
        spec,
        origin,
        reason,
        fires=tuple(walk.fires),
        more=walk.fire_count - len(walk.fires),
        more_exact=walk.exact,
        dropped=tuple(walk.dropped),
        fire_count=walk.fire_count,
        caught_up_count=walk.caught_up,
        missed_count=walk.missed,
    )


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _idle(
    schedule: Schedule,
    cursor: tuple[datetime, datetime] | None,
    start: datetime,
    origin: str,
) -> str | None:
    """Why an entry with no first tick fires nothing (None when it has one)."""
    if cursor is not None:
        return None
    if schedule.end_at is not None and schedule.end_at < start:
        return f"ended: its end_at {_iso(schedule.end_at)} is before the span"
    if origin == "stored":
        return "ended: it has no next tick"
    return "no tick at or after the start of the span"


def _after(schedule: Schedule, nominal: datetime, end: datetime) -> str:
    """Why an entry whose first tick comes after the span fires nothing in it."""
    if schedule.start_at is not None and schedule.start_at >= end:
        return f"starts later: its start_at {_iso(schedule.start_at)} is after the span"
    return f"no tick in the span; the next is at {_iso(nominal)}"


def _claim(
    entry: Entry,
    schedule: Schedule,
    nominal_ms: int,
    due_ms: int,
    at_ms: int,
    settings: Settings,
    walk: _Walk,
    runs: int,
    windows: tuple[Window, ...],
) -> tuple[datetime, datetime] | None:
    """A beat claims the tick at ``at_ms``: what it publishes and drops, and the next tick
    (``runs``: ticks published before the simulation; each fire of it is one more)."""
    at = from_ms(at_ms)

    def decide(chosen: Entry, now: datetime) -> Plan:
        return plan_tick(
            chosen,
            from_ms(nominal_ms),
            now,
            running=False,
            queued=False,
            prefix=settings.prefix,
            catchup_cap=settings.catchup_cap,
            default_grace=settings.default_grace,
            sent_at=at,
            runs=runs + walk.fire_count,
            owed=walk.owed,
        )

    now = from_ms(max(at_ms, nominal_ms))  # as dispatch.py: decided as of its own instant
    if windows or entry.exclude:
        plan = plan_held(
            entry,
            from_ms(nominal_ms),
            now,
            from_ms(max(at_ms, due_ms)),
            windows=windows,
            excluded=entry.excluded_dates,
            previous=walk.previous,
            owed=walk.owed,
            plan=decide,
        )
    else:
        plan = decide(entry, now)
    walk.owed, walk.previous = plan.owed, plan.newest or walk.previous
    # every message of a late claim is a catch-up (even a tick due just as the beats
    # come back: the claim decides it with the ticks it missed)
    kind: FireKind = "caught_up" if at_ms > due_ms else "on_time"
    for tick in plan.publish:
        tick_ms = to_ms(tick.nominal)
        due = from_ms(due_ms) if tick_ms == nominal_ms else _due_of(entry, schedule, tick.nominal)
        walk.fire(Fire(kind, from_ms(tick_ms), due, at, tick.missed, tick.task_id))
    if plan.missed_count:
        # the claim's own tick is the oldest; published ones are the newest, so when
        # any is missed, it is
        walk.drop(
            Dropped(at, "missed", plan.missed_count, from_ms(nominal_ms), _sample(plan.missed))
        )
    if plan.skipped_overlap:
        skipped = plan.skipped_overlap
        walk.drop(
            Dropped(
                at, "skipped_overlap", len(skipped), from_ms(to_ms(skipped[0])), _sample(skipped)
            )
        )
    for held in plan.held:  # a window's or an excluded date's
        first = held.ticks[0] if held.ticks else at
        walk.drop(Dropped(at, held.reason, held.count, first, _sample(list(held.ticks))))
    if plan.next_nominal is None or plan.next_due is None:
        return None
    return plan.next_nominal, plan.next_due


def _sample(ticks: list[datetime]) -> tuple[datetime, ...]:
    """The newest ticks, as many as the beat's history lists per claim, in ms as stored."""
    return tuple(from_ms(to_ms(tick)) for tick in ticks[-_SAMPLE:])


def _count_on_time(
    entry: Entry,
    schedule: Schedule,
    cursor: tuple[datetime, datetime],
    stop_ms: float,
    walk: _Walk,
) -> tuple[datetime, datetime] | None:
    """Count the on-time tick at ``cursor`` (and, for an interval without jitter, every
    on-time tick before ``stop_ms`` at once); returns the next tick."""
    nominal = cursor[0]
    count, last = 1, nominal
    if isinstance(schedule, IntervalSchedule) and entry.jitter <= 0 and stop_ms > to_ms(nominal):
        period_ms = schedule.period / timedelta(milliseconds=1)
        more = max(math.ceil((stop_ms - to_ms(nominal)) / period_ms) - 1, 0)
        if schedule.end_at is not None:
            room = (schedule.end_at - nominal) / schedule.period
            more = min(more, max(math.floor(room), 0))
        count, last = 1 + more, nominal + schedule.period * more
    walk.fire_count += count
    walk.counted += count if count == 1 else 1
    walk.owed = 0  # the first of them stood for what was folded
    return next_tick(entry, schedule, past_ms(last))


def event_fires(
    entry: Entry, schedule: EventSchedule, down: tuple[datetime, datetime] | None, prefix: str
) -> tuple[list[Fire], str]:
    """When an ``@reboot``/``@shutdown`` entry fires in the span, and the sentence that
    says when it fires: ``@reboot`` when the beats come back from ``down`` (every beat
    down means the first one back starts the cluster), ``@shutdown`` when they go down
    (if the last one stops cleanly)."""
    if schedule.event == "reboot":
        reason = "fires when the beat cluster starts (its first beat)"
        instant = None if down is None else down[1]
        kind: FireKind = "reboot"
        reason += "" if down is None else ": when the beats come back"
    else:
        reason = "fires when the last beat stops cleanly"
        instant = None if down is None else down[0]
        kind = "shutdown"
        reason += "" if down is None else ": when the beats go down, if they stop cleanly"
    if instant is None:
        return [], reason + "; no start or stop in the span (give a down window)"
    task_id = task_id_for(prefix, entry.name, to_ms(instant))
    return [Fire(kind, instant, instant, instant, 1, task_id)], reason
