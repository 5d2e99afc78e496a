"""A claimed tick decided with the maintenance windows and exclusion dates of its entry.

Pure, like :mod:`.plan`: the same claim, windows and instants give the same plan on any
beat, so a takeover decides what the dead beat decided. A tick inside a ``skip`` window,
or on one of the entry's excluded dates, is not sent and is recorded (``skipped_window``,
``excluded``). A tick inside a ``defer`` window is recorded as ``deferred`` and the
entry waits, its oldest deferred tick kept as its next tick, due at the window's end
(and at each tick before it, which is recorded in its turn and lets a window removed
meanwhile take effect at once); at the end one catch-up run goes, as ``catchup="last"``
sends one, standing for every tick it deferred, unless the next tick comes too close
after it, which then stands for them (invariant 4: no bunching).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any

from celery_periodiq.model.due import due_ticks
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import Held, HeldReason, Plan, Tick, next_tick
from celery_periodiq.model.windows import Cover, Window, covering, excluded_on

__all__ = ["HELD_REASONS", "plan_held", "upcoming_runs"]

HELD_REASONS: tuple[HeldReason, ...] = ("skipped_window", "deferred", "excluded")
"""The history's and the counters' reasons for a tick a window or a date held back."""

_SAMPLE = 20
_MS = timedelta(milliseconds=1)


def plan_held(
    entry: Entry,
    nominal: datetime,
    now: datetime,
    decide_at: datetime,
    *,
    windows: tuple[Window, ...],
    excluded: frozenset[date],
    previous: datetime | None,
    owed: int,
    plan: Callable[[Entry, datetime], Plan],
) -> Plan:
    """What the claimed tick ``nominal`` becomes under ``windows`` (those of its entry)
    and its ``excluded`` dates.

    Args:
        entry: the entry as stored when the tick was claimed.
        nominal: the oldest unhandled tick (a deferred entry keeps its first deferred one).
        now: the Redis clock at the claim, as :func:`~.plan.plan_tick` takes it.
        decide_at: the instant the claim is sent at (its due instant when claimed ahead):
            a defer window whose end it reached is over.
        previous: the newest tick settled before this claim (what was recorded already).
        owed: ticks folded into the entry's next run by earlier claims.
        plan: :func:`~.plan.plan_tick` with every other argument bound: it takes the
            entry (a catch-up after a defer window plans as ``catchup="last"``) and now.
    """
    first = covering(windows, nominal) if windows else None
    if first is not None and first.defer:
        if first.end > decide_at:
            return _deferring(entry, nominal, now, first, previous, owed)
        # the window is over: one run for what it deferred, whatever the entry's catch-up
        made = plan(replace(entry, catchup="last", catchup_window=None), max(now, decide_at))
        _caught_up(made, entry, nominal, first, previous)
    else:
        made = plan(entry, now)
        if made.missed_count and (windows or excluded):
            _missed_held(made, entry, nominal, windows, excluded)
    if made.publish:
        _filter(made, entry, windows, excluded, decide_at)
    return made


def _missed_held(
    made: Plan,
    entry: Entry,
    nominal: datetime,
    windows: tuple[Window, ...],
    excluded: frozenset[date],
) -> None:
    """Ticks the plan gives up as missed (no beat ran at them: a beat down through a skip
    window) that a ``skip`` window or an excluded date held are recorded as held, and
    the run that goes stands for them no more. Counted span by span (a window's
    openings, a date's day), not tick by tick: an outage can hold thousands."""
    last = made.newest
    if last is None:
        return
    schedule = entry.parsed_schedule()
    sent = {tick.nominal for tick in made.publish} | set(made.skipped_overlap)
    held: dict[tuple[HeldReason, str], tuple[list[datetime], int]] = {}
    cursor = nominal
    for low, high, reason, note in _holding(windows, excluded, schedule.zone, nominal, last):
        low, high = max(low, cursor), min(high, last + _MS)
        if low >= high:
            continue
        cursor = high
        first = schedule.next_after(low - _MS)
        if first is None or first.astimezone(UTC) >= high:
            continue
        ticks, count = due_ticks(schedule, first.astimezone(UTC), high - _MS, _SAMPLE)
        count -= sum(1 for tick in sent if low <= tick < high)
        if count > 0:
            found, total = held.get((reason, note), ([], 0))
            held[(reason, note)] = (found + [t for t in ticks if t not in sent], total + count)
    moved = sum(count for _, count in held.values())
    if not moved:
        return
    out = {tick for found, _ in held.values() for tick in found}
    made.missed = [tick for tick in made.missed if tick not in out]
    made.missed_count = max(made.missed_count - moved, 0)
    if entry.catchup == "last":
        if made.publish and made.publish[-1].nominal == last:
            newest = made.publish[-1]
            made.publish[-1] = newest._replace(missed=max(newest.missed - moved, 1))
        elif made.folded is not None:
            made.owed = max(made.owed - moved, 0)
    made.held += tuple(
        Held(reason, tuple(found[-_SAMPLE:]), count, note)
        for (reason, note), (found, count) in held.items()
    )


_OPENINGS_MOST = 1_000
"""Openings of one window :func:`_holding` lists, at most (past them: missed)."""


def _holding(
    windows: tuple[Window, ...],
    excluded: frozenset[date],
    zone: Any,
    start: datetime,
    end: datetime,
) -> list[tuple[datetime, datetime, HeldReason, str]]:
    """The spans from ``start`` to ``end`` in which a ``skip`` window or an excluded date
    (a day in ``zone``) holds ticks, (from, to, reason, note) in order; where they
    overlap the first listed counts."""
    spans: list[tuple[datetime, datetime, HeldReason, str]] = []
    for day in sorted(excluded):
        low = datetime.combine(day, dtime.min, zone).astimezone(UTC)
        high = datetime.combine(day + timedelta(days=1), dtime.min, zone).astimezone(UTC)
        if high > start and low <= end:
            spans.append((low, high, "excluded", _excluded_note(day)))
    for window in windows:
        if window.policy != "skip":
            continue
        opening = window.next_opening(start)
        for _ in range(_OPENINGS_MOST):
            if opening is None or opening[0] > end:
                break
            spans.append((opening[0], opening[1], "skipped_window", _skip_note(window, opening[1])))
            opening = window.next_opening(opening[1])
    return sorted(spans, key=lambda span: span[0])


def _deferring(
    entry: Entry,
    nominal: datetime,
    now: datetime,
    cover: Cover,
    previous: datetime | None,
    owed: int,
) -> Plan:
    """The plan of a claim inside a defer window: nothing sent, the ticks come due since
    the last claim recorded as deferred, the next claim at the next tick or the end."""
    schedule = entry.parsed_schedule()
    ticks, count = due_ticks(schedule, nominal, max(now, nominal), _SAMPLE)
    fresh = [tick for tick in ticks if previous is None or tick > previous]
    count -= _through(entry, nominal, previous)
    newest = ticks[-1]
    following = next_tick(entry, schedule, newest)
    due = cover.end if following is None else min(cover.end, following[1])
    held = (Held("deferred", tuple(fresh), count, _deferred_note(cover)),) if count > 0 else ()
    return Plan(next_nominal=nominal, next_due=due, newest=newest, owed=owed, held=held)


def _caught_up(
    made: Plan, entry: Entry, nominal: datetime, cover: Cover, previous: datetime | None
) -> None:
    """The catch-up run after a defer window: the ticks it stands for are deferred ones,
    not missed; those a claim inside the window recorded are not recorded again."""
    end = cover.end
    inside = [tick for tick in made.missed if tick < end]
    if not inside and made.missed_count == 0:
        return
    published = sum(1 for tick in made.publish if tick.nominal < end)
    total = _through(entry, nominal, end - _MS) - published
    made.missed = [tick for tick in made.missed if tick >= end]
    made.missed_count = max(made.missed_count - total, 0)
    fresh = tuple(tick for tick in inside if previous is None or tick > previous)
    count = total - _through(entry, nominal, previous)
    if count > 0:
        note = (
            f"deferred by window {cover.window.id!r}: too late at its end, the next run "
            "stands for it"
            if made.folded is not None and made.folded < end
            else f"deferred by window {cover.window.id!r}: the run at its end stands for it"
        )
        made.held += (Held("deferred", fresh, count, note),)


def _filter(
    made: Plan,
    entry: Entry,
    windows: tuple[Window, ...],
    excluded: frozenset[date],
    decide_at: datetime,
) -> None:
    """Take out of ``made`` the ticks an excluded date or an open window holds."""
    kept: list[Tick] = []
    skipped: dict[tuple[HeldReason, str], list[datetime]] = {}
    zone = entry.parsed_schedule().zone if excluded else None
    for tick in made.publish:
        day = excluded_on(excluded, zone, tick.nominal) if excluded else None
        if day is not None:
            skipped.setdefault(("excluded", _excluded_note(day)), []).append(tick.nominal)
            continue
        cover = covering(windows, tick.nominal) if windows else None
        if cover is None or (cover.defer and cover.end <= decide_at):
            kept.append(tick)
            continue
        if not cover.defer:
            note = _skip_note(cover.window, cover.end)
            skipped.setdefault(("skipped_window", note), []).append(tick.nominal)
            continue
        # deferred from this tick on: it stays the entry's next tick, due at the end
        following = next_tick(entry, entry.parsed_schedule(), tick.nominal)
        made.next_nominal = tick.nominal
        made.next_due = cover.end if following is None else min(cover.end, following[1])
        made.newest, made.owed = tick.nominal, tick.missed - 1
        skipped.setdefault(("deferred", _deferred_note(cover)), []).append(tick.nominal)
        break
    made.publish = kept
    made.held += tuple(
        Held(reason, tuple(ticks[-_SAMPLE:]), len(ticks), note)
        for (reason, note), ticks in skipped.items()
    )


def _through(entry: Entry, nominal: datetime, upto: datetime | None) -> int:
    """How many ticks from ``nominal`` up to ``upto`` (0 when none or no ``upto``)."""
    if upto is None or upto < nominal:
        return 0
    return due_ticks(entry.parsed_schedule(), nominal, upto, 1)[1]


def _skip_note(window: Window, end: datetime) -> str:
    return f"in window {window.id!r} until {_text(end)}"


def _excluded_note(day: date) -> str:
    return f"{day.isoformat()} is excluded"


def _deferred_note(cover: Cover) -> str:
    return f"deferred by window {cover.window.id!r} to {_text(cover.end)}"


def _text(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


_LOOKED_MOST = 20_000
"""Ticks :func:`upcoming_runs` looks at, at most (a long window over a frequent entry)."""


def upcoming_runs(
    entry: Entry, windows: tuple[Window, ...], start: datetime, n: int
) -> list[datetime]:
    """The next ``n`` instants after ``start`` at which the entry's runs go, in its zone:
    its ticks, less those a ``skip`` window or an excluded date holds; the ticks a
    ``defer`` window holds make one run at its end. (A catch-up run too close before the
    next tick, which then stands for it, is listed at the window's end all the same.)"""
    schedule = entry.parsed_schedule()
    excluded, zone = entry.excluded_dates, schedule.zone
    if not windows and not excluded:
        return schedule.upcoming(start, n)
    runs: list[datetime] = []
    deferred: datetime | None = None
    current = start
    for _ in range(_LOOKED_MOST):
        if len(runs) >= n:
            break
        tick = schedule.next_after(current)
        if tick is None:
            break
        current = tick = tick.astimezone(UTC)
        if deferred is not None and tick >= deferred:
            if tick > deferred:  # a tick at the very end is the catch-up run itself
                runs.append(deferred)
            deferred = None
            if len(runs) >= n:
                break
        if excluded and excluded_on(excluded, zone, tick) is not None:
            continue
        cover = covering(windows, tick) if windows else None
        if cover is None:
            runs.append(tick)
        elif cover.defer:
            deferred = cover.end if deferred is None else max(deferred, cover.end)
    if deferred is not None and len(runs) < n:
        runs.append(deferred)  # the schedule ended inside the window
    return [run.astimezone(zone) for run in runs[:n]]
