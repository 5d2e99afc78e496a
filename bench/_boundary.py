"""bench/beat.py's ``boundary`` scenario: N ticks due at one instant, timed from that instant.

``--due`` entries (default 100,000; ``--quick``: 5,000), interval 1 h, all first due at
one whole second ``--lead`` s (default 60; ``--quick``: 20) after they are stored, so
the beats have time to do whatever they do ahead of it. Nothing consumes the queue;
its length is sampled every 2 ms (RabbitMQ: 5 ms) by bench/_queue_watch.py, and the
time it first reached k stands for the k-th message's arrival. Measured for
celery_periodiq with one and two beats (Redis broker) and one beat on RabbitMQ (a
queue of its own on the server at ``$BENCH_AMQP_URL``, default
``amqp://127.0.0.1:5672//``), RedBeat (one beat), and Celery's ``send_task`` loop in
kombu's ``producer.batch(500)`` (bench/_limit.py), which starts sending at the
instant. Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import redis
from _harness import BENCH, Proc, Spec, run, wait_for
from _queue_watch import AmqpQueue, Curve, Queued, RedisQueue, watch
from _scenarios import Config, Row, _t0, _target, _versus

from celery_periodiq.localredis import LocalRedis

AMQP_URL = os.environ.get("BENCH_AMQP_URL", "amqp://127.0.0.1:5672//")
VARIANTS = ("periodiq-1", "periodiq-2", "periodiq-amqp", "periodiq-2-behind")
# Messages left waiting in the queue for "periodiq-2-behind": the staged ones go behind
# them (a queue that is empty at the instant takes a staged list whole).
BACKLOG = 1000
"""What the celery_periodiq column shows, in this order: 1 beat, 2 beats, 1 beat on RabbitMQ."""


def _redis_cpu(url: str) -> float:
    client = redis.Redis.from_url(url)
    try:
        info = client.info("cpu")
    finally:
        client.close()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class _Meter:
    """CPU seconds so far of the publishing processes and of Redis servers, by role."""

    def __init__(self, procs: Sequence[Proc], redis_urls: dict[str, str]) -> None:
        self.procs = list(procs)
        self.redis_urls = redis_urls

    def read(self) -> dict[str, float]:
        # An exited process's CPU time is gone with it: NaN rather than a wrong sum.
        alive = all(p.alive for p in self.procs)
        found = {"beats": sum(p.cpu_seconds() for p in self.procs) if alive else math.nan}
        found.update({role: _redis_cpu(url) for role, url in self.redis_urls.items()})
        return found


def _warmup() -> Spec:
    # Opens the beat's broker connection (and on RabbitMQ declares the queue); taken
    # out of the queue before the measured ticks are due.
    return Spec("warmup", round((time.time() + 1.5) * 1000), 3600)


def _duplicates(messages: Sequence[Queued], system: str) -> int:
    """Messages beyond the first per task id (RedBeat: per entry and due instant)."""
    if system == "redbeat":
        counts = Counter((m.entry, m.due_ms) for m in messages)
    else:
        counts = Counter(m.task_id for m in messages)
    return sum(n - 1 for n in counts.values())


def _measure(
    queue: RedisQueue | AmqpQueue,
    instant: float,
    count: int,
    meter: _Meter,
    *,
    system: str,
    prefix: str,
    cap: float,
    every: float,
) -> tuple[dict[str, float], Curve]:
    """Watch the queue from now until the ticks due at ``instant`` are in; read them back."""
    stored = meter.read()
    at: dict[str, float] = {}
    curve = watch(queue.length, instant, count, cap=cap, every=every,
                  at_instant=lambda: at.update(meter.read()))  # fmt: skip
    end = meter.read()
    alive = sum(1 for p in meter.procs if p.alive)
    messages = [m for m in queue.take_all() if m.entry.startswith(prefix)]
    stats: dict[str, float] = {
        "early": float(curve.early),
        "first_ms": curve.after_ms(curve.early + 1),
        "p50_ms": curve.after_ms(math.ceil(count * 0.50)),
        "p99_ms": curve.after_ms(math.ceil(count * 0.99)),
        "last_ms": curve.after_ms(count),
        "reached": float(curve.reached),
        "reached_ms": curve.after_ms(curve.reached),
        "messages": float(len(messages)),
        "duplicates": float(_duplicates(messages, system)),
        "missing": float(count - len({m.entry for m in messages})),
        "polls": float(curve.polls),
        "alive": float(alive),
    }
    for role in stored:
        stats[f"{role}_before_us"] = (at.get(role, math.nan) - stored[role]) / count * 1e6
        stats[f"{role}_after_us"] = (end[role] - at.get(role, math.nan)) / count * 1e6
    return stats, curve


def _cap(count: int) -> float:
    """How long after the instant a run may take before its figures are taken as they are."""
    return 30 + count / 1000


def _limit(cfg: Config, count: int) -> dict[str, Any]:
    """bench/_limit.py --batch 500 against a fresh broker, sending from the instant."""
    tmp = cfg.tmp / "boundary-limit"
    tmp.mkdir(parents=True, exist_ok=True)
    with LocalRedis(tmp / "broker-redis") as broker:
        queue = RedisQueue(broker.url)
        instant = float(_t0(8) / 1000)  # its start-up and warm-up message come first
        proc = Proc(
            "limit",
            [sys.executable, str(BENCH / "_limit.py"), "--broker", broker.url,
             "--count", str(count), "--at", f"{instant:.3f}", "--batch", "500"],
            dict(os.environ),
            tmp / "limit.log",
        ).start(stdout_pipe=True)  # fmt: skip
        try:
            wait_for(lambda: queue.length() >= 1, 30, "the limit's warm-up message")
            purged = queue.purge()
            meter = _Meter([proc], {"broker": broker.url})
            stats, curve = _measure(queue, instant, count, meter, system="limit",
                                    prefix="limit-", cap=_cap(count), every=0.002)  # fmt: skip
            assert proc.process is not None
            out, _ = proc.process.communicate(timeout=60)
            # It has exited by now, and its CPU time with it: its own count of the loop.
            report = json.loads(out.decode().strip().splitlines()[-1])
            stats["beats_after_us"] = report["cpu_seconds"] / count * 1e6
            del stats["alive"]  # it exits once sent, as it should
        finally:
            proc.stop()
            queue.close()
    stats["early"] += purged - 1
    return {**stats, "curve": curve.thinned()}


def _beats(
    cfg: Config,
    system: str,
    count: int,
    beats: int,
    lead: float,
    amqp: str | None = None,
    backlog: int = 0,
) -> dict[str, Any]:
    """``beats`` real ``celery beat`` processes of ``system``; on RabbitMQ with ``amqp``;
    ``backlog`` messages (not ticks) waiting in the queue from before the instant."""
    label = f"{system}-{'amqp' if amqp else beats}"
    name = f"bench-boundary-{uuid.uuid4().hex[:8]}" if amqp else None
    with run(system, cfg.tmp, f"boundary-{label}", loglevel=cfg.loglevel, listen=False,
             broker=amqp, queue=name) as current:  # fmt: skip
        queue: RedisQueue | AmqpQueue = (
            AmqpQueue(amqp, name) if amqp and name else RedisQueue(current.broker_redis.url)
        )
        try:
            current.start_beats(beats)
            current.load([_warmup()])
            wait_for(queue.length, 60, "the warm-up message")
            instant = _t0(2 + count / 10_000 + lead) / 1000  # storing: ~10,000/s or more
            specs = [Spec(f"boundary-{i:06d}", round(instant * 1000), 3600) for i in range(count)]
            load_s = current.load(specs)
            stored_lead = instant - time.time()
            purged = queue.purge()
            if backlog and isinstance(queue, RedisQueue):
                waiting = json.dumps({"headers": {"bench_entry": "backlog"}, "body": ""})
                queue.client.lpush(queue.name, *[waiting] * backlog)
                queue.length = lambda: RedisQueue.length(queue) - backlog  # type: ignore
            roles = {"schedule": current.schedule_url}
            if not amqp:
                roles["broker"] = current.broker_redis.url
            stats, curve = _measure(
                queue, instant, count, _Meter(current.beats, roles), system=system,
                prefix="boundary-", cap=_cap(count), every=0.005 if amqp else 0.002,
            )  # fmt: skip
        finally:
            queue.close()
    stats["early"] += purged - 1
    stats.update(load_s=load_s, lead_s=stored_lead)
    return {**stats, "curve": curve.thinned()}


def _show(stats: dict[str, Any], key: str, fmt: str) -> str:
    if "failed" in stats:
        return "failed"
    if key not in stats:
        return "–"
    value = stats[key]
    if key.endswith("_ms") and math.isnan(value):
        return f"not in {stats.get('cap', math.nan):.0f} s"
    return "n/a" if math.isnan(value) else fmt.format(value)


def boundary(cfg: Config) -> list[Row]:
    """N ticks due at one instant: from the instant to the last message, per system."""
    if cfg.cluster_total:
        from _boundary_cluster import boundary_on_cluster

        return boundary_on_cluster(cfg)
    count = cfg.due or (5_000 if cfg.quick else 100_000)
    lead = cfg.lead if cfg.lead is not None else (20.0 if cfg.quick else 60.0)
    found: dict[str, dict[str, Any]] = {}
    runs = [
        ("limit", lambda: _limit(cfg, count)),
        ("periodiq-1", lambda: _beats(cfg, "periodiq", count, 1, lead)),
        ("periodiq-2", lambda: _beats(cfg, "periodiq", count, 2, lead)),
        ("periodiq-amqp", lambda: _beats(cfg, "periodiq", count, 1, lead, AMQP_URL)),
        ("periodiq-2-behind", lambda: _beats(cfg, "periodiq", count, 2, lead, backlog=BACKLOG)),
        ("redbeat", lambda: _beats(cfg, "redbeat", count, 1, lead)),
    ]
    chosen = set(cfg.only.split(",")) if cfg.only else None
    for label, measure in runs:
        if chosen is not None and label not in chosen:
            found[label] = {"failed": "not run (--only)"}
            continue
        try:
            found[label] = measure()
        except Exception as error:  # RabbitMQ down, say: the other figures still count
            cfg.log(f"boundary {label} FAILED: {error!r}")
            found[label] = {"failed": repr(error)}
        found[label]["cap"] = _cap(count)
        cfg.log(f"boundary {label}: {json.dumps(found[label], default=str)[:1500]}")
    cfg.details["boundary"] = found
    ours = [found[v] for v in VARIANTS]
    redbeat, limit = found["redbeat"], found["limit"]

    def row(metric: str, key: str, fmt: str, target: str = "", ratio: str = "") -> Row:
        return Row("boundary", metric, " / ".join(_show(s, key, fmt) for s in ours),
                   _show(redbeat, key, fmt), _show(limit, key, fmt), ratio, target)  # fmt: skip

    def cpu(metric: str, role: str) -> Row:
        def pair(stats: dict[str, Any]) -> str:
            before, after = (stats.get(f"{role}_{w}_us", math.nan) for w in ("before", "after"))
            if math.isnan(before) and math.isnan(after):
                return "–"
            return " + ".join("n/a" if math.isnan(v) else f"{v:.1f}" for v in (before, after))

        return Row("boundary", metric, " / ".join(pair(s) for s in ours), pair(redbeat),
                   pair(limit))  # fmt: skip

    early_ok = all(s.get("early") == 0 for s in ours if "failed" not in s)
    return [
        row(f"{count:,} due at one instant (celery_periodiq: 1 beat / 2 beats / 1 beat on "
            f"RabbitMQ / 2 beats, {BACKLOG:,} messages waiting in the queue): ms from it to "
            "the last message in the queue", "last_ms", "{:,.0f}",
            ratio=_versus(ours[0].get("last_ms", math.nan), limit.get("last_ms"),
                          "send_task batched"),
            target=_target(ours[0].get("last_ms", math.inf) <= 1000
                           and ours[1].get("last_ms", math.inf) <= 500,
                           "1 beat ≤ 1,000, 2 beats ≤ 500")),
        row("ms from the instant to the first message", "first_ms", "{:,.1f}"),
        row("lateness p50 (ms), from the queue's length every 2 ms (RabbitMQ: 5 ms)", "p50_ms",
            "{:,.0f}"),
        row("lateness p99 (ms)", "p99_ms", "{:,.0f}"),
        row("messages in the queue at the end (all in, or the cap)", "reached", "{:,.0f}"),
        row("messages in the queue before the instant", "early", "{:.0f}",
            _target(early_ok, "0")),
        row("duplicate messages (same task id; RedBeat: same entry and due)", "duplicates",
            "{:.0f}"),
        row("ticks missing", "missing", "{:.0f}"),
        row("beats alive at the end (of 1 / 2 / 1 / 2; RedBeat: of 1)", "alive", "{:.0f}"),
        cpu("CPU µs per tick, the beats (limit: the sending process): before the instant + "
            "from it (n/a: a beat exited)", "beats"),
        cpu("CPU µs per tick, the schedule's Redis: before + from the instant", "schedule"),
        cpu("CPU µs per tick, the broker's Redis: before + from the instant", "broker"),
    ]  # fmt: skip
