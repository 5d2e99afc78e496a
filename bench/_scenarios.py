"""The scenarios of bench/beat.py. Each returns table rows; figures are printed, never asserted."""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import (
    Message,
    Run,
    Spec,
    pct,
    redbeat_app,
    run,
    run_limit,
    sleep_until,
    wait_idle,
)

SYSTEMS = ("periodiq", "redbeat")
LABEL = {"periodiq": "celery_periodiq", "redbeat": "RedBeat"}


@dataclass
class Row:
    scenario: str
    metric: str
    periodiq: float | str | None = None
    redbeat: float | str | None = None
    limit: float | None = None
    ratio: str = ""
    target: str = ""
    fmt: str = "{:.1f}"

    def cells(self) -> list[str]:
        def show(value: float | str | None) -> str:
            if value is None:
                return "–"
            if isinstance(value, str):
                return value
            if isinstance(value, float) and math.isnan(value):
                return "n/a"
            return self.fmt.format(value)

        return [
            self.scenario, self.metric, show(self.periodiq), show(self.redbeat),
            show(self.limit), self.ratio or "–", self.target or "–",
        ]  # fmt: skip


@dataclass
class Config:
    quick: bool
    tmp: Path
    loglevel: str
    log: Callable[[str], None]
    details: dict[str, Any] = field(default_factory=dict)
    due: int | None = None
    """boundary: ticks due at the instant (None: the scenario's own default)."""
    lead: float | None = None
    """boundary: seconds from storing them to the instant (None: its own default)."""
    cluster_total: int | None = None
    """boundary: on a 3-master Redis Cluster with this many entries in all (None: one Redis)."""
    only: str | None = None
    """boundary: the runs to make, comma-separated (None: all)."""


def _versus(ours: float, theirs: float | None, what: str) -> str:
    if theirs is None or not theirs or math.isnan(theirs) or math.isnan(ours):
        return ""
    return f"{ours / theirs:.3g}× {what}"


def _target(ok: bool, text: str) -> str:
    return f"{text}: {'met' if ok else 'NOT met'}"


def _warmup(first_ms: int) -> Spec:
    # One message before the measured ticks opens the beat's broker connection.
    return Spec("warmup", first_ms - 1000, 3600)


def _t0(lead: float) -> int:
    """A whole second at least ``lead`` seconds from now, in ms."""
    return math.ceil(time.time() + lead) * 1000


def _of(messages: Sequence[Message], prefix: str) -> list[Message]:
    return [m for m in messages if m.entry.startswith(prefix)]


def _duplicates(messages: Sequence[Message], system: str) -> int:
    """Messages beyond the first for one tick: same task id (periodiq) or same entry and due."""
    if system == "periodiq":
        counts = Counter(m.task_id for m in messages)
    else:
        counts = Counter((m.entry, m.due_ms) for m in messages)
    return sum(n - 1 for n in counts.values())


def _first_arrivals(messages: Sequence[Message]) -> dict[tuple[str, int | None], Message]:
    first: dict[tuple[str, int | None], Message] = {}
    for m in sorted(messages, key=lambda m: m.seq):
        first.setdefault((m.entry, m.due_ms), m)
    return first


# ---------------------------------------------------------------------- rest


