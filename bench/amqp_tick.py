"""The lean per-tick path on RabbitMQ: a beat's ticks against Celery's batched send_task.

    .venv/bin/python bench/amqp_tick.py [--due 5000] [--rounds 3] [--amqp URL]

Each round stores ``--due`` entries (alike, every hour, their first tick a few seconds
ahead) in a fresh private ``redis-server`` (the schedule), waits until they are due,
then lets a bare ``Dispatcher`` in this process (the beat's claim/publish/settle passes,
nothing staged: RabbitMQ has no staging) publish them all to a queue of its own on the
RabbitMQ at ``--amqp``; then Celery's ``send_task`` sends as many messages in
``producer.batch(500)`` to another queue, as bench/beat.py's batched reference does on
Redis. Printed per message: the beat's CPU (``time.process_time``), the schedule's
Redis CPU (``INFO cpu``), RabbitMQ's CPU while the beat sent (its ``beam.smp``
processes' in /proc, when it runs on this machine) and the wall time, the loop's CPU
and wall time, and the ratio of the two rates; then what this machine allows at most:
``floor_us``, the least wall time a tick can take with these CPU costs (the beat is one
thread; it, the schedule's Redis and RabbitMQ share the machine's cores), and
``ceiling``, the ratio at that floor. The queues are deleted after. Printed, never
asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from _machine import ceiling, cpu_seconds
from celery import Celery
from kombu import Connection, Queue

from celery_periodiq import periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.localredis import LocalRedis

_TASK = "bench.noop"


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _rabbitmq_cpu() -> float | None:
    """CPU seconds of this machine's RabbitMQ (its ``beam.smp`` processes), or None."""
    spent = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):  # gone meanwhile
            if comm.read_text().strip() == "beam.smp":
                spent.append(cpu_seconds(int(comm.parent.name)))
    found = [seconds for seconds in spent if seconds is not None]
    return sum(found) if found else None


def _queued(channel: Any, queue: str, due: int) -> int:
    """The queue's length once it holds ``due`` messages, or after 10 s (published
    without confirms, a message is in its queue a moment after the publish returns)."""
    deadline = time.monotonic() + 10
    while True:
        count = int(channel.queue_declare(queue, passive=True).message_count)
        if count >= due or time.monotonic() > deadline:
            return count
        time.sleep(0.01)


def _app(broker: str, queue: str, schedule: str | None = None) -> Celery:
    app = Celery("bench_amqp_tick", broker=broker, set_as_current=False)
    app.conf.task_default_queue = queue
    app.conf.result_expires = None
    if schedule is not None:
        app.conf.periodiq_redis_url = schedule
        app.conf.periodiq_claim_lease = 10.0
    app.task(name=_TASK)(lambda: None)
    return app


def _beat(folder: Path, broker: str, due: int) -> dict[str, float]:
    """The beat's round: µs a tick of its CPU, the schedule's Redis CPU, and wall time."""
    queue = f"bench-amqp-beat-{uuid.uuid4().hex[:8]}"
    with LocalRedis(folder) as schedule, Connection(broker) as connection:
        Queue(queue)(connection.default_channel).declare()
        app = _app(broker, queue, schedule.url)
        first = time.time() + 3
        start = datetime.fromtimestamp(first, UTC)
        periodiq(app).add_many(
            {"name": f"due-{i:07d}", "task": _TASK, "every": 3600, "start_at": start}
            for i in range(due)
        )
        dispatcher = Dispatcher(app, periodiq(app).store, "bench-amqp")
        dispatcher.dispatch()  # connects to the broker and Redis
        time.sleep(max(first - time.time(), 0) + 0.05)
        client = redis.Redis.from_url(schedule.url)
        broker_before = _rabbitmq_cpu()
        redis_before, began, wall = _cpu(client), time.process_time(), time.perf_counter()
        sent = 0
        while sent < due:
            sent += dispatcher.dispatch().claimed
        beat, wall = time.process_time() - began, time.perf_counter() - wall
        redis_cpu = _cpu(client) - redis_before
        queued = _queued(connection.default_channel, queue, due)  # RabbitMQ has them all
        broker_after = _rabbitmq_cpu()
        connection.default_channel.queue_delete(queue)
    if queued != due:
        raise SystemExit(f"{queued} messages in the queue, {due} expected")
    found = {
        "beat_us": beat / due * 1e6,
        "schedule_redis_us": redis_cpu / due * 1e6,
        "beat_wall_us": wall / due * 1e6,
    }
    if broker_before is not None and broker_after is not None:
        found["rabbitmq_us"] = (broker_after - broker_before) / due * 1e6
    return found


def _loop(broker: str, due: int) -> dict[str, float]:
    """Celery's send_task in ``producer.batch(500)``: µs a message of CPU and wall time."""
    queue = f"bench-amqp-loop-{uuid.uuid4().hex[:8]}"
    app = _app(broker, queue)
    with app.producer_or_acquire() as producer:
        Queue(queue)(producer.channel).declare()
        began, wall = time.process_time(), time.perf_counter()
        with producer.batch(500):
            for n in range(due):
                app.send_task(_TASK, task_id=str(uuid.uuid4()), producer=producer,
                              headers={"periodiq_entry": f"due-{n:07d}"})  # fmt: skip
        cpu, wall = time.process_time() - began, time.perf_counter() - wall
        queued = _queued(producer.channel, queue, due)
        producer.channel.queue_delete(queue)
    if queued != due:
        raise SystemExit(f"{queued} messages in the queue, {due} expected")
    return {"loop_us": cpu / due * 1e6, "loop_wall_us": wall / due * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="periodiq-amqp-tick-") as tmp:
        for index in range(args.rounds):
            found = _beat(Path(tmp) / str(index), args.amqp, args.due) | _loop(args.amqp, args.due)
            found["ratio"] = found["loop_wall_us"] / found["beat_wall_us"]
            spent = found["beat_us"] + found["schedule_redis_us"] + found.get("rabbitmq_us", 0)
            found["floor_us"], found["ceiling"] = ceiling(
                found["beat_us"], spent, found["loop_wall_us"]
            )
            rounds.append(found)
            print(json.dumps({key: round(value, 2) for key, value in found.items()}))
    median = {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]}
    print(f"median of {len(rounds)} rounds, {args.due:,} due, µs a message (ratio: the "
          "beat's rate over the loop's):")  # fmt: skip
    print(json.dumps(median))


if __name__ == "__main__":
    main()
