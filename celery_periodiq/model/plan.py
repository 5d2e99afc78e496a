"""What to do with a claimed tick: pure decisions, no I/O, no clock.

Given an entry, the tick's nominal instant and the Redis clock at claim
time, :func:`plan_tick` decides which ticks to publish (catch-up policy and
window, beat-side overlap policy), which to count as missed or skipped, and
when the entry's next tick is due (jitter applied). The same inputs always
give the same plan, so a beat that takes over a dead beat's claim publishes
the very same ticks with the very same task ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, NamedTuple

from celery_periodiq.model import policy
from celery_periodiq.model.due import due_ticks
from celery_periodiq.model.entry import AUTO, Entry
from celery_periodiq.model.instants import from_ms, past_ms, tick_text, to_ms
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.schedules import IntervalSchedule, Schedule
from celery_periodiq.schedules.interval import EPOCH, micros

__all__ = [
    "Held",
    "HeldReason",
    "Plan",
    "Tick",
    "due_ticks",
    "from_ms",
    "next_tick",
    "next_tick_ms",
    "past_ms",
    "plan_tick",
    "task_id_for",
    "tick_text",
    "to_ms",
]

HeldReason = Literal["skipped_window", "deferred", "excluded"]
"""Why a maintenance window or an exclusion date held a tick back."""

# Missed ticks listed in the history per claim (the counter has them all).
_SAMPLE = 20
# The interval given to a lone last tick whose schedule has no earlier one to measure.
_FALLBACK_INTERVAL = 3600.0
_FOLD_MARGIN = 0.1
"""A late run sent less than the floor (half an interval by default) and this share of
an interval more before the next tick's run is folded into it: the worker keeps the
floor between two runs whatever made them late (:func:`~celery_periodiq.model.policy.
floor`); the margin is room for the message's way to a worker, so that the next run is
not the one dropped."""


class Tick(NamedTuple):
    """One message to publish (a tuple: quicker to build than a frozen dataclass)."""

    nominal: datetime
    """The tick's due instant, before jitter (UTC)."""
    missed: int
    """How many ticks this run stands for (1: just itself)."""
    interval: float
    """Seconds from this tick to the entry's next one: what the timebox is cut from."""
    gap_before: float
    """Seconds since the entry's previous tick: what the tolerance drop compares a run with."""
    expires: datetime | None
    """After this instant the run must not start any more; None: no limit."""
    soft_time_limit: float | None
    time_limit: float | None
    task_id: str
    catchup: bool = False
    """A run published too late to keep its place (the next tick, on time, would be too
    soon after it): the worker's too-soon rule neither drops it nor counts from it."""


@dataclass(slots=True)
class Plan:
    """The decision for one claimed tick."""

    publish: list[Tick] = field(default_factory=list)
    missed_count: int = 0
    """Ticks that will not run: superseded, outside the catch-up window or beyond the cap."""
    missed: list[datetime] = field(default_factory=list)
    """The newest of those, for the history (up to ``_SAMPLE``)."""
    skipped_overlap: list[datetime] = field(default_factory=list)
    """Ticks not published because a run is unfinished (skip) or waiting (buffer_one)."""
    next_nominal: datetime | None = None
    next_due: datetime | None = None
    """The next tick's due instant with jitter applied."""
    newest: datetime | None = None
    """The newest tick this plan handled: the previous tick of the next claim."""
    folded: datetime | None = None
    """A tick too late to run on time, folded into the next run (also in ``missed``)."""
    owed: int = 0
    """Ticks the entry's next published run stands for besides its own: those folded
    into it, and not yet stood for."""
    held: tuple[Held, ...] = ()
    """Ticks a maintenance window or an exclusion date held back (:mod:`.window_plan`)."""


@dataclass(frozen=True, slots=True)
class Held:
    """Ticks held back for one reason: ``skipped_window``, ``deferred`` or ``excluded``."""

    reason: HeldReason
    ticks: tuple[datetime, ...]
    """The newest of them (up to ``_SAMPLE``)."""
    count: int
    note: str


def next_tick(
    entry: Entry, schedule: Schedule, after: datetime, following: datetime | None = None
) -> tuple[datetime, datetime] | None:
    """The entry's next tick after ``after`` and when it is due (jitter applied), in UTC.

    ``following``: that next tick, if the caller computed it already.
    """
    following = schedule.next_after(after) if following is None else following
    if following is None:
        return None
    following = following.astimezone(UTC)
    if entry.jitter <= 0:
        return following, following
    after_next = schedule.next_after(following)
    gap = None if after_next is None else (after_next.astimezone(UTC) - following).total_seconds()
    return following, following + jitter_offset(entry, following, gap)


