"""A beat alive but cut off from its broker: the others take its ticks over.

Two beats and a worker, ten entries every second. One beat reaches the schedule's
Redis as before, but its broker connections are refused, or answered by nothing at
all (a partition with no reset), or its broker takes its next publish and answers
nothing more (what it sent arrived and runs once: the ticks taken over are planned
afresh, and a late one is folded into the next run, or dropped as a duplicate by the
worker). The broker is a Redis, or RabbitMQ: its messages then go out encoded by
amqp_publish.py, and a flush waits for the broker's answer. The beat must stop
claiming and hand what it holds to the other beat at once, say so once, and rejoin
when its broker answers again; when every beat loses the broker, the claims wait in
flight until it returns.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq.localredis import LocalRedis
from tests.processes import Celery, Cluster, cluster, wait_for
from tests.proxy import Proxy
from tests.test_faults import let_pass, tally
from tests.test_publish_failures import RABBITMQ, _rabbitmq

pytestmark = pytest.mark.slow

LEASE = 2.0
NAMES = [f"cut-{index}" for index in range(10)]
WINDOW = 10.0
"""Seconds of ticks counted, from two leases after the cut."""


@dataclass(frozen=True)
class _Broker:
    port: int
    url: str
    in_front: str
    """The URL of a port in front of it, to format with that port."""
    publish: bytes
    """What a publish carries on the wire (kombu's LPUSH; AMQP's Basic.Publish method)."""
    task_id: bytes
    """A pattern whose group is a published message's task id, as it reads on the wire."""
    settings: dict[str, str]
    """The processes' (a queue of the test's own on the shared RabbitMQ)."""


@contextmanager
def _broker(kind: str, tmp_path: Path) -> Iterator[_Broker]:
    """A private Redis, or the shared RabbitMQ with a queue of the test's own (deleted
    after)."""
    if kind == "redis":
        with LocalRedis(tmp_path / "broker") as redis_broker:
            yield _Broker(redis_broker.port, redis_broker.url, "redis://127.0.0.1:{}/0",
                          b"LPUSH", rb'"id": "([0-9a-f-]{36})"', {})  # fmt: skip
        return
    connection = _rabbitmq()
    queue = f"periodiq-cut-{uuid.uuid4().hex}"
    settings = {"TEST_CONF": json.dumps({"task_default_queue": queue})}
    try:
        yield _Broker(5672, RABBITMQ, "amqp://guest:guest@127.0.0.1:{}//",
                      b"\x00\x3c\x00\x28", rb"\x02idS\x00\x00\x00\x24([0-9a-f-]{36})",
                      settings)  # fmt: skip
    finally:
        with connection.channel() as channel:
            channel.queue_delete(queue)
        connection.release()


def _started(running: Cluster, proxy_url: str) -> tuple[Celery, Celery]:
    api = running.api()
    for name in NAMES:
        api.add(name, "record", every=1)
    worker = running.worker()
    cut_off = running.beat("beat-cut", TEST_BROKER_URL=proxy_url)
    other = running.beat("beat-other")
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    wait_for(
        lambda: all(" ready; " in beat.output() for beat in (cut_off, other)), 60, "both beats"
    )
    wait_for(lambda: all(running.runs_of(name) for name in NAMES), 30, "a run of each entry")
    return cut_off, other


