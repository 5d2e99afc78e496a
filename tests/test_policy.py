"""Run policy is decided in one place (policy.py); every caller gets the same numbers.

The drifted cases that existed before it are regression tests here: a plain
``.delay()`` ignoring ``periodiq_default_overlap``, manual runs ignoring
``periodiq_default_grace``, and ``show`` computing limits its own way.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.beat.publish import message_options
from celery_periodiq.model import policy
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import plan_tick
from celery_periodiq.model.policy import Defaults
from celery_periodiq.present.shapes import effective
from celery_periodiq.protocol.headers import HEADER_MIN_GAP, HEADER_TTL

TASK = "proj.tasks.report"
MONDAY = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("options", "interval", "tolerance", "timebox"),
    [
        ({}, 600.0, 60.0, 300.0),  # auto: 10% and 50% of the interval
        ({"tolerance": 5, "timebox": 100}, 600.0, 5.0, 100.0),
        ({"timebox": None}, 600.0, 60.0, None),
    ],
)
def test_policy_numbers_follow_the_interval_unless_given(
    options: dict[str, Any], interval: float, tolerance: float, timebox: float | None
) -> None:
    entry = build_entry("n", TASK, every=600, **options)

    assert (policy.tolerance(entry, interval), policy.timebox(entry, interval)) == (
        tolerance,
        timebox,
    )


@pytest.mark.parametrize(
    ("options", "timebox", "time_limit"),
    [
        ({}, None, None),  # auto: the task keeps its own limits
        ({"timebox": 100}, 100.0, 110.0),  # what the entry asks for, and a grace
        ({"timebox": None}, None, None),
    ],
)
def test_a_plain_tasks_runs_are_timeboxed_only_when_its_entry_sets_a_timebox(
    options: dict[str, Any], timebox: float | None, time_limit: float | None
) -> None:
    entry = build_entry("n", TASK, every=600, **options)
    plan = plan_tick(
        entry, MONDAY, MONDAY, running=False, queued=False, prefix="p",
        catchup_cap=10, default_grace=10.0, plain=True,
    )  # fmt: skip
    (tick,) = plan.publish

    assert (tick.soft_time_limit, tick.time_limit) == (timebox, time_limit)
    options_sent = message_options(entry, tick)
    assert (options_sent.get("soft_time_limit"), options_sent.get("time_limit")) == (
        timebox,
        time_limit,
    )
    # its running marker lives as long as its hard limit, else two intervals
    assert options_sent["headers"][HEADER_TTL] == (time_limit or 1200) * 1000


@pytest.mark.parametrize(
    ("grace", "timebox", "default_grace", "expected"),
    [
        (None, 30.0, 10.0, 6.0),  # 20% of the timebox
        (None, 1800.0, 10.0, 10.0),  # capped by the setting
        (None, 2.0, 10.0, 1.0),  # at least a second
        (2.5, 1800.0, 10.0, 2.5),  # the entry's own grace
    ],
)
def test_grace_is_a_fifth_of_the_timebox_between_one_second_and_the_setting(
    grace: float | None, timebox: float, default_grace: float, expected: float
) -> None:
    entry = build_entry("n", TASK, cron="@daily", grace=grace)

    assert policy.grace(entry, timebox, default_grace) == expected


def test_marker_ttl_is_the_hard_limit_else_two_intervals_else_an_hour() -> None:
    assert policy.marker_ttl(12.5, 60.0) == 12.5
    assert policy.marker_ttl(None, 60.0) == 120.0
    assert policy.marker_ttl(None, None) == 3600.0


def test_interval_at_an_instant_is_the_gap_between_the_next_two_fires() -> None:
    entry = build_entry("n", TASK, cron="0 9,17 * * *")
    schedule = entry.parsed_schedule()

    assert policy.interval_at(schedule, MONDAY + timedelta(hours=10)) == 16 * 3600
    assert policy.interval_at(schedule, MONDAY + timedelta(hours=18)) == 8 * 3600


def test_defaults_fill_only_what_an_entry_leaves_unset() -> None:
    defaults = Defaults(overlap="allow", catchup="all")

    assert build_entry("n", TASK, every=60, defaults=defaults).overlap == "allow"
    assert build_entry("n", TASK, every=60, defaults=defaults).catchup == "all"
    assert build_entry("n", TASK, every=60, overlap="skip", defaults=defaults).overlap == "skip"
    assert build_entry("n", TASK, every=60).overlap == policy.DEFAULT_OVERLAP


def test_beat_ticks_and_show_give_the_same_limits_for_one_tick() -> None:
    entry = build_entry("n", TASK, cron="0 9,17 * * *", timebox="auto")
    nine = MONDAY + timedelta(hours=9)
    plan = plan_tick(
        entry, nine, nine, running=False, queued=False, prefix="p",
        catchup_cap=10, default_grace=3.0,
    )  # fmt: skip
    (tick,) = plan.publish

    shown = effective(entry, nine - timedelta(minutes=1), 3.0)

    assert (shown["interval"], shown["timebox"], shown["time_limit"]) == (
        tick.interval,
        tick.soft_time_limit,
        tick.time_limit,
    )
    headers = message_options(entry, tick)["headers"]
    assert headers[HEADER_TTL] == int(tick.time_limit * 1000)  # type: ignore[operator]
    assert headers[HEADER_MIN_GAP] == policy.min_gap_ms(entry, tick.gap_before)


def _messages(broker: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in broker.lrange("celery", 0, -1)]


def test_a_manual_run_gets_the_grace_of_periodiq_default_grace(
    redis_url: str, broker_url: str
) -> None:
    # Manual runs used a grace of 10 s written into publish.py, whatever the setting said.
    app = Celery("grace-app", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_default_grace = 2.0
    api = periodiq(app)
    api.add("hourly", TASK, every=3600)

    api.trigger("hourly")

    broker = redis.Redis.from_url(broker_url)
    (message,) = _messages(broker)
    soft, hard = message["headers"]["timelimit"][1], message["headers"]["timelimit"][0]
    assert (soft, hard) == (1800.0, 1802.0)
    assert message["headers"][HEADER_TTL] == 1802 * 1000
    broker.close()
    api.store.client.close()


def test_manual_and_backfilled_runs_of_a_plain_task_keep_the_tasks_own_limits(
    redis_url: str, broker_url: str
) -> None:
    # They were timeboxed to half the interval like a PeriodicTask's, whatever the task said.
    app = Celery("plain-limits-app", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url

    def noop() -> None:  # pragma: no cover - never runs
        pass

    app.task(name="plain", time_limit=7200, shared=False)(noop)
    app.task(name="guarded", base=PeriodicTask, shared=False)(noop)
    api = periodiq(app)
    for name in ("plain", "guarded"):
        api.add(name, name, every=3600)
    api.add("boxed", "plain", every=3600, timebox=60)
    hour = datetime.fromtimestamp(api.store.now_ms() // 3_600_000 * 3600, UTC)

    for name in ("plain", "guarded", "boxed"):
        api.trigger(name)
        api.backfill(name, hour - timedelta(hours=1), hour, overlap="allow")

    broker = redis.Redis.from_url(broker_url)
    limits: dict[str, list[Any]] = {}
    for message in _messages(broker):
        headers = message["headers"]
        limits.setdefault(headers["periodiq_entry"], []).append(headers["timelimit"])
    assert limits == {
        "plain": [[7200, None]] * 2,  # the task's own (send_task puts them on the message)
        "guarded": [[1810.0, 1800.0]] * 2,
        "boxed": [[70.0, 60.0]] * 2,
    }
    broker.close()
    api.store.client.close()


def test_a_plain_delay_follows_periodiq_default_overlap(redis_url: str) -> None:
    # A declared task called with .delay() used overlap "skip" whatever the app's default.
    app = Celery("overlap-app", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_default_overlap = "allow"
    ran: list[str] = []

    class Declared(PeriodicTask):  # type: ignore[misc]
        periodiq_entry = "sync"

    @app.task(base=Declared, name="sync")
    def sync() -> None:
        ran.append("ran")

    api = periodiq(app)
    api.add("sync", "sync", every=60)
    part = api.store.keys.of("sync")  # another run is unfinished, as begin.lua marks it
    state = json.loads(api.store.client.hget(part.state, "sync"))
    state["running"] = ["another-run", api.store.now_ms() + 60_000]
    api.store.client.hset(part.state, "sync", json.dumps(state))

    sync.apply()

    assert ran == ["ran"]  # "allow": an unfinished run does not hold this one back
    assert api.get("sync").counters.get("skipped_overlap") is None
    api.store.client.close()


def test_the_header_ttl_of_a_manual_run_without_limits_is_two_intervals(
    redis_url: str, broker_url: str
) -> None:
    app = Celery("ttl-app", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    api.add("untimed", TASK, every=30, timebox=None)

    api.trigger("untimed")

    broker = redis.Redis.from_url(broker_url)
    (message,) = _messages(broker)
    assert message["headers"][HEADER_TTL] == 60_000
    assert message["headers"]["timelimit"] == [None, None]
    broker.close()
    api.store.client.close()
