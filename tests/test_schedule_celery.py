"""A Schedule is a Celery schedule: it works in a plain beat_schedule with Celery's own beat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery.schedules import BaseSchedule

from celery_periodiq import parse_schedule

ROOT = Path(__file__).resolve().parent.parent


def at(moment: datetime):  # type: ignore[no-untyped-def]
    return lambda: moment


def test_schedule_is_a_celery_base_schedule() -> None:
    assert isinstance(parse_schedule("*/5 * * * *"), BaseSchedule)


def test_is_due_when_a_fire_passed_since_the_last_run() -> None:
    schedule = parse_schedule("*/15 * * * *")
    schedule.nowfun = at(datetime(2026, 1, 1, 0, 15, 1, tzinfo=UTC))
    due, wait = schedule.is_due(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC))
    assert due is True
    assert wait == pytest.approx(14 * 60 + 59)  # until 00:30


def test_is_not_due_before_the_next_fire_and_says_how_long_to_wait() -> None:
    schedule = parse_schedule("*/15 * * * *")
    schedule.nowfun = at(datetime(2026, 1, 1, 0, 10, tzinfo=UTC))
    due, wait = schedule.is_due(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC))
    assert due is False
    assert wait == pytest.approx(5 * 60)


def test_remaining_estimate_is_the_time_to_the_next_fire() -> None:
    schedule = parse_schedule("0 9 * * *", tz="Europe/Berlin")
    schedule.nowfun = at(datetime(2026, 1, 1, 7, tzinfo=UTC))
    remaining = schedule.remaining_estimate(datetime(2026, 1, 1, 6, tzinfo=UTC))
    assert remaining == timedelta(hours=1)  # 09:00 CET is 08:00 UTC


def test_naive_last_run_is_read_as_utc() -> None:
    schedule = parse_schedule("0 * * * *")
    schedule.nowfun = at(datetime(2026, 1, 1, 1, 30, tzinfo=UTC))
    due, _ = schedule.is_due(datetime(2026, 1, 1, 0, 59))
    assert due is True


def test_event_schedule_is_never_due() -> None:
    schedule = parse_schedule("@reboot")
    schedule.nowfun = at(datetime(2026, 1, 1, tzinfo=UTC))
    due, wait = schedule.is_due(datetime(2025, 1, 1, tzinfo=UTC))
    assert due is False
    assert wait > 0


def _published(client: redis.Redis) -> list[str]:
    return [json.loads(raw)["headers"]["task"] for raw in client.lrange("celery", 0, -1)]


@pytest.mark.slow
def test_celery_default_beat_sends_tasks_on_our_schedules(redis_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "TEST_BROKER_URL": redis_url, "PYTHONPATH": str(ROOT / "tests" / "apps")}
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "plain_beat", "beat", "--loglevel=INFO",
         "-s", str(tmp_path / "beat-schedule"), "--max-interval=1"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and beat.poll() is None:
            names = _published(client)
            if names.count("plain_beat.tick") >= 3 and "plain_beat.cron_tick" in names:
                break
            time.sleep(0.1)
        names = _published(client)
    finally:
        beat.terminate()
        output = beat.communicate(timeout=20)[0].decode()
    assert names.count("plain_beat.tick") >= 3, output
    assert "plain_beat.cron_tick" in names, output
