"""A run the guard drops ends visibly: after ``task-started`` a real worker (prefork,
``-E``) sends ``task-revoked`` with the reason, and the result backend holds REVOKED;
a run that is not dropped, and a dropped copy of a tick that ran, are unchanged."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import TaskRevokedError

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.protocol.headers import (
    HEADER_ENTRY,
    HEADER_EXPIRES,
    HEADER_MIN_GAP,
    HEADER_TICK,
)
from tests.processes import Celery as CeleryProcess
from tests.processes import Cluster, cluster, wait_for

pytestmark = pytest.mark.slow

FINAL = ("task-succeeded", "task-failed", "task-revoked", "task-rejected")


class Events:
    """A real event receiver (``app.events.Receiver``) capturing in a thread, with the
    cluster state Flower keeps (``app.events.State``)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.seen: list[dict[str, Any]] = []
        self.state = app.events.State()
        self.connection = app.connection_for_read()
        self.receiver = app.events.Receiver(self.connection, handlers={"*": self.on_event})
        self.thread = threading.Thread(target=self.capture, daemon=True)
        self.thread.start()

    def on_event(self, event: dict[str, Any]) -> None:
        self.seen.append(event)
        self.state.event(event)

    def capture(self) -> None:
        self.receiver.capture(limit=None, timeout=None, wakeup=True)

    def of(self, task_id: str) -> list[dict[str, Any]]:
        """The task events of ``task_id``, in the order received."""
        return [event for event in list(self.seen) if event.get("uuid") == task_id]

    def types(self, task_id: str) -> list[str]:
        return [event["type"] for event in self.of(task_id)]

    def listening(self) -> bool:
        return any(event["type"].startswith("worker-") for event in list(self.seen))

    def close(self) -> None:
        self.receiver.should_stop = True
        self.thread.join(10)
        self.connection.release()


class World:
    """A worker of ``tests/apps/dropped_app.py`` with events on, a receiver, and a
    client app on the same broker, schedule and result backend."""

    def __init__(self, running: Cluster, app: Celery, events: Events) -> None:
        self.running = running
        self.app = app
        self.api: Periodiq = periodiq(app)
        self.events = events

    def send(self, task: str, task_id: str, *args: Any, **headers: Any) -> None:
        self.app.send_task(task, args=list(args), task_id=task_id, headers=headers)

    def tick(self, entry: str, tick_ms: int, **headers: Any) -> dict[str, Any]:
        return {HEADER_ENTRY: entry, HEADER_TICK: tick_ms, **headers}

    def ended(self, task_id: str) -> list[str]:
        """Waits for a final task event of ``task_id``; its events' types."""
        try:
            wait_for(lambda: any(kind in FINAL for kind in self.events.types(task_id)), 30, task_id)
        except AssertionError as timeout:
            seen = self.events.types(task_id)
            raise AssertionError(f"{timeout}: a final event, after {seen}") from None
        return self.events.types(task_id)

    def meta(self, task_id: str) -> dict[str, Any]:
        return self.app.backend.get_task_meta(task_id, cache=False)  # type: ignore[no-any-return]


