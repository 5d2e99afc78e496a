"""Watch a broker queue fill without taking from it, then read back what it holds.

For ``bench/beat.py --scenario boundary``: nothing consumes the queue while the
ticks arrive, so its length is the count of messages published so far. It is
sampled every few ms (Redis: ``LLEN``; RabbitMQ: a passive ``queue_declare``'s
``message_count``), and the time the length first reached k stands for the k-th
message's arrival (an upper bound: by the poll interval plus one round trip).
Afterwards every message is read back and decoded (kombu's JSON on Redis, the AMQP
headers on RabbitMQ) to count task ids.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis


@dataclass(frozen=True, slots=True)
class Queued:
    """One message read back from the queue."""

    task_id: str
    entry: str
    due_ms: int | None
    """periodiq_tick, or the bench_due header bench/_redbeat_app.py adds."""


def _queued(headers: dict[str, Any]) -> Queued:
    due = headers.get("periodiq_tick")
    if due is None:
        due = headers.get("bench_due")
    entry = headers.get("periodiq_entry") or headers.get("bench_entry") or "?"
    return Queued(str(headers.get("id")), entry, None if due is None else int(due))


class RedisQueue:
    """A kombu queue on a Redis broker: the list ``name``, newest message at the head."""

    def __init__(self, url: str, name: str = "celery") -> None:
        self.name = name
        self.client = redis.Redis.from_url(url)

    def length(self) -> int:
        return int(self.client.llen(self.name))

    def purge(self) -> int:
        """Empty the queue; how many messages it held."""
        pipe = self.client.pipeline(transaction=True)
        pipe.llen(self.name)
        pipe.delete(self.name)
        return int(pipe.execute()[0])

    def take_all(self) -> list[Queued]:
        """Every message, oldest first, decoded; the list is emptied."""
        found: list[Queued] = []
        while True:
            # From the tail (oldest) in chunks, so 100,000 raw messages are never held at once.
            raws = self.client.rpop(self.name, 10_000)
            if not raws:
                return found
            found += [_queued(json.loads(raw).get("headers") or {}) for raw in raws]

    def close(self) -> None:
        self.client.close()


class AmqpQueue:
    """A queue on RabbitMQ, counted by passive ``queue_declare`` (which fails until
    Celery has declared the queue: counted 0 then)."""

    def __init__(self, url: str, name: str) -> None:
        from kombu import Connection

        self.name = name
        self.kombu = Connection(url)  # kombu's reading of the URL, with its defaults
        self.kombu.connect()
        self.connection = self.kombu.connection  # the py-amqp connection under it
        self.channel = self.connection.channel()

    def length(self) -> int:
        import amqp

        try:
            return int(self.channel.queue_declare(self.name, passive=True).message_count)
        except amqp.exceptions.NotFound:
            self.channel = self.connection.channel()  # the 404 closed the channel
            return 0

    def purge(self) -> int:
        """Empty the queue; how many messages it held."""
        return int(self.channel.queue_purge(self.name) or 0)

    def take_all(self, timeout: float = 5.0) -> list[Queued]:
        """Every message, consumed without acks until none comes for ``timeout`` s."""

        found: list[Queued] = []

        def got(message: Any) -> None:
            found.append(_queued(message.properties.get("application_headers") or {}))

        tag = self.channel.basic_consume(self.name, callback=got, no_ack=True)
        try:
            while True:
                self.connection.drain_events(timeout=timeout)
        except TimeoutError:
            pass
        self.channel.basic_cancel(tag)
        return found

    def close(self) -> None:
        """Delete the queue and its exchange (Celery names both after the queue), disconnect."""
        import amqp

        for delete in (self.channel.queue_delete, self.channel.exchange_delete):
            try:
                delete(self.name)
            except amqp.exceptions.NotFound:
                self.channel = self.connection.channel()
        self.kombu.release()


@dataclass
class Curve:
    """How the queue's length grew, against the instant the ticks were due."""

    instant: float
    """Epoch seconds."""
    samples: list[tuple[float, int]] = field(default_factory=list)
    """(epoch seconds of the reply, length) at each change of length."""
    early: int = 0
    """The length at the last reply before the instant: messages there too soon."""
    polls: int = 0

    def after_ms(self, k: int) -> float:
        """Milliseconds from the instant until the length first reached ``k``; NaN if never."""
        for at, length in self.samples:
            if length >= k:
                return (at - self.instant) * 1000
        return math.nan

    @property
    def reached(self) -> int:
        return max((length for _, length in self.samples), default=0)

    def thinned(self, points: int = 100) -> list[tuple[float, int]]:
        """At most ``points`` samples, ms after the instant, for the JSON report."""
        step = max(len(self.samples) // points, 1)
        kept = self.samples[::step] + self.samples[-1:]
        return [(round((at - self.instant) * 1000, 1), length) for at, length in kept]


def watch(
    length: Callable[[], int],
    instant: float,
    count: int,
    *,
    cap: float,
    every: float = 0.002,
    quiet: float = 2.0,
    at_instant: Callable[[], None] = lambda: None,
) -> Curve:
    """Sample ``length()`` from now until ``count`` is reached and then stays put for
    ``quiet`` s (late duplicates), or until ``cap`` s after ``instant``.

    Every 50 ms until 0.5 s before the instant (nothing consumes the queue, so an
    early message stays to be counted), then every ``every`` s. ``at_instant`` is
    called once, at the first poll at or past the instant.
    """
    curve = Curve(instant)
    last, changed, called = -1, time.time(), False
    deadline = instant + cap
    while True:
        n = length()
        now = time.time()
        curve.polls += 1
        if now < instant:
            curve.early = n
        elif not called:
            at_instant()
            called = True
        if n != last:
            curve.samples.append((now, n))
            last, changed = n, now
        if (n >= count and now - changed >= quiet and now > instant) or now > deadline:
            return curve
        time.sleep(0.05 if now < instant - 0.5 else every)