def next_tick_ms(entry: Entry, now: datetime) -> tuple[int, int] | None:
    """The entry's next tick after ``now`` and when it is due (jitter applied), in ms
    since the epoch: what an entry written, resumed or rebuilt at ``now`` waits for.
    None when it is disabled or its schedule has no tick left."""
    if not entry.enabled:
        return None
    upcoming = next_tick(entry, entry.parsed_schedule(), now)
    return None if upcoming is None else (to_ms(upcoming[0]), to_ms(upcoming[1]))


def jitter_offset(entry: Entry, nominal: datetime, interval: float | None) -> timedelta:
    """A deterministic delay in ``[0, jitter)`` per entry and tick, never reaching the next tick."""
    if entry.jitter <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{entry.name}\x00{to_ms(nominal)}".encode()).digest()
    span_ms = int(entry.jitter * 1000)
    if interval is not None:
        span_ms = min(span_ms, max(int(interval * 1000) - 1, 0))
    if span_ms <= 0:
        return timedelta(0)
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % span_ms)


def plan_tick(
    entry: Entry,
    nominal: datetime,
    now: datetime,
    *,
    running: bool,
    queued: bool,
    prefix: str,
    catchup_cap: int,
    default_grace: float,
    sent_at: datetime | None = None,
    previous: datetime | None = None,
    runs: int = 0,
    owed: int = 0,
    plain: bool = False,
) -> Plan:
    """Decide what a claimed tick becomes.

    Args:
        entry: the entry as stored when the tick was claimed.
        nominal: the oldest unhandled tick's due instant (UTC).
        now: the Redis clock when the tick was claimed (UTC).
        running: a run of the entry was unfinished at claim time.
        queued: a published run of the entry had not started at claim time.
        prefix: the key prefix, part of every task id.
        catchup_cap: the most ticks ``catchup="all"`` publishes at once.
        default_grace: the ``periodiq_default_grace`` setting.
        sent_at: when the messages are published (Redis clock); a tick taken
            over from a dead beat is published later than it was claimed, and
            each message may still wait one interval in the queue from then.
        previous: the entry's tick before ``nominal``, if known; on uneven
            schedules (``0 9,17 * * *``) the tolerance drop compares a run with
            the gap since that tick, not with the gap to the next one.
        runs: ticks published for the entry so far (what ``max_runs`` counts).
        owed: ticks folded into this entry's next run by earlier claims.
        plain: the entry's task is not a ``PeriodicTask``: its runs keep the task's own
            time limits unless the entry sets a timebox (:func:`policy.timebox`).

    Under ``catchup="last"`` and ``"skip"`` no two runs start less than half an
    interval apart, whatever made a tick late (a dead beat, a busy one, a failover, an
    outage): a tick sent so late that it would start within about half an interval of
    the next tick's run (the floor and :data:`_FOLD_MARGIN`; a tolerance over half the
    interval asks for closer runs), or past its own expiry, is folded into
    that run, which stands for it (``"last"``; with ``"skip"`` it is missed). A tick
    sent late but earlier than that runs as a catch-up run: the worker's too-soon rule
    neither drops it nor counts the next run from it (the worker still keeps half an
    interval between two runs: :func:`~celery_periodiq.model.policy.floor_ms`).
    ``catchup="all"`` runs every tick, back to back.
    """
    sent_at = now if sent_at is None else max(sent_at, now)
    schedule = entry.parsed_schedule()
    if (
        isinstance(schedule, IntervalSchedule)
        and nominal <= now < nominal + schedule.period
        and entry.jitter <= 0
        and entry.max_runs is None
        and entry.catchup_window is None
        and (entry.catchup != "all" or catchup_cap >= 1)
        and not (running and entry.overlap == "skip")
        and not (queued and entry.overlap == "buffer_one")
    ):
        on_time = _on_time(
            entry, schedule, nominal, sent_at, prefix, default_grace, previous, owed, plain
        )
        if on_time is not None:
            return on_time
    return _planned(
        entry,
        schedule,
        nominal,
        now,
        running,
        queued,
        prefix,
        catchup_cap,
        default_grace,
        sent_at,
        previous,
        runs,
        owed,
        plain,
    )