@pytest.fixture
def world(tmp_path: Path, redis_url: str, broker_url: str) -> Iterator[World]:
    with (
        LocalRedis(tmp_path / "results") as results,
        cluster(
            tmp_path, redis_url, broker_url, app="dropped_app", TEST_RESULT_URL=results.url
        ) as running,
    ):
        app = Celery("dropped_app", broker=broker_url, backend=results.url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_url
        events = Events(app)
        try:
            worker = running.worker("worker", "-E", pool="prefork")
            wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
            wait_for(events.listening, 30, "the receiver to hear the worker")
            yield World(running, app, events)
        finally:
            events.close()
            app.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def assert_revoked(world: World, task_id: str, reason: str, expired: bool = False) -> None:
    """``task_id`` got task-started, then task-revoked with ``reason``; the backend
    holds REVOKED with it; Flower's state (``events.State``) is REVOKED."""
    kinds = world.ended(task_id)
    assert kinds[kinds.index("task-started") + 1 :] == ["task-revoked"], kinds
    revoked = world.events.of(task_id)[-1]
    assert revoked["expired"] is expired
    assert revoked["terminated"] is False
    assert reason in revoked["reason"]
    assert world.events.state.tasks[task_id].state == "REVOKED"
    meta = wait_for(
        lambda: (m := world.meta(task_id))["status"] == "REVOKED" and m, 10, "REVOKED stored"
    )
    assert isinstance(meta["result"], TaskRevokedError)
    assert reason in str(meta["result"])


def test_a_run_dropped_as_too_soon_ends_revoked_with_its_reason(world: World) -> None:
    world.api.add("work", "work", cron="@yearly")
    tick = now_ms()
    world.send("work", "on-time", **world.tick("work", tick))
    assert world.ended("on-time")[-1] == "task-succeeded"
    world.send("work", "too-soon", **world.tick("work", tick + 1000, **{HEADER_MIN_GAP: 60_000}))
    assert_revoked(world, "too-soon", "periodiq dropped_too_soon: last run began")
    counters = world.api.get("work").counters
    assert counters["dropped_too_soon"] == 1  # recorded once, as before
    assert [e.kind for e in world.api.history("work") if e.task_id == "too-soon"] == [
        "dropped_too_soon"
    ]


def test_a_run_skipped_while_an_earlier_one_runs_ends_revoked(world: World) -> None:
    world.api.add("work", "work", cron="@yearly")
    tick = now_ms()
    world.send("work", "long", 4, **world.tick("work", tick))
    wait_for(lambda: "task-started" in world.events.types("long"), 20, "the long run to start")
    world.send("work", "overlapping", **world.tick("work", tick + 1000))
    assert_revoked(world, "overlapping", "periodiq skipped_overlap: run long is unfinished")
    assert world.ended("long")[-1] == "task-succeeded"  # the run it waited for is its own
    assert world.meta("long")["status"] == "SUCCESS"


def test_a_run_whose_tick_expired_ends_revoked_as_expired(world: World) -> None:
    world.api.add("work", "work", cron="@yearly")
    tick = now_ms() - 120_000
    world.send("work", "stale", **world.tick("work", tick, **{HEADER_EXPIRES: tick + 60_000}))
    assert_revoked(world, "stale", "periodiq expired: waited past its expiry", expired=True)
    assert world.api.get("work").counters["expired"] == 1


def test_a_plain_task_s_expired_run_ends_revoked_too(world: World) -> None:
    world.api.add("plain", "plain", cron="@yearly")
    tick = now_ms() - 120_000
    world.send("plain", "stale-plain", **world.tick("plain", tick, **{HEADER_EXPIRES: tick + 1}))
    assert_revoked(world, "stale-plain", "periodiq expired", expired=True)


def test_a_run_of_a_deleted_entry_ends_revoked(world: World) -> None:
    world.api.add("work", "work", cron="@yearly")
    world.api.delete("work")
    world.send("work", "orphan", **world.tick("work", now_ms()))
    assert_revoked(world, "orphan", "periodiq deleted")


def test_a_dropped_run_of_a_task_that_ignores_results_stores_nothing(world: World) -> None:
    world.api.add("quiet", "quiet", cron="@yearly")
    tick = now_ms() - 120_000
    world.send("quiet", "quiet-stale", **world.tick("quiet", tick, **{HEADER_EXPIRES: tick + 1}))
    kinds = world.ended("quiet-stale")
    assert kinds[kinds.index("task-started") + 1 :] == ["task-revoked"]
    assert world.meta("quiet-stale")["status"] == "PENDING"  # task_ignore_result respected


def test_a_dropped_run_with_acks_late_is_acknowledged_once_and_not_run(world: World) -> None:
    world.api.add("late", "late", cron="@yearly")
    tick = now_ms() - 120_000
    world.send("late", "late-stale", **world.tick("late", tick, **{HEADER_EXPIRES: tick + 1}))
    assert_revoked(world, "late-stale", "periodiq expired", expired=True)
    broker = world.running.env["TEST_BROKER_URL"]
    client = Celery(broker=broker, set_as_current=False)
    try:
        with client.connection_for_read() as connection:
            channel = connection.default_channel
            wait_for(lambda: not channel.client.hlen("unacked"), 10, "the message acknowledged")
            assert channel.client.llen("celery") == 0  # not requeued
    finally:
        client.close()
    assert "task-rejected" not in world.events.types("late-stale")
    assert world.api.get("late").state.get("last_status") is None  # it never ran


def test_a_run_not_dropped_ends_as_before(world: World) -> None:
    world.api.add("work", "work", cron="@yearly")
    world.send("work", "runs", **world.tick("work", now_ms()))
    kinds = world.ended("runs")
    assert kinds[kinds.index("task-started") + 1 :] == ["task-succeeded"]
    assert world.meta("runs")["status"] == "SUCCESS"
    assert world.meta("runs")["result"] == "done"


def test_a_dropped_copy_of_a_tick_that_ran_leaves_the_run_s_state_alone(world: World) -> None:
    """A duplicate has the task id of the run that began: the copy reports nothing, so
    monitors and the backend keep that run's own SUCCESS (it passes on main too: it
    keeps the revoked end of the other drops from reaching a duplicate)."""
    world.api.add("work", "work", cron="@yearly")
    tick = now_ms()
    world.send("work", "the-tick", **world.tick("work", tick))
    assert world.ended("the-tick")[-1] == "task-succeeded"
    world.send("work", "the-tick", **world.tick("work", tick))
    wait_for(lambda: world.api.get("work").counters.get("duplicate"), 20, "the copy dropped")
    world.send("work", "after", **world.tick("work", tick + 3_600_000))
    world.ended("after")  # the worker handled the copy before it (concurrency aside)
    assert "task-revoked" not in world.events.types("the-tick")
    assert world.events.types("the-tick").count("task-started") == 2
    assert world.events.state.tasks["the-tick"].state == "SUCCESS"
    assert world.meta("the-tick")["status"] == "SUCCESS"


def test_flower_shows_a_dropped_run_revoked_not_started(world: World, tmp_path: Path) -> None:
    if importlib.util.find_spec("flower") is None:
        reason = "flower is not installed (pip install 'celery-periodiq[dev]')"
        print(reason)
        pytest.skip(reason)
    port = free_port()
    flower = CeleryProcess(
        ["-A", "dropped_app", "flower", f"--port={port}", "--address=127.0.0.1"],
        {**world.running.env, "FLOWER_UNAUTHENTICATED_API": "true"},
        tmp_path / "flower.log",
    )
    world.running.processes.append(flower.start())
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: get(f"{base}/healthcheck") == "OK", 60, "Flower to answer")
    sent: list[str] = []

    def flower_lists_a_run() -> bool:  # then it hears the worker: unguarded runs until then
        sent.append(f"warmup-{len(sent)}")
        world.app.send_task("plain", task_id=sent[-1])
        listed = json.loads(get(f"{base}/api/tasks") or "{}")
        return any(listed.get(task_id, {}).get("state") == "SUCCESS" for task_id in sent)

    wait_for(flower_lists_a_run, 60, "Flower to list a run", interval=1.0)
    world.api.add("work", "work", cron="@yearly")
    tick = now_ms()
    world.send("work", "on-time", **world.tick("work", tick))
    wait_for(lambda: flower_state(base, "on-time") == "SUCCESS", 30, "Flower: on-time SUCCESS")
    world.send("work", "too-soon", **world.tick("work", tick + 1000, **{HEADER_MIN_GAP: 60_000}))
    try:
        state = wait_for(
            lambda: (
                flower_state(base, "too-soon") not in (None, "RECEIVED", "STARTED")
                and flower_task(base, "too-soon")
            ),
            30,
            "Flower to show too-soon ended",
        )
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}: it shows {flower_state(base, 'too-soon')}") from None
    assert state["state"] == "REVOKED"
    assert state["started"] is not None  # it saw the run start, then end


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()  # type: ignore[no-any-return]
    except OSError:  # not up yet, or 404: Flower does not know the task
        return None


def flower_task(base: str, task_id: str) -> dict[str, Any] | None:
    body = get(f"{base}/api/task/info/{task_id}")
    return json.loads(body) if body else None  # type: ignore[no-any-return]


def flower_state(base: str, task_id: str) -> str | None:
    task = flower_task(base, task_id)
    return None if task is None else task.get("state")


def test_a_task_s_own_request_class_is_kept_and_ends_a_drop_revoked(world: World) -> None:
    world.api.add("custom", "custom", cron="@yearly")
    tick = now_ms() - 120_000
    world.send("custom", "ran", **world.tick("custom", now_ms()))
    assert world.ended("ran")[-1] == "task-succeeded"
    world.send("custom", "stale-custom", **world.tick("custom", tick, **{HEADER_EXPIRES: tick + 1}))
    assert_revoked(world, "stale-custom", "periodiq expired", expired=True)
    assert world.running.client.lrange("accepted", 0, -1) == ["ran", "stale-custom"]
