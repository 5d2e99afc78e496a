"""What a claimed tick becomes: pure decisions of ``plan_tick``, no Redis, no clock.

Every instant below is injected, and every expected value is worked out by hand:
``every=`` schedules are anchored to the Unix epoch, so with ``T0`` =
2024-01-01 00:00 UTC an ``every=60`` entry ticks at ``T0 + k minutes``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import (
    Plan,
    due_ticks,
    from_ms,
    jitter_offset,
    next_tick_ms,
    plan_tick,
    task_id_for,
    to_ms,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T0_MS = 1_704_067_200_000  # 19723 days * 86400 s


def at(minutes: float = 0, seconds: float = 0) -> datetime:
    """An instant relative to ``T0``."""
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def every_minute(name: str = "sweep", **policy: Any) -> Entry:
    return build_entry(name, "proj.tasks.sweep", every=60, **policy)


def plan(
    entry: Entry,
    nominal: datetime,
    now: datetime,
    *,
    running: bool = False,
    queued: bool = False,
    prefix: str = "periodiq",
    catchup_cap: int = 100,
    default_grace: float = 10.0,
    sent_at: datetime | None = None,
    owed: int = 0,
) -> Plan:
    return plan_tick(
        entry,
        nominal,
        now,
        running=running,
        queued=queued,
        prefix=prefix,
        catchup_cap=catchup_cap,
        default_grace=default_grace,
        sent_at=sent_at,
        owed=owed,
    )


def published(result: Plan) -> list[tuple[datetime, int]]:
    """(nominal instant, how many ticks it stands for) of each message."""
    return [(tick.nominal, tick.missed) for tick in result.publish]


# due_ticks


def test_due_ticks_of_an_interval_are_every_tick_from_the_first_to_now() -> None:
    schedule = every_minute().parsed_schedule()

    ticks, count = due_ticks(schedule, at(0), at(3, 30), keep=10)

    assert ticks == [at(0), at(1), at(2), at(3)]
    assert count == 4


def test_due_ticks_include_a_tick_due_exactly_now() -> None:
    schedule = every_minute().parsed_schedule()

    ticks, count = due_ticks(schedule, at(0), at(2), keep=10)

    assert ticks == [at(0), at(1), at(2)]
    assert count == 3


def test_due_ticks_of_a_cron_schedule_walk_the_schedule() -> None:
    schedule = build_entry("q", "proj.tasks.q", cron="*/15 * * * *").parsed_schedule()

    ticks, count = due_ticks(schedule, at(0), at(50), keep=10)

    assert ticks == [at(0), at(15), at(30), at(45)]
    assert count == 4


def test_due_ticks_of_a_huge_interval_backlog_keep_the_newest() -> None:
    schedule = build_entry("fast", "proj.tasks.fast", every=1).parsed_schedule()

    ticks, count = due_ticks(schedule, at(0), at(seconds=20_000), keep=3)

    assert count == 20_001
    assert ticks == [at(seconds=19_998), at(seconds=19_999), at(seconds=20_000)]


def test_due_ticks_of_a_huge_cron_backlog_keep_the_newest_and_count_at_least_the_limit() -> None:
    schedule = build_entry("fast", "proj.tasks.fast", cron="* * * * * *").parsed_schedule()

    ticks, count = due_ticks(schedule, at(0), at(seconds=20_000), keep=3)

    assert count >= 10_000
    assert ticks == [at(seconds=19_998), at(seconds=19_999), at(seconds=20_000)]


# catch-up: last


def test_catchup_last_publishes_the_newest_due_tick_standing_for_all_of_them() -> None:
    entry = every_minute(catchup="last")

    result = plan(entry, at(0), at(5, 20))

    assert published(result) == [(at(5), 6)]
    assert result.missed == [at(0), at(1), at(2), at(3), at(4)]
    assert result.skipped_overlap == []


def test_catchup_last_with_one_due_tick_publishes_it_standing_for_itself() -> None:
    entry = every_minute(catchup="last")

    result = plan(entry, at(0), at(0, 10))

    assert published(result) == [(at(0), 1)]
    assert result.missed == []


# catch-up: skip


def test_catchup_skip_runs_a_single_due_tick() -> None:
    entry = every_minute(catchup="skip")

    result = plan(entry, at(0), at(0, 10))

    assert published(result) == [(at(0), 1)]
    assert result.missed == []


def test_catchup_skip_runs_nothing_when_a_later_tick_superseded_the_first() -> None:
    entry = every_minute(catchup="skip")

    result = plan(entry, at(0), at(2, 10))

    assert result.publish == []
    assert result.missed == [at(0), at(1), at(2)]


# catch-up: all


def test_catchup_all_publishes_every_due_tick_oldest_first() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(0), at(2, 30))

    assert published(result) == [(at(0), 1), (at(1), 1), (at(2), 1)]
    assert result.missed == []


def test_catchup_all_publishes_at_most_the_cap_and_counts_the_oldest_as_missed() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(0), at(4, 30), catchup_cap=2)

    assert published(result) == [(at(3), 1), (at(4), 1)]
    assert result.missed == [at(0), at(1), at(2)]


def test_catchup_all_beyond_the_counting_limit_still_publishes_the_newest_ticks() -> None:
    entry = build_entry("fast", "proj.tasks.fast", every=1, catchup="all")

    result = plan(entry, at(0), at(seconds=20_000), catchup_cap=3)

    assert [tick.nominal for tick in result.publish] == [
        at(seconds=19_998),
        at(seconds=19_999),
        at(seconds=20_000),
    ]


# catch-up window


@pytest.mark.parametrize(
    ("catchup", "expected_published", "expected_missed"),
    [
        # The 00:03 tick is exactly 150 s old at 00:05:30: still inside the window.
        ("last", [(at(5), 6)], [at(0), at(1), at(2), at(3), at(4)]),
        ("skip", [], [at(0), at(1), at(2), at(3), at(4), at(5)]),
        ("all", [(at(3), 1), (at(4), 1), (at(5), 1)], [at(0), at(1), at(2)]),
    ],
)
def test_catchup_window_turns_ticks_older_than_the_window_into_missed_ones(
    catchup: str,
    expected_published: list[tuple[datetime, int]],
    expected_missed: list[datetime],
) -> None:
    entry = every_minute(catchup=catchup, catchup_window=150)

    result = plan(entry, at(0), at(5, 20))

    assert published(result) == expected_published
    assert result.missed == expected_missed


@pytest.mark.parametrize("catchup", ["last", "skip", "all"])
def test_catchup_window_drops_a_lone_tick_claimed_too_late(catchup: str) -> None:
    entry = every_minute(catchup=catchup, catchup_window=30)

    result = plan(entry, at(0), at(0, 50))

    assert result.publish == []
    assert result.missed == [at(0)]


# beat-side overlap


def test_overlap_skip_publishes_nothing_while_a_run_is_unfinished() -> None:
    entry = every_minute(overlap="skip")

    result = plan(entry, at(0), at(0, 10), running=True)

    assert result.publish == []
    assert result.skipped_overlap == [at(0)]
    assert result.missed == []


def test_overlap_skip_counts_every_catchup_tick_as_skipped_while_a_run_is_unfinished() -> None:
    entry = every_minute(overlap="skip", catchup="all")

    result = plan(entry, at(0), at(2, 30), running=True)

    assert result.publish == []
    assert result.skipped_overlap == [at(0), at(1), at(2)]


def test_overlap_buffer_one_publishes_nothing_while_a_run_is_queued() -> None:
    entry = every_minute(overlap="buffer_one")

    result = plan(entry, at(0), at(0, 10), queued=True)

    assert result.publish == []
    assert result.skipped_overlap == [at(0)]


def test_overlap_buffer_one_queues_one_tick_behind_an_unfinished_run() -> None:
    entry = every_minute(overlap="buffer_one")

    result = plan(entry, at(0), at(0, 10), running=True)

    assert published(result) == [(at(0), 1)]
    assert result.skipped_overlap == []


def test_overlap_buffer_one_publishes_at_most_the_newest_of_many_due_ticks() -> None:
    entry = every_minute(overlap="buffer_one", catchup="all")

    result = plan(entry, at(0), at(2, 30))

    assert published(result) == [(at(2), 1)]
    assert result.skipped_overlap == [at(0), at(1)]


def test_overlap_allow_ignores_unfinished_and_queued_runs() -> None:
    entry = every_minute(overlap="allow", catchup="all")

    result = plan(entry, at(0), at(2, 30), running=True, queued=True)

    assert published(result) == [(at(0), 1), (at(1), 1), (at(2), 1)]
    assert result.skipped_overlap == []


# message expiry


def test_a_message_expires_one_interval_after_it_is_sent() -> None:
    entry = every_minute()

    (tick,) = plan(entry, at(0), at(0, 10)).publish

    assert tick.interval == 60.0
    assert tick.expires == at(1, 10)


def test_a_message_sent_exactly_at_its_tick_expires_at_the_next_tick() -> None:
    entry = every_minute()

    (tick,) = plan(entry, at(0), at(0)).publish

    assert tick.expires == at(1)


def test_a_tick_published_late_expires_one_interval_after_it_is_really_sent() -> None:
    entry = every_minute()

    (tick,) = plan(entry, at(0), at(0, 1), sent_at=at(0, 5)).publish

    assert tick.expires == at(1, 5)


def test_a_sent_at_before_the_claim_counts_as_the_claim_instant() -> None:
    entry = every_minute()

    (tick,) = plan(entry, at(0), at(0, 10), sent_at=at(0, -5)).publish

    assert tick.expires == at(1, 10)


def test_catchup_all_old_ticks_expire_one_interval_after_they_are_sent() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(0), at(2, 30))

    assert [tick.expires for tick in result.publish] == [at(3, 30)] * 3


def test_the_final_tick_of_a_bounded_schedule_expires_after_it_is_sent() -> None:
    entry = every_minute(end_at=at(2))

    (tick,) = plan(entry, at(2), at(2, 1)).publish

    assert tick.expires > at(2, 1)


# time limits


# A tick that cannot keep its place: folded, missed, or a catch-up run


def test_a_tick_sent_within_about_half_an_interval_of_the_next_is_folded_into_it() -> None:
    entry = every_minute()  # the next tick is due at 2:00: 24 s are 40 % of an interval

    result = plan(entry, at(1), at(1, 0.1), sent_at=at(1, 24.1))

    assert result.publish == []
    assert (result.folded, result.owed, result.missed_count) == (at(1), 1, 1)
    assert (result.next_nominal, result.next_due) == (at(2), at(2))


@pytest.mark.parametrize("late", [0.1, 6, 23.9])  # claimed late, or sent late by a beat
def test_a_tick_late_by_less_than_half_an_interval_runs(late: float) -> None:
    entry = every_minute()

    result = plan(entry, at(1), at(1, late), sent_at=at(1, late))

    assert published(result) == [(at(1), 1)]
    assert (result.folded, result.owed) == (None, 0)
    assert result.publish[0].catchup == (late > 6)  # the tolerance: 6 s


def test_a_tick_claimed_late_within_half_an_interval_of_the_next_is_folded_too() -> None:
    entry = every_minute()  # the beats were down: claimed (not only sent) late

    result = plan(entry, at(1), at(1, 45))

    assert result.publish == []
    assert (result.folded, result.owed) == (at(1), 1)


@pytest.mark.parametrize(("late", "folded"), [(40, False), (45, True)])
def test_a_tolerance_over_half_the_interval_lets_a_late_tick_run_closer_to_the_next(
    late: float, folded: bool
) -> None:
    entry = every_minute(tolerance=50)  # runs may start 10 s apart: the floor is 10 s

    result = plan(entry, at(1), at(1, late))

    assert (result.folded is not None, len(result.publish)) == (folded, 0 if folded else 1)


def test_a_long_interval_tick_hours_late_still_runs_at_once() -> None:
    entry = build_entry("nightly", "proj.tasks.nightly", cron="0 2 * * *")
    nominal = datetime(2024, 1, 2, 2, tzinfo=UTC)

    result = plan(entry, nominal, nominal + timedelta(hours=3))

    assert published(result) == [(nominal, 1)]
    assert result.publish[0].catchup
    assert result.next_nominal == nominal + timedelta(days=1)


def test_the_run_after_a_fold_stands_for_the_folded_ticks() -> None:
    entry = every_minute()

    result = plan(entry, at(2), at(2, 0.1), owed=3)

    assert published(result) == [(at(2), 4)]
    assert result.owed == 0


def test_a_fold_after_a_fold_owes_them_all() -> None:
    entry = every_minute()

    result = plan(entry, at(2), at(2, 0.1), sent_at=at(2, 40), owed=2)

    assert result.publish == []
    assert (result.owed, result.missed_count, result.next_nominal) == (3, 1, at(3))


def test_with_catchup_skip_a_tick_too_late_is_missed_not_owed() -> None:
    entry = every_minute(catchup="skip")

    result = plan(entry, at(1), at(1, 0.1), sent_at=at(1, 25))

    assert result.publish == []
    assert (result.owed, result.missed_count) == (0, 1)


def test_a_tick_sent_late_by_a_busy_beat_runs_as_a_catch_up_run() -> None:
    entry = every_minute()

    result = plan(entry, at(1), at(1, 0.1), sent_at=at(1, 7))

    assert published(result) == [(at(1), 1)]
    assert result.publish[0].catchup


def test_a_tick_claimed_late_runs_as_a_catch_up_run_standing_for_the_missed_ones() -> None:
    entry = every_minute()

    result = plan(entry, at(0), at(5, 20))

    assert published(result) == [(at(5), 6)]
    assert result.publish[0].catchup


def test_catchup_all_ticks_sent_late_are_catch_up_runs_and_an_on_time_one_is_not() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(0), at(3, 2))

    assert [(tick.nominal, tick.catchup) for tick in result.publish] == [
        (at(0), True), (at(1), True), (at(2), True), (at(3), False),
    ]  # fmt: skip


def test_catchup_all_never_folds_a_late_tick() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(1), at(1, 0.1), sent_at=at(1, 50))

    assert published(result) == [(at(1), 1)]
    assert result.publish[0].catchup


def test_a_tick_sent_past_its_expiry_is_folded() -> None:
    entry = every_minute(expires=2, tolerance=30)  # on time until 0:30, expired after 0:02

    result = plan(entry, at(1), at(1, 0.1), sent_at=at(1, 3))

    assert result.publish == []
    assert result.owed == 1


@pytest.mark.parametrize(
    ("every", "timebox", "grace", "default_grace", "soft", "hard"),
    [
        (60, "auto", None, 10.0, 30.0, 36.0),  # half the interval; grace 20% of it
        (3600, "auto", None, 10.0, 1800.0, 1810.0),  # grace capped by the setting
        (4, "auto", None, 10.0, 2.0, 3.0),  # grace at least one second
        (3600, "auto", None, 0.0, 1800.0, 1800.0),  # a zero setting: no grace
        (60, 20, None, 10.0, 20.0, 24.0),  # explicit seconds
        (60, 20, 2.5, 10.0, 20.0, 22.5),  # explicit grace wins over the setting
    ],
)
def test_time_limits_follow_the_timebox_and_the_grace(
    every: int,
    timebox: float | str,
    grace: float | None,
    default_grace: float,
    soft: float,
    hard: float,
) -> None:
    entry = build_entry("job", "proj.tasks.job", every=every, timebox=timebox, grace=grace)

    (tick,) = plan(entry, at(0), at(0), default_grace=default_grace).publish

    assert (tick.soft_time_limit, tick.time_limit) == (soft, hard)


def test_timebox_none_disables_both_time_limits() -> None:
    entry = every_minute(timebox=None, grace=5)

    (tick,) = plan(entry, at(0), at(0, 10)).publish

    assert (tick.soft_time_limit, tick.time_limit) == (None, None)


# next tick and jitter


def test_next_nominal_is_the_tick_after_the_newest_due_one() -> None:
    entry = every_minute()

    result = plan(entry, at(0), at(2, 30))

    assert result.next_nominal == at(3)
    assert result.next_due == at(3)


def test_next_due_is_the_next_tick_delayed_by_the_entry_jitter() -> None:
    entry = every_minute(jitter=30)

    result = plan(entry, at(0), at(0, 10))

    offset = jitter_offset(entry, at(1), 60.0)
    assert result.next_nominal == at(1)
    assert result.next_due == at(1) + offset
    assert timedelta(0) <= offset < timedelta(seconds=30)


def test_the_next_tick_from_now_is_the_first_after_now_with_its_jittered_due_instant() -> None:
    entry = every_minute(jitter=30)

    upcoming = next_tick_ms(entry, at(1))

    assert upcoming == (to_ms(at(2)), to_ms(at(2) + jitter_offset(entry, at(2), 60.0)))


def test_a_disabled_entry_or_one_without_ticks_left_has_no_next_tick() -> None:
    ended = every_minute(end_at=at(1))

    assert next_tick_ms(every_minute(enabled=False), at(0)) is None
    assert next_tick_ms(ended, at(1)) is None


def test_jitter_is_the_same_for_the_same_entry_and_tick() -> None:
    first, second = every_minute(jitter=30), every_minute(jitter=30)

    offsets = {jitter_offset(entry, at(7), 60.0) for entry in (first, second, first)}

    assert len(offsets) == 1


def test_jitter_stays_below_the_jitter_setting_and_varies_per_tick() -> None:
    entry = build_entry("hourly", "proj.tasks.hourly", every=3600, jitter=30)

    offsets = [jitter_offset(entry, at(60 * k), 3600.0) for k in range(100)]

    assert all(timedelta(0) <= offset < timedelta(seconds=30) for offset in offsets)
    assert len(set(offsets)) > 1


def test_jitter_varies_per_entry_for_the_same_tick() -> None:
    entries = [every_minute(f"sweep-{k}", jitter=30) for k in range(20)]

    offsets = {jitter_offset(entry, at(1), 60.0) for entry in entries}

    assert len(offsets) > 1


def test_jitter_never_reaches_the_following_tick() -> None:
    entry = build_entry("often", "proj.tasks.often", every=10, jitter=3600)

    offsets = [jitter_offset(entry, at(seconds=10 * k), 10.0) for k in range(100)]

    assert all(timedelta(0) <= offset < timedelta(seconds=10) for offset in offsets)


def test_no_jitter_means_no_delay() -> None:
    entry = every_minute(jitter=0)

    offset = jitter_offset(entry, at(1), 60.0)

    assert offset == timedelta(0)


def test_jitter_never_reaches_the_following_tick_across_spring_forward() -> None:
    # Daily at 12:00 Berlin: 2024-03-30 12:00 CET (11:00 UTC) is followed 23 h later by
    # 2024-03-31 12:00 CEST (10:00 UTC). With a day of jitter, this entry name hashes to
    # an offset of about 23.85 h for the 2024-03-30 tick, found by trying names.
    entry = build_entry(
        "report-60", "proj.tasks.report", cron="0 12 * * *", tz="Europe/Berlin", jitter=86_400
    )
    nominal = datetime(2024, 3, 29, 11, tzinfo=UTC)

    result = plan(entry, nominal, nominal + timedelta(seconds=1))

    assert result.next_nominal == datetime(2024, 3, 30, 11, tzinfo=UTC)
    assert result.next_due is not None
    assert result.next_due < datetime(2024, 3, 31, 10, tzinfo=UTC)


# determinism and task ids


def test_the_same_claim_always_gives_the_same_plan() -> None:
    entry = every_minute(catchup="all", jitter=20)

    first = plan(entry, at(0), at(3, 30), sent_at=at(3, 40))
    second = plan(every_minute(catchup="all", jitter=20), at(0), at(3, 30), sent_at=at(3, 40))

    assert first == second


def test_a_beat_taking_over_a_claim_republishes_the_same_task_ids() -> None:
    entry = every_minute(catchup="all")
    original = plan(entry, at(0), at(2, 30))

    takeover = plan(entry, at(0), at(2, 30), sent_at=at(2, 45))

    assert [tick.task_id for tick in takeover.publish] == [
        tick.task_id for tick in original.publish
    ]
    assert [tick.nominal for tick in takeover.publish] == [at(0), at(1), at(2)]


def test_a_published_tick_carries_the_task_id_of_its_prefix_entry_and_instant() -> None:
    entry = every_minute()

    (tick,) = plan(entry, at(0), at(0, 10), prefix="prod").publish

    assert tick.task_id == task_id_for("prod", "sweep", T0_MS)
    assert uuid.UUID(tick.task_id).version == 5


def test_each_tick_of_a_catchup_gets_its_own_task_id() -> None:
    entry = every_minute(catchup="all")

    result = plan(entry, at(0), at(4, 30))

    assert len({tick.task_id for tick in result.publish}) == 5


@pytest.mark.parametrize(
    ("prefix", "name", "nominal_ms"),
    [
        ("periodiq", "sweep", T0_MS + 60_000),  # another tick
        ("periodiq", "sweep2", T0_MS),  # another entry
        ("staging", "sweep", T0_MS),  # another prefix
        ("periodiq", "sweep", T0_MS + 1),  # a millisecond later
    ],
)
def test_task_ids_differ_per_tick_entry_and_prefix(prefix: str, name: str, nominal_ms: int) -> None:
    reference = task_id_for("periodiq", "sweep", T0_MS)

    other = task_id_for(prefix, name, nominal_ms)

    assert other != reference


def test_a_task_id_is_the_same_every_time_for_the_same_tick() -> None:
    ids = {task_id_for("periodiq", "sweep", T0_MS) for _ in range(3)}

    assert len(ids) == 1


# milliseconds


def test_to_ms_counts_whole_milliseconds_since_the_epoch() -> None:
    assert to_ms(T0) == T0_MS


def test_to_ms_drops_sub_millisecond_parts() -> None:
    instants = [datetime(1970, 1, 1, 0, 0, 0, micro, tzinfo=UTC) for micro in (999, 1_999)]

    assert [to_ms(instant) for instant in instants] == [0, 1]


def test_to_ms_reads_an_instant_in_any_zone() -> None:
    berlin = datetime(2024, 1, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))

    assert to_ms(berlin) == T0_MS


def test_from_ms_gives_an_aware_utc_instant() -> None:
    instant = from_ms(T0_MS + 123)

    assert instant == datetime(2024, 1, 1, 0, 0, 0, 123_000, tzinfo=UTC)
    assert instant.tzinfo is UTC


@pytest.mark.parametrize("ms", [-1, 0, 1, T0_MS + 123, 4_102_444_800_999])
def test_from_ms_and_to_ms_round_trip(ms: int) -> None:
    assert to_ms(from_ms(ms)) == ms


# interval of a tick in a DST zone


def test_a_cron_tick_before_spring_forward_has_a_23_hour_interval() -> None:
    # 2024-03-30 12:00 CET = 11:00 UTC; 2024-03-31 12:00 CEST = 10:00 UTC.
    entry = build_entry("noon", "proj.tasks.noon", cron="0 12 * * *", tz="Europe/Berlin")
    nominal = datetime(2024, 3, 30, 11, tzinfo=UTC)
    now = nominal + timedelta(seconds=1)

    (tick,) = plan(entry, nominal, now).publish

    assert tick.interval == 82_800.0
    assert (tick.soft_time_limit, tick.time_limit) == (41_400.0, 41_410.0)
    assert tick.expires == now + timedelta(hours=23)


def test_a_cron_tick_before_fall_back_has_a_25_hour_interval() -> None:
    # 2024-10-26 12:00 CEST = 10:00 UTC; 2024-10-27 12:00 CET = 11:00 UTC.
    entry = build_entry("noon", "proj.tasks.noon", cron="0 12 * * *", tz="Europe/Berlin")
    nominal = datetime(2024, 10, 26, 10, tzinfo=UTC)

    result = plan(entry, nominal, nominal + timedelta(seconds=1))

    assert [tick.interval for tick in result.publish] == [90_000.0]
    assert result.next_nominal == datetime(2024, 10, 27, 11, tzinfo=UTC)


def test_a_calendar_wall_time_repeated_by_fall_back_is_one_tick() -> None:
    # New York, 2024-11-03: 01:30 EDT (05:30 UTC) and 01:30 EST (06:30 UTC) are one tick;
    # the next is 2024-11-04 01:30 EST = 06:30 UTC, 25 h later.
    entry = build_entry(
        "night", "proj.tasks.night", calendar="*-*-* 01:30", tz="America/New_York", catchup="all"
    )
    nominal = datetime(2024, 11, 3, 5, 30, tzinfo=UTC)

    result = plan(entry, nominal, datetime(2024, 11, 3, 6, 45, tzinfo=UTC))

    assert [(tick.nominal, tick.interval) for tick in result.publish] == [(nominal, 90_000.0)]
    assert result.next_nominal == datetime(2024, 11, 4, 6, 30, tzinfo=UTC)


def test_a_calendar_wall_time_skipped_by_spring_forward_fires_after_the_gap() -> None:
    # New York: 2024-03-09 02:30 EST = 07:30 UTC; 2024-03-10 02:30 does not exist and
    # fires at 03:00 EDT = 07:00 UTC; 2024-03-11 02:30 EDT = 06:30 UTC. Both gaps: 23.5 h.
    entry = build_entry(
        "night", "proj.tasks.night", calendar="*-*-* 02:30", tz="America/New_York", catchup="all"
    )
    nominal = datetime(2024, 3, 9, 7, 30, tzinfo=UTC)

    result = plan(entry, nominal, datetime(2024, 3, 10, 7, 30, tzinfo=UTC))

    assert [(tick.nominal, tick.interval) for tick in result.publish] == [
        (nominal, 84_600.0),
        (datetime(2024, 3, 10, 7, tzinfo=UTC), 84_600.0),
    ]
    assert result.next_nominal == datetime(2024, 3, 11, 6, 30, tzinfo=UTC)


# expiry of published runs


def test_expiry_auto_is_the_next_tick() -> None:
    entry = every_minute()
    result = plan(entry, at(1), at(1))
    assert result.publish[0].expires == at(2)


def test_expiry_in_seconds_counts_from_the_tick() -> None:
    entry = build_entry("e", "proj.tasks.e", every=60, expires=150)
    result = plan(entry, at(1), at(1))
    assert result.publish[0].expires == at(1) + timedelta(seconds=150)


def test_expiry_none_never_expires() -> None:
    entry = build_entry("e", "proj.tasks.e", every=60, expires=None)
    result = plan(entry, at(1), at(1))
    assert result.publish[0].expires is None


def test_a_tick_between_milliseconds_is_followed_by_the_next_one_not_by_itself() -> None:
    # The beat stores ticks in whole ms; a start_at with microseconds puts every tick
    # between two of them. The stored tick must still lead to the next one.
    start = T0 + timedelta(microseconds=957_945)
    entry = build_entry("tenant", "proj.poll", every=3600, start_at=start)

    result = plan(entry, from_ms(to_ms(start)), from_ms(to_ms(start) + 50))

    assert [to_ms(t.nominal) for t in result.publish] == [T0_MS + 957]
    assert result.publish[0].interval == pytest.approx(3600.0)
    assert result.next_nominal is not None
    assert to_ms(result.next_nominal) == T0_MS + 3_600_957


def test_solar_ticks_with_microseconds_are_each_planned_once() -> None:
    entry = build_entry("dawn", "proj.lights", cron="@solar sunrise 48.85 2.35", catchup="all")
    schedule = entry.parsed_schedule()
    first = schedule.next_after(T0)
    assert first is not None
    assert first.microsecond % 1000 != 0
    stored = from_ms(to_ms(first))

    result = plan(entry, stored, stored + timedelta(days=2, hours=1))

    days = [to_ms(t.nominal) for t in result.publish]
    assert len(days) == len(set(days)) == 3
    assert all(t.interval > 80_000 for t in result.publish)
    assert result.next_nominal is not None
    assert to_ms(result.next_nominal) > days[-1]


@given(
    prefix=st.text(min_size=1, max_size=30),
    name=st.text(min_size=1, max_size=60),
    nominal_ms=st.integers(min_value=0, max_value=2**45),
)
def test_a_task_id_is_the_uuid5_of_prefix_name_and_tick(
    prefix: str, name: str, nominal_ms: int
) -> None:
    namespace = uuid.UUID("6f1c3a52-5d2e-4c47-9a8e-0d4d1b9a7e10")  # never to change
    expected = str(uuid.uuid5(namespace, f"{prefix}\x00{name}\x00{nominal_ms}"))

    assert task_id_for(prefix, name, nominal_ms) == expected
