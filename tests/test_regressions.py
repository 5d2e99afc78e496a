"""Bugs found by running the example project, kept as tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import redis
from celery import Celery

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.beat.publish import message_options
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import plan_tick, to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_MIN_GAP, HEADER_TICK

DAY = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday


def plan(spec: str, tick: datetime, previous: datetime | None) -> dict[str, object]:
    entry = build_entry("uneven", "proj.t", cron=spec)
    result = plan_tick(
        entry, tick, tick, running=False, queued=False, prefix="p",
        catchup_cap=10, default_grace=10.0, previous=previous,
    )  # fmt: skip
    return message_options(entry, result.publish[0])["headers"]  # type: ignore[no-any-return]


def test_tolerance_of_an_uneven_schedule_counts_from_the_previous_tick() -> None:
    # 17:00 follows 09:00 by 8 h but precedes the next 09:00 by 16 h: a run at 17:00,
    # eight hours after the last began, must not be dropped as too soon.
    headers = plan("0 9,17 * * *", DAY + timedelta(hours=17), DAY + timedelta(hours=9))
    assert headers[HEADER_MIN_GAP] == int(8 * 3600 * 0.9 * 1000)


def test_tolerance_of_the_last_refresh_in_the_half_hour_uses_its_own_gap() -> None:
    # H(0-29)/10 fires at :0x, :1x, :2x; the third one is followed by a 40-minute gap.
    headers = plan("0,10,20 * * * *", DAY + timedelta(minutes=20), DAY + timedelta(minutes=10))
    assert headers[HEADER_MIN_GAP] == int(600 * 0.9 * 1000)


def test_friday_run_of_a_weekday_schedule_is_not_dropped_after_thursday() -> None:
    friday = DAY + timedelta(days=4, hours=9)
    headers = plan("0 9 * * 1-5", friday, friday - timedelta(days=1))
    assert headers[HEADER_MIN_GAP] == int(86400 * 0.9 * 1000)


def test_a_run_published_before_its_entry_was_deleted_does_not_run_or_write(
    redis_url: str, redis_client: redis.Redis
) -> None:
    app = Celery("deleted", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    ran: list[str] = []

    @app.task(base=PeriodicTask, name="poll")
    def poll() -> None:
        ran.append("ran")

    api = periodiq(app)
    api.add("pop3-channel-7", "poll", every=60, owner="channel:7")
    api.delete_owner("channel:7")
    keys_before = sorted(redis_client.keys("*"))
    poll.apply(headers={HEADER_ENTRY: "pop3-channel-7", HEADER_TICK: to_ms(DAY)})
    assert ran == []
    assert sorted(redis_client.keys("*")) == keys_before


def test_a_plain_call_of_a_task_whose_entry_is_not_stored_runs_unguarded(
    redis_url: str, redis_client: redis.Redis
) -> None:
    app = Celery("unstored", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    ran: list[str] = []

    class Declared(PeriodicTask):  # type: ignore[misc]
        periodiq_entry = "declared-but-no-beat-yet"

    @app.task(base=Declared, name="declared")
    def declared() -> None:
        ran.append("ran")

    declared.apply()
    assert ran == ["ran"]
    assert redis_client.keys("*") == []
