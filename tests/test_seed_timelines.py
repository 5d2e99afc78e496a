"""Seed 000 (Nuntium): its four timelines, event by event, on an injected clock.

Task A has a one-minute interval (ticks at 00:30, 01:30, 02:30; tolerance 6 s,
timebox 30 s). "Cron enqueues" is a real claim/publish/ack by the beat's
Dispatcher into an in-memory broker; "begins" is the message run through the
real PeriodicTask guard (eagerly, in this process); both use real Lua against a
private Redis, with "now" injected instead of the Redis clock.

Nuntium's messages never expire, so task A is configured with expires=None; with
the default expiry ("auto": a run not started by the next tick is dropped) the
congested queue plays out differently, shown by the last test.

The seed's lastRun column shows, on its rows where A2 begins (timelines 1, 2
and 4), the last run A2 is checked against, not yet A2's own start; the text
says "last run time is set when the task starts". We assert both.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded

from celery_periodiq import PeriodicTask, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import to_ms

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(mmss: str) -> int:
    minutes, seconds = mmss.split(":")
    return to_ms(T0 + timedelta(minutes=int(minutes), seconds=int(seconds)))


class Clock:
    def __init__(self) -> None:
        self.now = at("00:00")

    def set(self, mmss: str) -> None:
        self.now = at(mmss)


class World:
    """Task A, a beat's dispatcher and an in-memory broker, all on one clock."""

    def __init__(self, redis_url: str, conf: dict[str, Any] | None = None, **policy: Any) -> None:
        """``conf``: more settings of the app; ``policy``: task A's entry's."""
        self.clock = Clock()
        self.app = Celery("seed", broker="memory://", set_as_current=False)
        self.app.conf.periodiq_redis_url = redis_url
        self.app.conf.update(conf or {})
        self.api = periodiq(self.app)
        self.store = self.api.store
        self.during: list[tuple[str, Callable[[], None]]] = []
        self.ending: tuple[str, str] = ("00:00", "ok")
        world = self

        class Guarded(PeriodicTask):  # type: ignore[misc]
            periodiq_clock = staticmethod(lambda: world.clock.now)

        @self.app.task(base=Guarded, name="A", bind=True, shared=False)
        def task_a(task: Any) -> None:
            for mmss, event in world.during:
                world.clock.set(mmss)
                event()
            mmss, how = world.ending
            world.clock.set(mmss)
            if how == "forced":
                raise SoftTimeLimitExceeded()

        self.task = task_a
        self.dispatcher = Dispatcher(self.app, self.store, "seed-beat")
        options = {"timebox": 30, "expires": None, **policy}
        entry = build_entry("A", "A", every=60, start_at=T0 + timedelta(seconds=30), **options)
        self.store.put("add", [entry], now_ms=self.clock.now)
        self.queue: list[Any] = []

    # events of the seed's tables

    def cron(self, mmss: str) -> int:
        """The beat runs at mmss; returns how many runs it enqueued."""
        self.clock.set(mmss)
        self.dispatcher.dispatch(now_ms=self.clock.now)
        with self.app.connection_for_read() as connection:
            simple = connection.SimpleQueue("celery")
            enqueued = 0
            while simple.qsize():
                self.queue.append(simple.get(timeout=1))
                enqueued += 1
            simple.close()
        return enqueued

    def begin(self, mmss: str, message: int, ends: tuple[str, str], during: list[Any] = ()) -> str:
        """The worker takes queued message ``message`` at mmss; returns the guard's verdict."""
        self.clock.set(mmss)
        self.during, self.ending = list(during), ends
        taken = self.queue[message]
        headers = taken.headers
        result = self.task.apply(
            task_id=headers["id"],
            headers={key: value for key, value in headers.items() if key.startswith("periodiq_")},
        )
        if result.state == "IGNORED":
            return self.history()[0]
        return "ran" if result.state in ("SUCCESS", "FAILURE") else result.state

    def next_run(self) -> str:
        return self._mmss(self.api.get("A").state["next"])

    def last_run(self) -> str | None:
        value = self.api.get("A").state.get("last_run")
        return None if value is None else self._mmss(value)

    def history(self) -> list[str]:
        return [event.kind for event in self.api.history("A", limit=50)]

    @staticmethod
    def _mmss(ms: str | int) -> str:
        seconds = (int(ms) - at("00:00")) // 1000
        return f"{seconds // 60:02}:{seconds % 60:02}"


@pytest.fixture
def world(redis_url: str, redis_client: redis.Redis) -> World:
    return World(redis_url)


