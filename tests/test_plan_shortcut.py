"""plan_tick's short way for an interval entry's on-time tick decides what the general
way decides, over many generated cases (and declines where it must)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import _on_time, _planned, from_ms, plan_tick, to_ms
from celery_periodiq.schedules import IntervalSchedule
from celery_periodiq.schedules.interval import EPOCH, micros

START = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    period = draw(st.sampled_from([0.5, 1, 7.25, 60, 90, 3600, 86400]))
    policy: dict[str, Any] = {
        "overlap": draw(st.sampled_from(["skip", "allow", "buffer_one"])),
        "catchup": draw(st.sampled_from(["last", "skip", "all"])),
        "expires": draw(st.sampled_from(["auto", None, period / 3, period * 2])),
        "tolerance": draw(st.sampled_from(["auto", 0.0, period * 0.6, period * 0.9])),
        "timebox": draw(st.sampled_from(["auto", None, period / 4, float(period)])),
        "jitter": draw(st.sampled_from([0.0, 0.0, 0.0, period / 2])),
    }
    if draw(st.integers(0, 5)) == 0:
        policy["max_runs"] = draw(st.integers(1, 5))
    if draw(st.integers(0, 5)) == 0:
        policy["catchup_window"] = period * draw(st.sampled_from([0.1, 0.5, 3]))
    ticks = draw(st.integers(0, 50))
    # an anchor between two milliseconds (start_at as given, e.g. datetime.now()), and the
    # tick as the beat has it: its millisecond (to_ms), or its exact instant
    start = START + timedelta(microseconds=draw(st.sampled_from([0, 0, 309_430, 999_999])))
    fire = start + timedelta(seconds=period * ticks)
    nominal = from_ms(to_ms(fire)) if draw(st.booleans()) else fire
    end_at = None
    if draw(st.booleans()):  # the schedule ends around this tick
        end_at = fire + timedelta(seconds=period * draw(st.sampled_from([0, 0.5, 1, 2])))
    entry = build_entry(
        "sweep", "proj.sweep", every=period, start_at=start, end_at=end_at, **policy
    )
    lateness = timedelta(seconds=period * draw(st.sampled_from([0, 0.01, 0.3, 0.55, 0.99, 1, 2.5])))
    delay = timedelta(seconds=period * draw(st.sampled_from([0, 0.05, 0.45, 0.6, 1.2])))
    now = nominal + lateness + timedelta(milliseconds=draw(st.integers(0, 3)))
    previous = draw(
        st.sampled_from(
            [None, nominal - timedelta(seconds=period), nominal - timedelta(seconds=period / 3),
             nominal]
        )
    )  # fmt: skip
    return {
        "entry": entry,
        "nominal": nominal,
        "now": now,
        "running": draw(st.booleans()),
        "queued": draw(st.booleans()),
        "prefix": "periodiq",
        "catchup_cap": draw(st.sampled_from([0, 1, 3, 100])),
        "default_grace": draw(st.sampled_from([10.0, 0.5])),
        "sent_at": draw(st.sampled_from([None, now + delay, now - delay])),
        "previous": previous,
        "runs": draw(st.integers(0, 6)),
        "owed": draw(st.integers(0, 3)),
        "plain": draw(st.booleans()),
    }


@settings(max_examples=1500, deadline=None)
@given(cases())
def test_the_short_way_plans_what_the_general_way_plans(case: dict[str, Any]) -> None:
    sent_at = case["sent_at"]
    sent_at = case["now"] if sent_at is None else max(sent_at, case["now"])
    entry = case["entry"]
    general = _planned(
        entry, entry.parsed_schedule(), case["nominal"], case["now"], case["running"],
        case["queued"], case["prefix"], case["catchup_cap"], case["default_grace"], sent_at,
        case["previous"], case["runs"], case["owed"], case["plain"],
    )  # fmt: skip

    planned = plan_tick(**case)

    short = general.publish and not general.missed_count and len(general.publish) == 1
    event("published one tick, missed none" if short else "another decision")
    assert planned == general


def test_an_on_time_tick_of_a_plain_interval_entry_takes_the_short_way() -> None:
    entry = build_entry("sweep", "proj.sweep", every=60, start_at=START)
    nominal = START + timedelta(minutes=3)
    now = nominal + timedelta(seconds=1)

    short = _on_time(entry, entry.parsed_schedule(), nominal, now, "periodiq", 10.0, None, 0, False)

    assert short is not None
    assert short == plan_tick(
        entry, nominal, now, running=False, queued=False, prefix="periodiq", catchup_cap=100,
        default_grace=10.0,
    )  # fmt: skip
    assert [tick.nominal for tick in short.publish] == [nominal]
    assert short.next_nominal == nominal + timedelta(minutes=1)


@settings(max_examples=500, deadline=None)
@given(
    period_us=st.sampled_from([1_000, 500_000, 7_250_000, 3_600_000_000, 86_400_000_001]),
    anchor_us=st.integers(-(10**15), 10**15),
    start=st.booleans(),
    end_after_us=st.none() | st.integers(0, 10**11),
    after_us=st.integers(-(10**15), 10**15),
)
def test_an_interval_schedules_next_fire_in_microseconds_is_its_next_fire(
    period_us: int, anchor_us: int, start: bool, end_after_us: int | None, after_us: int
) -> None:
    anchor = EPOCH + timedelta(microseconds=anchor_us)
    end_at = None if end_after_us is None else anchor + timedelta(microseconds=end_after_us)
    schedule = IntervalSchedule(
        "@every",
        timedelta(microseconds=period_us),
        start_at=anchor if start else None,
        end_at=end_at,
    )
    following = schedule.next_after(EPOCH + timedelta(microseconds=after_us))

    found = schedule.next_micros(after_us)

    assert found == (None if following is None else micros(following))
