"""No host's clock decides (DESIGN.md invariant 21): a beat and a worker whose wall
clocks are minutes off run every tick, once, on a Redis broker and on RabbitMQ.

The hosts' clocks are made wrong with libfaketime (``faketime -f +300s``); their
monotonic clocks stay real, as on a host whose NTP is off. Redis and the test keep the
true time, so the ticks (on the Redis clock) are the test's instants too.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_periodiq import Periodiq
from tests.processes import Cluster, cluster, wait_for
from tests.test_publish_failures import RABBITMQ, _rabbitmq

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("faketime") is None, reason="faketime is not installed (make tools)"
    ),
]

ENTRIES = {"plain": "record", "guarded": "guarded_record"}
"""Entry name -> its task: a plain ``@app.task`` and a ``PeriodicTask``."""
OUTCOMES = ("started", "expired", "dropped_too_soon", "duplicate")
"""What the worker's guard records of a message it consumed."""
INTERVAL = 2
EXPIRES = 3
"""Seconds after its tick a run may still start."""
WINDOW = 10
"""Ticks of each entry counted, once the worker has worked off what waited for it."""


FAKED = {"FAKETIME_DONT_FAKE_MONOTONIC": "1"}
"""With ``faketime(offset)``: the host's wall clock is off, its monotonic clock real (as
on a host whose NTP is off; libfaketime would otherwise shift timed waits too)."""


def faketime(offset: str) -> list[str]:
    """The prefix that runs a process on a host whose wall clock is ``offset`` off."""
    return ["faketime", "-f", offset]


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request: pytest.FixtureRequest, broker_url: str) -> Iterator[tuple[str, str]]:
    """The broker's URL and a queue of this test's own (RabbitMQ is shared: the queue is
    deleted afterwards)."""
    queue = f"periodiq-skew-{uuid.uuid4().hex}"
    if request.param == "redis":
        yield broker_url, queue
        return
    connection = _rabbitmq()
    try:
        yield RABBITMQ, queue
    finally:
        with connection.channel() as channel:
            channel.queue_delete(queue)
        connection.release()


def counters(api: Periodiq, name: str) -> dict[str, int]:
    state = api.get(name).state
    return {key[2:]: int(value) for key, value in state.items() if key.startswith("n:")}


def ran(running: Cluster, name: str, first_ms: int) -> list[int]:
    """The ticks of ``name`` that ran, from ``first_ms`` on (distinct, in order)."""
    return sorted({run["tick"] for run in running.runs_of(name) if run["tick"] >= first_ms})


@pytest.mark.parametrize(("beat_off", "worker_off"), [("+300s", "-300s"), ("-300s", "+300s")])
def test_a_beat_and_a_worker_whose_clocks_are_five_minutes_off_run_every_tick_once(
    tmp_path: Path, redis_url: str, broker: tuple[str, str], beat_off: str, worker_off: str
) -> None:
    broker_url, queue = broker
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = running.api()
        running.beat("beat", prefix=faketime(beat_off), **FAKED)
        wait_for(api.beats, 60, "the beat to register")
        for name, task in ENTRIES.items():
            # (runs that a loaded machine delays, so that they start late, too soon after
            # the one before or while it runs, are not what this test is about)
            api.add(name, task, every=INTERVAL, expires=EXPIRES, tolerance=INTERVAL - 0.1,
                    overlap="allow", options={"queue": queue})  # fmt: skip
        # the first ticks, sent before any worker consumes them, wait past their expiry
        wait_for(lambda: all(counters(api, n).get("enqueued", 0) >= 3 for n in ENTRIES),
                 30, "ticks of each entry sent")  # fmt: skip
        node = f"skewed-{uuid.uuid4().hex[:8]}"  # RabbitMQ is shared: a name of its own
        # prefork, Celery's default: with both cores busy, a threads worker under
        # libfaketime stalled for seconds at a time (its ticks expired meanwhile)
        worker = running.worker(
            node, "-Q", queue, pool="prefork", prefix=faketime(worker_off), **FAKED
        )
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        # counted from when the worker has run each entry and worked off the backlog (a
        # worker warming up on a loaded machine runs a burst late, and the guard then
        # drops on-time runs as too soon: not what this test is about)
        wait_for(lambda: all(ran(running, n, 0) for n in ENTRIES), 60, "a run of each entry")
        first_ms = int((time.time() + INTERVAL) * 1000)
        last_ms = first_ms + WINDOW * INTERVAL * 1000

        def counted() -> bool:
            done = all(len(ran(running, n, first_ms)) >= WINDOW for n in ENTRIES)
            return done or time.time() * 1000 > last_ms + 5000

        wait_for(counted, WINDOW * INTERVAL + 30, f"{WINDOW} ticks of each entry to run")
        window = {n: [t for t in ran(running, n, first_ms) if t < last_ms] for n in ENTRIES}
        running.processes[0].stop()  # the beat: what it sent is then all in the queue

        def settled() -> bool:
            counts = [counters(api, n) for n in ENTRIES]
            return all(sum(c.get(o, 0) for o in OUTCOMES) >= c["enqueued"] for c in counts)

        stopped = time.monotonic()
        wait_for(lambda: settled() or time.monotonic() > stopped + 10, 20, "the outcomes")
        counts = {n: counters(api, n) for n in ENTRIES}
        twice = running.twice()
        logs = running.logs()
    for name in ENTRIES:
        seen = f"{name}: ran {window[name]} from {first_ms}, counters {counts[name]}\n{logs}"
        # at least 90 % of the ticks due in the window ran, and none twice
        assert len(window[name]) >= WINDOW * 0.9, seen
        # the ticks that waited for the worker past their expiry are recorded as expired,
        # and every message sent reached the worker: each has an outcome (a tick sent as
        # the beat was stopped may have no "enqueued" counted)
        assert counts[name].get("expired", 0) >= 1, seen
        outcomes = sum(counts[name].get(outcome, 0) for outcome in OUTCOMES)
        assert outcomes >= counts[name]["enqueued"], seen
    assert twice == [], logs
    assert "Discarding revoked task" not in logs