def _beats(running: Cluster) -> list[dict[str, Any]]:
    listed = running.cli("beats", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def _ran_own(runs: list[dict[str, object]], start_ms: float, end_ms: float) -> Counter[str]:
    """Per entry, the ticks in ``[start_ms, end_ms)`` that a run of their own began for."""
    ran: Counter[str] = Counter()
    seen: set[tuple[object, object]] = set()
    for run in runs:
        tick = run["tick"]
        key = (run["entry"], tick)
        if run["entry"] in NAMES and isinstance(tick, int) and start_ms <= tick < end_ms:
            ran[str(run["entry"])] += key not in seen
            seen.add(key)
    return ran


@pytest.mark.parametrize("fault", ["refused", "hung", "replies-lost"])
@pytest.mark.parametrize("kind", ["redis", "rabbitmq"])
def test_a_beat_cut_off_from_its_broker_hands_its_ticks_to_the_other_beat_and_rejoins(
    tmp_path: Path, redis_url: str, fault: str, kind: str
) -> None:
    with (
        _broker(kind, tmp_path) as broker,
        Proxy(broker.port) as proxy,
        cluster(tmp_path, redis_url, broker.url, lease=LEASE, **broker.settings) as running,
    ):
        cut_off, _ = _started(running, broker.in_front.format(proxy.port))
        cut = time.time()
        if fault == "refused":
            proxy.refuse()
        elif fault == "hung":
            proxy.blackhole()
        else:  # the next publish arrives, and nothing more is heard from the broker
            proxy.drop_replies_after(broker.publish)
        let_pass(2 * LEASE + WINDOW + 1.5)
        start_ms, end_ms = (cut + 2 * LEASE) * 1000, (cut + 2 * LEASE + WINDOW) * 1000
        runs = running.runs()
        ran = sum(_ran_own(runs, start_ms, end_ms).values())
        due = tally(runs, NAMES, 1000, int(start_ms), int(end_ms))
        print(f"{kind}, {fault}: {ran} of {due.due} due ticks ran, {len(due.twice)} twice")
        assert not due.twice, running.logs()
        if fault == "replies-lost":  # what arrived without an answer ran, once
            assert proxy.unanswered is not None
            sent = re.findall(broker.task_id, proxy.unanswered)
            ran_ids = Counter(run["task_id"] for run in runs)
            assert sent, proxy.unanswered
            assert all(ran_ids[task_id.decode()] == 1 for task_id in sent), running.logs()
        assert ran >= 0.8 * due.due, f"{ran} of {due.due} ran\n{running.logs()}"
        assert cut_off.output().count("cannot reach its broker") == 1, running.logs()
        shown = {beat["pid"]: beat["publishing"] for beat in _beats(running)}
        doctor = running.cli("doctor")
        proxy.accept()
        wait_for(lambda: "rejoins" in cut_off.output(), 30, "the cut-off beat to rejoin")
        twice = running.twice()
        back = {beat["pid"]: beat["publishing"] for beat in _beats(running)}
    assert not twice
    assert cut_off.process is not None
    assert sorted(shown.items()) == sorted({**back, cut_off.process.pid: False}.items())
    assert all(back.values())
    assert "cannot reach the broker, the others claim their share" in " ".join(
        doctor.stdout.split()
    )


def test_when_every_beat_loses_the_broker_the_claims_wait_in_flight_and_run_when_it_returns(
    tmp_path: Path, redis_url: str
) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        Proxy(broker.port) as proxy,
        cluster(tmp_path, redis_url, broker.url, lease=LEASE) as running,
    ):
        api = running.api()
        api.add("through-it-all", "record", every=1, catchup="all", overlap="allow")
        worker = running.worker()
        beats = [running.beat(f"beat-{n}", TEST_BROKER_URL=proxy.url) for n in range(2)]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: all(" ready; " in beat.output() for beat in beats), 60, "both beats")
        wait_for(lambda: running.runs_of("through-it-all"), 30, "a run")
        proxy.refuse()
        down = time.time()
        let_pass(3 * LEASE)
        proxy.accept()
        wait_for(
            lambda: any(
                r["tick"] > (down + 3 * LEASE) * 1000 for r in running.runs_of("through-it-all")
            ),
            30,
            "runs after the broker returned",
        )
        runs = running.runs_of("through-it-all")
        logs = running.logs()
    ticks = sorted(int(run["tick"]) for run in runs)
    assert len(ticks) == len(set(ticks)), logs
    # catchup="all": every tick due while no beat could publish ran once it returned
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 1000)), logs


def test_a_beat_stopped_in_the_middle_of_a_publish_is_not_taken_for_one_cut_off(
    tmp_path: Path, redis_url: str
) -> None:
    # The whole beat is stopped for more than half a lease (the stall deadline) while a
    # publish waits for its reply, which comes just after it resumes (within the broker
    # socket's timeout, 1 s): neither the call nor the beat ran meanwhile.
    lease = 1.0
    with (
        LocalRedis(tmp_path / "broker") as broker,
        Proxy(broker.port) as proxy,
        cluster(tmp_path, redis_url, broker.url, lease=lease) as running,
    ):
        api = running.api()
        for name in NAMES:
            api.add(name, "record", every=1)
        beat = running.beat("beat-stopped", TEST_BROKER_URL=proxy.url)
        wait_for(lambda: " sent as " in beat.output(), 60, "the beat to send")
        proxy.hold_next(b"LPUSH", lease * 0.8)
        wait_for(proxy.holding.is_set, 10, "a publish to be held")
        assert beat.process is not None
        os.killpg(beat.process.pid, signal.SIGSTOP)
        let_pass(lease * 0.6)
        os.killpg(beat.process.pid, signal.SIGCONT)
        sent = beat.output().count(" sent as ")
        wait_for(lambda: beat.output().count(" sent as ") > sent + len(NAMES), 10,
                 "the beat to send on")  # fmt: skip
        let_pass(lease)
        log = beat.output()
    assert "cannot reach its broker" not in log, log
    assert "rejoins" not in log, log