def rest(cfg: Config) -> list[Row]:
    """10 entries every second at different sub-second phases."""
    seconds = 15 if cfg.quick else 60
    phases = [i * 100 + i * 7 for i in range(10)]  # 0, 107, 214, ... 963 ms
    found: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        with run(system, cfg.tmp, f"rest-{system}", loglevel=cfg.loglevel) as current:
            current.start_beats(1)
            t0 = _t0(3)
            specs = [Spec(f"rest-{i}", t0 + phase, 1.0) for i, phase in enumerate(phases)]
            current.load([_warmup(t0), *specs])
            end = t0 / 1000 + seconds
            sleep_until(end + 1.5)
            messages = _of(current.listener.stop(), "rest-")
        window = [m for m in messages if m.due_ms is not None and m.due_ms < end * 1000]
        lateness = [m.lateness_ms for m in window]
        by_entry: dict[str, list[int]] = defaultdict(list)
        for m in window:
            assert m.due_ms is not None
            by_entry[m.entry].append(m.due_ms)
        drifts, counts = [], []
        for dues in by_entry.values():
            dues.sort()
            counts.append(len(dues))
            if len(dues) > 1:
                drifts.append((dues[-1] - dues[0]) / (len(dues) - 1) - 1000.0)
        drift = statistics.fmean(drifts) if drifts else math.nan
        found[system] = {
            "p50": pct(lateness, 50),
            "p99": pct(lateness, 99),
            "max": max(lateness, default=math.nan),
            "drift_ms": drift,
            "ticks": statistics.fmean(counts) if counts else 0.0,
            "duplicates": _duplicates(window, system),
        }
        cfg.log(f"rest {LABEL[system]}: {json.dumps(found[system])}")
    cfg.details["rest"] = found
    p, r = found["periodiq"], found["redbeat"]
    return [
        Row("rest", "lateness p50 (ms)", p["p50"], r["p50"], None,
            _versus(p["p50"], r["p50"], "RedBeat"), _target(p["p50"] <= 2, "≤ 2 ms"), "{:.2f}"),
        Row("rest", "lateness p99 (ms)", p["p99"], r["p99"], None,
            _versus(p["p99"], r["p99"], "RedBeat"), _target(p["p99"] <= 10, "≤ 10 ms"), "{:.2f}"),
        Row("rest", "lateness max (ms)", p["max"], r["max"], fmt="{:.2f}"),
        Row("rest", "drift per 1 s tick (ms)", p["drift_ms"], r["drift_ms"], None, "",
            _target(p["drift_ms"] == 0, "0"), "{:+.3f}"),
        Row("rest", "drift (% of interval)", p["drift_ms"] / 10, r["drift_ms"] / 10, None, "",
            _target(p["drift_ms"] == 0, "0"), "{:+.3f}%"),
        Row("rest", f"ticks per entry in {seconds} s", p["ticks"], r["ticks"], float(seconds),
            fmt="{:.1f}"),
    ]  # fmt: skip


# ---------------------------------------------------------------------- burst


def _burst_stats(messages: Sequence[Message], count: int, system: str) -> dict[str, float]:
    ordered = sorted(messages, key=lambda m: m.seq)
    stats: dict[str, float] = {"received": float(len(ordered))}
    if len(ordered) < 2:
        return stats
    first, last = ordered[0].arrival, ordered[-1].arrival
    stats["rate"] = (len(ordered) - 1) / (last - first) if last > first else math.nan
    stats["first_wait_ms"] = ordered[0].lateness_ms
    stats["last_wait_ms"] = ordered[-1].lateness_ms
    stats["max_wait_ms"] = max(m.lateness_ms for m in ordered)
    # Due order: a message is out of order when an earlier one was due later.
    latest, out_of_order, worst = -math.inf, 0, 0.0
    for m in ordered:
        assert m.due_ms is not None
        if m.due_ms < latest:
            out_of_order += 1
            worst = max(worst, latest - m.due_ms)
        latest = max(latest, m.due_ms)
    stats["out_of_order"] = float(out_of_order)
    stats["out_of_order_max_ms"] = worst
    stats["duplicates"] = float(_duplicates(ordered, system))
    stats["missing"] = float(count - len({m.entry for m in ordered}))
    return stats


def _limit_run(cfg: Config, count: int, label: str, batch: int = 0) -> dict[str, float]:
    messages, loop_seconds = run_limit(cfg.tmp, f"burst-limit-{label}", count, batch=batch)
    stats = _burst_stats(_of(messages, "limit-"), count, "periodiq")
    stats["loop_rate"] = count / loop_seconds
    cfg.log(f"burst limit ({label}): {json.dumps(stats)}")
    return stats