def test_standard_flow(world: World) -> None:
    assert (world.next_run(), world.last_run()) == ("00:30", None)  # 00:00 initial state
    assert world.cron("00:30") == 1  # Cron enqueues A1
    assert (world.next_run(), world.last_run()) == ("01:30", None)
    assert world.begin("00:35", 0, ends=("00:45", "ok")) == "ran"  # A1 begins, ends 00:45
    assert (world.next_run(), world.last_run()) == ("01:30", "00:35")
    assert world.cron("01:00") == 0  # Cron executes: nothing due
    assert (world.next_run(), world.last_run()) == ("01:30", "00:35")
    assert world.cron("01:30") == 1  # Cron enqueues A2
    assert (world.next_run(), world.last_run()) == ("02:30", "00:35")
    # 01:32 A2 begins: 57 s after 00:35 is within interval - tolerance (54 s), so it runs
    assert world.begin("01:32", 1, ends=("01:33", "ok")) == "ran"
    assert (world.next_run(), world.last_run()) == ("02:30", "01:32")


def test_congested_queue(world: World) -> None:
    assert world.cron("00:30") == 1  # Cron enqueues A1
    assert world.cron("01:00") == 0
    assert world.cron("01:30") == 1  # Cron enqueues A2 while A1 still waits
    assert (world.next_run(), world.last_run()) == ("02:30", None)
    assert world.begin("01:35", 0, ends=("01:38", "ok")) == "ran"  # A1 begins, ends 01:38
    assert (world.next_run(), world.last_run()) == ("02:30", "01:35")
    assert world.cron("02:00") == 0
    assert world.cron("02:30") == 1  # Cron enqueues A3
    assert (world.next_run(), world.last_run()) == ("03:30", "01:35")
    # 02:37 A2 begins: 62 s after A1 began, so it runs
    assert world.begin("02:37", 1, ends=("02:38", "ok")) == "ran"
    assert (world.next_run(), world.last_run()) == ("03:30", "02:37")


def test_second_run_dropped_when_the_first_started_late(world: World) -> None:
    assert world.cron("00:30") == 1
    assert world.cron("01:00") == 0
    assert world.cron("01:30") == 1
    assert world.begin("01:35", 0, ends=("01:38", "ok")) == "ran"  # A1 begins late
    assert world.cron("02:00") == 0
    # 02:03 A2 is dropped: 28 s after A1 began is less than interval - tolerance
    assert world.begin("02:03", 1, ends=("02:03", "ok")) == "dropped_too_soon"
    assert (world.next_run(), world.last_run()) == ("02:30", "01:35")
    assert world.cron("02:30") == 1  # Cron enqueues A3
    assert (world.next_run(), world.last_run()) == ("03:30", "01:35")
    assert world.begin("02:56", 2, ends=("02:57", "ok")) == "ran"  # A3 executes
    assert (world.next_run(), world.last_run()) == ("03:30", "02:56")
    assert world.api.get("A").counters["dropped_too_soon"] == 1


def test_first_run_forced_to_end_does_not_delay_the_second(world: World) -> None:
    assert world.cron("00:30") == 1
    during = [("01:00", lambda: world.cron("01:00"))]  # Cron executes while A1 runs
    # A1 begins 00:35 and is forced to end at 01:05, its timebox of interval / 2
    assert world.begin("00:35", 0, ends=("01:05", "forced"), during=during) == "ran"
    assert (world.next_run(), world.last_run()) == ("01:30", "00:35")
    assert world.history()[0] == "timeboxed"
    assert world.cron("01:30") == 1  # Cron enqueues A2
    assert world.begin("01:32", 1, ends=("01:33", "ok")) == "ran"  # A2 begins on time
    assert (world.next_run(), world.last_run()) == ("02:30", "01:32")


def test_messages_carry_the_seed_policy(world: World) -> None:
    world.cron("00:30")
    headers = world.queue[0].headers
    assert headers["periodiq_tick"] == at("00:30")
    assert headers["periodiq_interval"] == 60.0
    assert headers["periodiq_min_gap"] == 54_000  # interval - 10% tolerance
    assert headers["timelimit"][1] == 30  # soft limit: the timebox


def test_with_the_default_expiry_a_run_waiting_past_the_next_tick_is_dropped(
    redis_url: str, redis_client: redis.Redis
) -> None:
    world = World(redis_url, expires="auto")
    assert world.cron("00:30") == 1  # Cron enqueues A1, to be started by 01:30
    assert world.cron("01:30") == 1  # Cron enqueues A2
    assert world.begin("01:35", 0, ends=("01:38", "ok")) == "expired"  # A1 waited too long
    assert world.begin("01:36", 1, ends=("01:38", "ok")) == "ran"  # A2 runs instead
    assert world.api.get("A").counters["expired"] == 1