def _on_time(
    entry: Entry,
    schedule: IntervalSchedule,
    tick: datetime,
    sent_at: datetime,
    prefix: str,
    default_grace: float,
    previous: datetime | None,
    owed: int,
    plain: bool,
) -> Plan | None:
    """:func:`plan_tick` of an interval entry's only due tick, when nothing but the
    tick's own lateness can hold it back (no jitter, window, run limit or overlap in its
    way); None when the general way must decide: the last tick before ``end_at``, or a
    tick folded into the next. Tests check it gives what the general way gives. In whole
    microseconds (exact, as datetimes are) and float seconds: the beat's way per tick."""
    tick_us, sent_us = micros(tick), micros(sent_at)
    following_us = schedule.next_micros(tick_us - tick_us % 1000 + 999)  # past_ms(tick)
    if following_us is None:
        return None
    interval_us = following_us - tick_us
    interval = interval_us / 1_000_000
    late = (sent_us - tick_us) / 1_000_000
    expires = entry.expires
    too_late = expires is not None and expires != AUTO and late >= float(expires)
    if entry.catchup != "all" and (
        too_late
        or (following_us - sent_us) / 1_000_000
        < policy.floor(entry, interval) + interval * _FOLD_MARGIN
    ):
        return None  # :func:`_crowds`
    following = EPOCH + timedelta(microseconds=following_us)
    before_us = 0 if previous is None else tick_us - micros(previous)
    gap_before = before_us / 1_000_000 if before_us > 0 else interval
    numbers = policy.limits(entry, interval, default_grace, plain)
    expiry: datetime | None = None  # :func:`_expiry`: until the next tick, an interval at least
    if expires == AUTO:
        expiry = EPOCH + timedelta(microseconds=max(following_us, sent_us + interval_us))
    elif expires is not None:
        expiry = tick + timedelta(seconds=float(expires))
    published = Tick(
        nominal=tick,
        missed=1 + owed,  # the only tick due stands for itself and what was folded into it
        interval=interval,
        gap_before=gap_before,
        expires=expiry,
        soft_time_limit=numbers.timebox,
        time_limit=numbers.time_limit,
        task_id=task_id_for(prefix, entry.name, tick_us // 1000),
        # :func:`_behind`: the next tick, run when due, would come too soon after it
        catchup=too_late or (interval > 0 and late > policy.tolerance(entry, interval)),
    )
    return Plan(publish=[published], newest=tick, next_nominal=following, next_due=following)


def _planned(
    entry: Entry,
    schedule: Schedule,
    nominal: datetime,
    now: datetime,
    running: bool,
    queued: bool,
    prefix: str,
    catchup_cap: int,
    default_grace: float,
    sent_at: datetime,
    previous: datetime | None,
    runs: int,
    owed: int,
    plain: bool,
) -> Plan:
    """:func:`plan_tick`, the general way."""
    plan = Plan()
    keep = max(catchup_cap if entry.catchup == "all" else 1, _SAMPLE)
    ticks, count = due_ticks(schedule, nominal, now, keep)
    window = entry.catchup_window
    timely = [t for t in ticks if window is None or (now - t).total_seconds() <= window]

    chosen: list[datetime]
    if entry.catchup == "all":
        chosen = timely[-catchup_cap:]
    elif entry.catchup == "last":
        chosen = timely[-1:]
    else:  # skip: only a tick that nothing superseded runs
        chosen = timely if count == 1 else []

    if entry.overlap == "skip" and running and chosen:
        plan.skipped_overlap.extend(chosen)
        chosen = []
    elif entry.overlap == "buffer_one" and chosen:
        keep_one = [] if queued else chosen[-1:]
        plan.skipped_overlap.extend(t for t in chosen if t not in keep_one)
        chosen = keep_one
    left = None if entry.max_runs is None else max(entry.max_runs - runs, 0)
    if left is not None and len(chosen) > left:
        chosen = chosen[len(chosen) - left :]  # the others count as missed

    newest = ticks[-1]
    plan.newest = newest
    following = schedule.next_after(past_ms(newest))
    upcoming = next_tick(entry, schedule, newest, following)
    stands_for = count if entry.catchup == "last" else 1
    plan.owed = owed
    if entry.catchup != "all" and chosen and _crowds(entry, chosen[-1], upcoming, sent_at):
        # the only one ("last" and "skip" choose one) would run too close to the next
        plan.folded = chosen[-1]
        chosen = []
        if entry.catchup == "last":
            plan.owed = owed + stands_for
    plan.missed_count = count - len(chosen) - len(plan.skipped_overlap)
    plan.missed = [t for t in ticks if t not in chosen and t not in plan.skipped_overlap][-_SAMPLE:]

    for tick in chosen:
        position = ticks.index(tick)
        before = ticks[position - 1] if position > 0 else previous
        after = schedule.next_after(past_ms(tick)) if tick != newest else following
        if after is not None:
            interval = (after.astimezone(UTC) - tick).total_seconds()
        else:  # the last tick before end_at: give it the interval it came at
            interval = (tick - before).total_seconds() if before else _last_interval(schedule)
        gap_before = (tick - before).total_seconds() if before and before < tick else interval
        expires = _expiry(entry, tick, after, interval, sent_at)
        numbers = policy.limits(entry, interval, default_grace, plain)
        behind = after is not None and _behind(
            entry, tick, upcoming if tick == newest else (after, after), sent_at
        )
        plan.publish.append(
            Tick(
                nominal=tick,
                missed=stands_for + owed if tick == newest else 1,
                interval=interval,
                gap_before=gap_before,
                expires=expires,
                soft_time_limit=numbers.timebox,
                time_limit=numbers.time_limit,
                task_id=task_id_for(prefix, entry.name, to_ms(tick)),
                catchup=behind,
            )
        )
    if plan.publish and plan.publish[-1].nominal == newest:
        plan.owed = 0

    if left is not None and len(plan.publish) >= left:
        return plan  # no runs left: the entry has ended
    if upcoming is not None:
        plan.next_nominal, plan.next_due = upcoming
    return plan


def _crowds(
    entry: Entry,
    tick: datetime,
    upcoming: tuple[datetime, datetime] | None,
    sent_at: datetime,
) -> bool:
    """Whether a run of ``tick`` sent at ``sent_at`` would be worth nothing on its own:
    past its own ``expires``, or starting less than half an interval before the next
    tick's run (``upcoming``: that tick and its due instant) is due, and a little more
    (:data:`_FOLD_MARGIN`)."""
    expires, late = entry.expires, (sent_at - tick).total_seconds()
    if expires is not None and expires != AUTO and late >= float(expires):
        return True
    if upcoming is None:
        return False
    following, due = upcoming
    gap = (following - tick).total_seconds()
    return (due - sent_at).total_seconds() < policy.floor(entry, gap) + gap * _FOLD_MARGIN


def _behind(
    entry: Entry,
    tick: datetime,
    upcoming: tuple[datetime, datetime] | None,
    sent_at: datetime,
) -> bool:
    """Whether a run of ``tick`` sent at ``sent_at`` is too late to keep its place: the
    next tick (``upcoming``: it and its due instant), run when due, would start sooner
    after it than the worker's too-soon rule allows (the gap minus the tolerance), or
    ``tick`` has expired. Each tick costs this, so it works in float seconds."""
    late = (sent_at - tick).total_seconds()
    expires = entry.expires
    if expires is not None and expires != AUTO and late >= float(expires):
        return True
    if upcoming is None:
        return False
    following, due = upcoming
    gap = (following - tick).total_seconds()
    if gap <= 0:
        return False
    slack = policy.tolerance(entry, gap)
    if due is not following:  # jittered: the next run starts that much later
        slack += (due - following).total_seconds()
    return late > slack


def _expiry(
    entry: Entry, tick: datetime, after: datetime | None, interval: float, sent_at: datetime
) -> datetime | None:
    """When a published run stops being worth starting, per the entry's ``expires``."""
    if entry.expires is None:
        return None
    if entry.expires != AUTO:
        return tick + timedelta(seconds=float(entry.expires))
    # auto: until the next tick is due, and at least one interval from publishing
    # (a tick taken over from a dead beat, or caught up, is published late)
    return max(after.astimezone(UTC) if after else sent_at, sent_at + timedelta(seconds=interval))


def _last_interval(schedule: Schedule) -> float:
    if isinstance(schedule, IntervalSchedule):
        return schedule.period.total_seconds()
    return _FALLBACK_INTERVAL