def burst(cfg: Config) -> list[Row]:
    """10,000 entries due at one instant: one beat, two beats, and the send_task limit.

    The limit and the batched reference are each measured right before and right
    after celery_periodiq's two runs (the machine is shared; its speed drifts) and
    the mean of each pair is what those runs are compared with.
    """
    count = 5_000 if cfg.quick else 10_000
    found: dict[str, dict[str, float]] = {
        "limit-before": _limit_run(cfg, count, "before"),
        "batched-before": _limit_run(cfg, count, "batched-before", batch=500),
    }
    for system in SYSTEMS:
        if system == "redbeat":
            found["batched-after"] = _limit_run(cfg, count, "batched-after", batch=500)
            found["limit-after"] = _limit_run(cfg, count, "after")
        for beats in (1, 2):
            label = f"{system}-{beats}"
            with run(system, cfg.tmp, f"burst-{label}", loglevel=cfg.loglevel) as current:
                current.start_beats(beats)
                t0 = _t0(2 + count / 4000)
                # 100 entries per ms over the first 100 ms: all due at once for any beat,
                # yet with distinct due instants so that due order can be checked.
                specs = [Spec(f"burst-{i:06d}", t0 + i // 100, 3600) for i in range(count)]
                load = current.load([_warmup(t0), *specs])
                left = t0 - time.time() * 1000
                if left < 500:
                    cfg.log(f"burst {label}: loading took {load:.1f} s, only {left:.0f} ms left")
                sleep_until(t0 / 1000)
                done = current.listener.wait_settled(count + 1, 180)
                alive = sum(1 for beat in current.beats if beat.alive)
                messages = _of(current.listener.stop(), "burst-")
            found[label] = _burst_stats(messages, count, system)
            found[label].update(load_s=load, complete=float(done), beats_alive=float(alive))
            cfg.log(f"burst {LABEL[system]} x{beats}: {json.dumps(found[label])}")
    before, after = found["limit-before"]["rate"], found["limit-after"]["rate"]
    limit_rate = (before + after) / 2
    cfg.details["burst"] = found
    p1, p2 = found["periodiq-1"], found["periodiq-2"]
    r1, r2 = found["redbeat-1"], found["redbeat-2"]

    def get(stats: dict[str, float], key: str) -> float:
        return stats.get(key, math.nan)

    def order(stats: dict[str, float]) -> str:
        return (
            f"{int(get(stats, 'out_of_order'))} (by ≤ {get(stats, 'out_of_order_max_ms'):.0f} ms)"
        )

    def dup_miss(a: dict[str, float], b: dict[str, float]) -> str:
        dups = get(a, "duplicates") + get(b, "duplicates")
        return f"{dups:.0f} / {get(a, 'missing') + get(b, 'missing'):.0f}"

    # The targets are against the batched reference: what the transport takes.
    batched_pair = get(found["batched-before"], "rate"), get(found["batched-after"], "rate")
    batched = sum(batched_pair) / 2
    return [
        Row("burst", f"{count:,} due: msgs/s into broker, 1 beat", get(p1, "rate"),
            get(r1, "rate"), limit_rate, _versus(get(p1, "rate"), batched, "batched"),
            _target(get(p1, "rate") >= 0.9 * batched, "≥ 0.9× batched"), "{:,.0f}"),
        Row("burst", f"{count:,} due: msgs/s into broker, 2 beats", get(p2, "rate"),
            get(r2, "rate"), limit_rate, _versus(get(p2, "rate"), batched, "batched"),
            _target(get(p2, "rate") >= 1.6 * batched, "≥ 1.6× batched"), "{:,.0f}"),
        Row("burst", "limit measured before / after celery_periodiq's runs (msgs/s)", "–", "–",
            f"{before:,.0f} / {after:,.0f}"),
        Row("burst", "reference: send_task loop in kombu producer.batch(500), before / after",
            "–", "–", f"{batched_pair[0]:,.0f} / {batched_pair[1]:,.0f}",
            _versus(batched, limit_rate, "limit")),
        Row("burst", "last tick waited (ms), 1 beat", get(p1, "last_wait_ms"),
            get(r1, "last_wait_ms"), get(found["limit-after"], "last_wait_ms"), fmt="{:,.0f}"),
        Row("burst", "last tick waited (ms), 2 beats", get(p2, "last_wait_ms"),
            get(r2, "last_wait_ms"), None, fmt="{:,.0f}"),
        Row("burst", "first tick waited (ms), 1 beat", get(p1, "first_wait_ms"),
            get(r1, "first_wait_ms"), None, fmt="{:,.0f}"),
        Row("burst", "published out of due order, 1 beat", order(p1), order(r1)),
        Row("burst", "published out of due order, 2 beats", order(p2), order(r2)),
        Row("burst", "duplicates / missing ticks, 1 + 2 beats", dup_miss(p1, p2), dup_miss(r1, r2)),
        Row("burst", "beats alive after the burst, 1 + 2 beats",
            f"{get(p1, 'beats_alive') + get(p2, 'beats_alive'):.0f} of 3",
            f"{get(r1, 'beats_alive') + get(r2, 'beats_alive'):.0f} of 3"),
    ]  # fmt: skip


def replicated(cfg: Config) -> list[Row]:
    """The burst with one beat whose schedule Redis has a replica: replica acks 0 and 1."""
    count = 5_000 if cfg.quick else 10_000
    found: dict[str, dict[str, float]] = {}
    for acks in (0, 1, 0, 1):  # twice each, alternating: the machine's load drifts
        label = f"acks-{acks}"
        with run("periodiq", cfg.tmp, f"replicated-{label}-{len(found)}",
                 loglevel=cfg.loglevel, replica_acks=acks) as current:  # fmt: skip
            current.start_beats(1)
            t0 = _t0(2 + count / 4000)
            specs = [Spec(f"burst-{i:06d}", t0 + i // 100, 3600) for i in range(count)]
            current.load([_warmup(t0), *specs])
            sleep_until(t0 / 1000)
            current.listener.wait_settled(count + 1, 180)
            stats = _burst_stats(_of(current.listener.stop(), "burst-"), count, "periodiq")
        cfg.log(f"replicated acks={acks}: {json.dumps(stats)}")
        if label in found:
            found[label] = {key: (found[label][key] + stats[key]) / 2 for key in stats}
        else:
            found[label] = stats
    cfg.details["replicated"] = found
    a0, a1 = found["acks-0"], found["acks-1"]
    return [
        Row("replicated", f"{count:,} due: msgs/s, 1 beat, replica acks 0", a0["rate"],
            fmt="{:,.0f}"),
        Row("replicated", f"{count:,} due: msgs/s, 1 beat, replica acks 1", a1["rate"],
            ratio=_versus(a1["rate"], a0["rate"], "acks 0"), fmt="{:,.0f}"),
        Row("replicated", "last tick waited (ms), acks 0 / 1",
            f"{a0['last_wait_ms']:,.0f} / {a1['last_wait_ms']:,.0f}"),
        Row("replicated", "duplicates / missing ticks, acks 1",
            f"{a1['duplicates']:.0f} / {a1['missing']:.0f}"),
    ]  # fmt: skip


# ---------------------------------------------------------------------- spread


def spread(cfg: Config) -> list[Row]:
    """10,000 entries, one tick due every 6 ms (~167 per second)."""
    count, every = (2_000, 12.0) if cfg.quick else (10_000, 60.0)
    return _spread(cfg, "spread", count, every, every)


def spread_large(cfg: Config) -> list[Row]:
    """100,000 entries of interval 1 h, 60 s of them due (one every 0.6 ms, ~1,667/s)."""
    count = 20_000 if cfg.quick else 100_000
    return _spread(cfg, "spread-large", count, 3600.0, 12.0 if cfg.quick else 60.0)


def _spread(cfg: Config, name: str, count: int, every: float, span: float) -> list[Row]:
    """``count`` entries of interval ``every`` whose first ticks are spread evenly over
    ``span`` seconds; lateness of the ticks due in that span."""
    step_ms = span * 1000 / count
    found: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        with run(system, cfg.tmp, f"{name}-{system}", loglevel=cfg.loglevel) as current:
            current.start_beats(1)
            t0 = _t0(2 + count / 4000)
            specs = [Spec(f"spread-{i:06d}", t0 + round(i * step_ms), every) for i in range(count)]
            current.load([_warmup(t0), *specs])
            end = t0 / 1000 + span
            sleep_until(end)
            # The first round is complete at count + 1 (the warm-up); round two
            # only starts once every first-round tick is out.
            current.listener.wait_received(count + 1, 30 + count / 1000)
            messages = _of(current.listener.stop(), "spread-")
        window = [m for m in messages if m.due_ms is not None and m.due_ms < end * 1000]
        lateness = [m.lateness_ms for m in window]
        found[system] = {
            "ticks": float(len(window)),
            "p50": pct(lateness, 50),
            "p99": pct(lateness, 99),
            "max": max(lateness, default=math.nan),
            "duplicates": float(_duplicates(window, system)),
        }
        cfg.log(f"{name} {LABEL[system]}: {json.dumps(found[system])}")
    cfg.details[name] = found
    p, r = found["periodiq"], found["redbeat"]
    per_second = count / span
    return [
        Row(name, f"{count:,} entries, {per_second:,.0f}/s: lateness p50 (ms)", p["p50"],
            r["p50"], None, _versus(p["p50"], r["p50"], "RedBeat"), fmt="{:.2f}"),
        Row(name, "lateness p99 (ms)", p["p99"], r["p99"], None,
            _versus(p["p99"], r["p99"], "RedBeat"), _target(p["p99"] <= 50, "≤ 50 ms"), "{:.2f}"),
        Row(name, "lateness max (ms)", p["max"], r["max"], fmt="{:.2f}"),
        Row(name, f"ticks sent in {span:.0f} s", p["ticks"], r["ticks"], float(count),
            fmt="{:,.0f}"),
    ]  # fmt: skip


# ---------------------------------------------------------------------- scale


def _idle_pass_periodiq(current: Run, rounds: int) -> list[float]:
    from celery import Celery

    from celery_periodiq.beat.dispatch import Dispatcher
    from celery_periodiq.config import Settings
    from celery_periodiq.store.store import Store

    app = Celery("bench-idle", broker=current.broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = current.schedule_url
    app.conf.periodiq_key_prefix = "periodiq"
    store = Store(Settings.from_app(app))
    dispatcher = Dispatcher(app, store, "bench-idle:0:0")
    timings = []
    for _ in range(rounds):
        began = time.perf_counter()
        done = dispatcher.dispatch()
        done.seconds_until_next()
        timings.append((time.perf_counter() - began) * 1e6)
        assert not done.claimed
    store.client.close()
    return timings


def _idle_pass_redbeat(current: Run, rounds: int) -> list[float]:
    from types import SimpleNamespace

    from redbeat.schedulers import RedBeatScheduler, acquire_distributed_beat_lock

    app = redbeat_app(current.schedule_url, current.broker_url)
    app.conf.beat_max_loop_interval = 1
    # Its own lock key: the beat process holds RedBeat's lock.
    scheduler = RedBeatScheduler(app=app, lock_key="redbeat::bench-idle-lock")
    acquire_distributed_beat_lock(sender=SimpleNamespace(scheduler=scheduler))
    timings = []
    for _ in range(rounds):
        began = time.perf_counter()
        scheduler.tick()
        timings.append((time.perf_counter() - began) * 1e6)
    scheduler.close()
    return timings


def scale(cfg: Config) -> list[Row]:
    """Idle pass cost and beat RSS with 1k, 10k, 100k stored entries (none due)."""
    sizes = (1_000, 10_000) if cfg.quick else (1_000, 10_000, 100_000)
    rounds = 300 if cfg.quick else 1000
    found: dict[str, dict[int, dict[str, float]]] = {s: {} for s in SYSTEMS}
    for system in SYSTEMS:
        for size in sizes:
            with run(system, cfg.tmp, f"scale-{system}-{size}", loglevel=cfg.loglevel) as current:
                first = _t0(3600)  # nothing due for an hour
                specs = [Spec(f"scale-{i:06d}", first + i, 86400) for i in range(size)]
                load = current.load(specs)
                began = time.monotonic()
                current.start_beats(1)
                ready = time.monotonic() - began
                time.sleep(1.0)
                beat = current.beats[0]
                rss, hwm = beat.status_kib("VmRSS"), beat.status_kib("VmHWM")
                idle = (_idle_pass_periodiq if system == "periodiq" else _idle_pass_redbeat)(
                    current, rounds
                )
                wait_idle([beat], timeout=10)
                rss_after = beat.status_kib("VmRSS")
            found[system][size] = {
                "load_s": load,
                "ready_s": ready,
                "rss_mib": (rss or 0) / 1024,
                "hwm_mib": (hwm or 0) / 1024,
                "rss_after_mib": (rss_after or 0) / 1024,
                "idle_p50_us": pct(idle, 50),
                "idle_p99_us": pct(idle, 99),
            }
            cfg.log(f"scale {LABEL[system]} {size:,}: {json.dumps(found[system][size])}")
    cfg.details["scale"] = {s: {str(k): v for k, v in d.items()} for s, d in found.items()}
    rows = []
    for size in sizes:
        p, r = found["periodiq"][size], found["redbeat"][size]
        rows.append(
            Row(
                "scale",
                f"idle pass p50 (µs), {size:,} entries",
                p["idle_p50_us"],
                r["idle_p50_us"],
                None,
                _versus(p["idle_p50_us"], r["idle_p50_us"], "RedBeat"),
                fmt="{:.0f}",
            )
        )
    for size in sizes:
        p, r = found["periodiq"][size], found["redbeat"][size]
        target = _target(p["rss_mib"] <= 80, "≤ 80 MiB") if size == 100_000 else ""
        rows.append(
            Row(
                "scale",
                f"beat RSS (MiB), {size:,} entries",
                p["rss_mib"],
                r["rss_mib"],
                None,
                _versus(p["rss_mib"], r["rss_mib"], "RedBeat"),
                target,
                "{:.1f}",
            )
        )
    for size in sizes:
        p, r = found["periodiq"][size], found["redbeat"][size]
        rows.append(
            Row(
                "scale",
                f"beat peak RSS, VmHWM (MiB), {size:,}",
                p["hwm_mib"],
                r["hwm_mib"],
                fmt="{:.1f}",
            )
        )
    big = sizes[-1]
    rows.append(
        Row(
            "scale",
            f"beat start until idle (s), {big:,}",
            found["periodiq"][big]["ready_s"],
            found["redbeat"][big]["ready_s"],
            fmt="{:.1f}",
        )
    )
    rows.append(
        Row(
            "scale",
            f"load {big:,} entries (s)",
            found["periodiq"][big]["load_s"],
            found["redbeat"][big]["load_s"],
            fmt="{:.1f}",
        )
    )
    return rows


# ---------------------------------------------------------------------- failover


def _kill_periodiq_claimer(current: Run, at: float) -> tuple[str, int]:
    """SIGKILL a beat 0.1 s into publishing a batch it claimed after ``at``.

    Returns the beat's id and how many claims it left in flight.
    """
    client = current.client
    pids = current.beat_ids()
    sleep_until(at - 0.05)
    deadline = time.monotonic() + 3
    owner = None
    while owner is None and time.monotonic() < deadline:
        found = _claims(client)
        if found:
            owner = json.loads(next(iter(found.values())))["owner"]
    if owner is None:
        raise RuntimeError("no claim seen to kill its beat")
    victim = next(p for p in current.beats if pids.get(p.pid) == owner)
    time.sleep(0.1)  # some of its claimed ticks are published, the rest are not
    victim.kill()
    claims = _claims(client).values()
    orphans = sum(1 for raw in claims if json.loads(raw)["owner"] == owner)
    return owner, orphans


def _claims(client: Any) -> dict[str, str]:
    """Every claim in flight, over the schedule's partitions (tick id -> claim JSON)."""
    from celery_periodiq.protocol.keys import Keys

    found: dict[str, str] = {}
    for part in Keys("periodiq", 16).all():
        found.update(client.hgetall(part.ticks))
    return found


def failover(cfg: Config) -> list[Row]:
    """Three beats, one SIGKILLed in the middle of publishing a burst."""
    count, every, rounds, lease = 1_000, 5.0, 5, 2.0
    found: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        options: dict[str, Any] = {"lease": lease}
        if system == "redbeat":
            # The closest RedBeat has to a lease: its lock expires 2 s after the last
            # extension, and standbys retry the lock every loop interval (1 s).
            options.update(lock_timeout=lease, max_interval=1.0)
        with run(
            system, cfg.tmp, f"failover-{system}", loglevel=cfg.loglevel, **options
        ) as current:
            current.start_beats(3)
            t0 = _t0(3)
            specs = [Spec(f"fail-{i:05d}", t0, every) for i in range(count)]
            current.load([_warmup(t0), *specs])
            kill_at = t0 / 1000 + every
            if system == "periodiq":
                victim, orphans = _kill_periodiq_claimer(current, kill_at)
            else:
                sleep_until(kill_at)
                before = current.listener.received()
                current.listener.wait_received(before + 50, 5)
                current.beats[0].kill()  # the first RedBeat beat holds the lock
                victim, orphans = current.beats[0].name, -1
            killed = time.time()
            end = t0 / 1000 + every * (rounds - 1)
            sleep_until(end + lease + 2)
            messages = _of(current.listener.stop(), "fail-")
        stats = _failover_stats(messages, system, t0, every, rounds, count, killed)
        stats["orphans"] = float(orphans)
        found[system] = stats
        cfg.log(f"failover {LABEL[system]} (killed {victim}): {json.dumps(stats)}")
    cfg.details["failover"] = found
    p, r = found["periodiq"], found["redbeat"]
    return [
        Row("failover", "ticks lost (3 beats, 1 SIGKILLed mid-burst)", p["lost"], r["lost"],
            None, "", _target(p["lost"] == 0, "0"), "{:.0f}"),
        Row("failover", f"max extra delay of a tick (ms), lease {lease:g} s", p["extra_ms"],
            r["extra_ms"],
            None, "", _target(p["extra_ms"] <= lease * 1000, f"≤ {lease * 1000:.0f} ms"),
            "{:,.0f}"),
        Row("failover", "ticks the killed beat left in flight (taken over)", p["orphans"], "–",
            fmt="{:.0f}"),
        Row("failover", "ticks sent twice (periodiq: same task id, the worker drops it)",
            p["duplicates"], r["duplicates"], fmt="{:.0f}"),
    ]  # fmt: skip


def _failover_stats(
    messages: Sequence[Message],
    system: str,
    t0: int,
    every: float,
    rounds: int,
    count: int,
    killed: float,
) -> dict[str, float]:
    """Lost ticks, and each entry's extra delay: its lateness in the round hit by
    the kill minus its own median lateness in the other rounds."""
    first = _first_arrivals(messages)
    by_entry: dict[str, list[Message]] = defaultdict(list)
    for m in first.values():
        by_entry[m.entry].append(m)
    extras = []
    for entry_messages in by_entry.values():
        hit = [m.lateness_ms for m in entry_messages if killed <= m.arrival < killed + every]
        normal = [
            m.lateness_ms for m in entry_messages if not killed - 0.5 <= m.arrival < killed + every
        ]
        if hit and normal:
            extras.append(max(hit) - statistics.median(normal))
    stats = {
        "extra_ms": max(extras, default=math.nan),
        "extra_p50_ms": pct(extras, 50),
        "duplicates": float(_duplicates(messages, system)),
    }
    if system == "periodiq":
        expected = {
            (f"fail-{i:05d}", t0 + round(k * every * 1000))
            for i in range(count)
            for k in range(rounds)
        }
        stats["lost"] = float(len(expected - set(first)))
    else:
        # RedBeat's ticks drift, so count gaps: a gap of about k intervals lost k - 1 ticks.
        lost = 0
        for entry_messages in by_entry.values():
            times = sorted(m.arrival for m in entry_messages)
            for a, b in itertools.pairwise(times):
                lost += max(round((b - a) / every) - 1, 0)
        stats["lost"] = float(lost + count - len(by_entry))
    return stats


# ---------------------------------------------------------------------- slow


def slow(cfg: Config) -> list[Row]:
    """Publishing a claimed batch takes longer than the lease: a broker 5 ms per message."""
    count = 1_000 if cfg.quick else 2_000
    delay, lease = 0.005, 1.0
    found: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        options: dict[str, Any] = {"lease": lease, "broker_delay": delay}
        if system == "redbeat":
            # RedBeat's own default: lock timeout = 5 × loop interval.
            options.update(max_interval=1.0, lock_timeout=5.0)
        with run(system, cfg.tmp, f"slow-{system}", loglevel=cfg.loglevel, **options) as current:
            current.start_beats(2)
            t0 = _t0(3)
            specs = [Spec(f"slow-{i:05d}", t0, 3600) for i in range(count)]
            current.load([_warmup(t0), *specs])
            sleep_until(t0 / 1000)
            held: dict[str, list[float]] = {}
            taken = 0
            client = current.client
            deadline = time.monotonic() + count * delay + 60
            last, since = -1, time.monotonic()
            while time.monotonic() < deadline:
                received = current.listener.received()
                if received != last:
                    last, since = received, time.monotonic()
                elif received >= count + 1 and time.monotonic() - since > 3:
                    break  # all there, and no late duplicate for 3 s
                if system == "periodiq":
                    now = time.monotonic()
                    for tick_id, raw in _claims(client).items():
                        held.setdefault(tick_id, [now, now])[1] = now
                        taken = max(taken, json.loads(raw).get("taken", 0))
                time.sleep(0.05)
            survivors = sum(1 for beat in current.beats if beat.alive)
            messages = _of(current.listener.stop(), "slow-")
        stats = {
            "received": float(len(messages)),
            "duplicates": float(_duplicates(messages, system)),
            "missing": float(count - len({m.entry for m in messages})),
            "beats_alive": float(survivors),
            "seconds": (max(m.arrival for m in messages) - t0 / 1000) if messages else math.nan,
        }
        if system == "periodiq":
            stats["max_claim_held_s"] = max((b - a for a, b in held.values()), default=0.0)
            stats["takeovers"] = float(taken)
        found[system] = stats
        cfg.log(f"slow {LABEL[system]}: {json.dumps(stats)}")
    cfg.details["slow"] = found
    p, r = found["periodiq"], found["redbeat"]
    return [
        Row("slow", f"duplicate messages ({count:,} ticks, 2 beats, broker 5 ms/msg)",
            p["duplicates"], r["duplicates"], None, "", _target(p["duplicates"] == 0, "0"),
            "{:.0f}"),
        Row("slow", "ticks missing", p["missing"], r["missing"], fmt="{:.0f}"),
        Row("slow", f"longest claim held (s), lease {lease:g} s / RedBeat lock 5 s",
            p.get("max_claim_held_s", math.nan), "–", fmt="{:.1f}"),
        Row("slow", "beats still alive at the end (of 2)", p["beats_alive"], r["beats_alive"],
            fmt="{:.0f}"),
    ]  # fmt: skip


SCENARIOS: dict[str, Callable[[Config], list[Row]]] = {
    "rest": rest,
    "burst": burst,
    "replicated": replicated,
    "spread": spread,
    "spread-large": spread_large,
    "scale": scale,
    "failover": failover,
    "slow": slow,
}
