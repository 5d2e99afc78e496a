"""bench/beat.py's ``boundary`` scenario on a Redis Cluster: ``--cluster-total`` entries,
``--due`` of them due at one instant (issue 29: 1,000,000 and 100,000, the last
message in the queue ≤ 0.5 s after the instant).

celery_periodiq alone, with 1 beat and then 2, each run on fresh servers: a 3-master
Redis Cluster (no replicas) holds the schedule, a single Redis is the broker. First
the entries not due at the instant (every 24 h, first due in an hour) are stored with
``add_many``; then the beats start (they find the whole schedule there), a warm-up
tick opens their broker connection, and the ``--due`` entries (interval 1 h) are
stored, all first due at one whole second ``--lead`` s (default 60) after storing
them is expected to end (at the rate the others were stored). From there it is
bench/_boundary.py's measurement: the queue's length every 2 ms, nothing consuming
it. Besides, the broker's count of staged messages (``periodiq:staged:count``) is
read every 20 ms until the instant, to show when the beats began staging and when
all were staged, and the beats' own logs (run at INFO) say how many messages each
released at the instant ("released N staged messages") and when it logged that.
CPU per tick is split at the instant as in bench/_boundary.py, for the beats, each
cluster master and the broker, and so is the count of commands the masters served
(the beats' claims, settlements, heartbeats, counts of what is due). Figures are printed, never
asserted.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from datetime import datetime
from typing import Any

import redis
from _boundary import _cap, _measure, _Meter, _show, _warmup
from _harness import Proc, Run, Spec, run, wait_for
from _queue_watch import RedisQueue
from _scenarios import Config, Row, _t0, _target

TARGET_MS = 500.0
"""Issue 29: the last of the ticks due at the instant in the queue this soon after it."""
RELEASED = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/[^\]]*\] periodiq: released (\d+) staged"
)


class _ClusterMeter(_Meter):
    """As bench/_boundary.py's, and the commands the masters served so far
    (``commands``, from ``INFO stats``: the beats' claims, settlements, counts of what
    is due, heartbeats; and this meter's own ``INFO``, one per master a reading)."""

    def __init__(self, procs: list[Proc], redis_urls: dict[str, str], masters: list[str]):
        super().__init__(procs, redis_urls)
        self.masters = masters

    def read(self) -> dict[str, float]:
        found = super().read()
        found["commands"] = 0.0
        for url in self.masters:
            with redis.Redis.from_url(url) as client:
                found["commands"] += int(client.info("stats")["total_commands_processed"])
        return found


class StagedCount:
    """The broker's count of staged messages, read every ``every`` s in a thread."""

    def __init__(self, url: str, key: str = "periodiq:staged:count", every: float = 0.02):
        self.client = redis.Redis.from_url(url)
        self.key, self.every = key, every
        self.samples: list[tuple[float, int]] = []
        """(epoch seconds of the reply, count) at each change."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> StagedCount:
        self._thread.start()
        return self

    def _watch(self) -> None:
        last = -1
        while not self._stop.is_set():
            n = max(int(self.client.get(self.key) or 0), 0)
            if n != last:
                self.samples.append((time.time(), n))
                last = n
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()

    def before_s(self, instant: float, k: int) -> float:
        """Seconds before ``instant`` the count first reached ``k`` (NaN: never)."""
        return next((instant - at for at, n in self.samples if n >= k), math.nan)

    @property
    def peak(self) -> int:
        return max((n for _, n in self.samples), default=0)


def _released(current: Run, instant: float) -> dict[str, float]:
    """What the beats' logs say they released: how many, and when each said so."""
    total, said = 0, []
    for beat in current.beats:
        for line in beat.log.read_text(errors="replace").splitlines():
            if found := RELEASED.match(line):
                at = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                total += int(found[2])
                said.append((at - instant) * 1000)
    return {
        "released": float(total),
        "release_logs": float(len(said)),
        "release_logged_first_ms": min(said, default=math.nan),
        "release_logged_last_ms": max(said, default=math.nan),
    }


def _on_cluster(cfg: Config, count: int, total: int, beats: int, lead: float) -> dict[str, Any]:
    """``beats`` real ``celery beat`` processes, the schedule of ``total`` entries on a
    3-master Redis Cluster, ``count`` of them due at one instant."""
    with run("periodiq", cfg.tmp, f"boundary-cluster-{beats}", loglevel="INFO",
             listen=False, cluster=True) as current:  # fmt: skip
        queue = RedisQueue(current.broker_redis.url)
        staging = StagedCount(current.broker_redis.url)
        try:
            later = round((time.time() + 3600) * 1000)
            rest = [Spec(f"later-{i:07d}", later, 86400) for i in range(total - count)]
            rest_s = current.load(rest)
            rate = len(rest) / rest_s if rest else 10_000.0
            cfg.log(f"cluster: {len(rest):,} entries stored in {rest_s:.1f} s ({rate:,.0f}/s)")
            began = time.monotonic()
            current.start_beats(beats)
            start_s = time.monotonic() - began
            current.load([_warmup()])
            wait_for(queue.length, 60, "the warm-up message")
            instant = _t0(2 + 1.5 * count / rate + lead) / 1000
            specs = [Spec(f"boundary-{i:06d}", round(instant * 1000), 3600) for i in range(count)]
            staging.start()
            due_s = current.load(specs)
            stored_lead = instant - time.time()
            cfg.log(f"cluster: {count:,} due stored in {due_s:.1f} s, {stored_lead:.1f} s ahead")
            purged = queue.purge()
            masters = current.schedule_redis.master_ports()  # type: ignore[union-attr]
            urls = [f"redis://127.0.0.1:{port}/0" for port in masters]
            roles = {"broker": current.broker_redis.url}
            roles.update({f"master{i}": url for i, url in enumerate(urls)})
            meter = _ClusterMeter(current.beats, roles, urls)
            stats, curve = _measure(
                queue, instant, count, meter, system="periodiq",
                prefix="boundary-", cap=_cap(count), every=0.002,
            )  # fmt: skip
            stats.update(_released(current, instant))
        finally:
            staging.stop()
            queue.close()
    stats["early"] += purged - 1
    stats.update(
        rest_load_s=rest_s, due_load_s=due_s, beats_start_s=start_s, lead_s=stored_lead,
        staged_first_s=staging.before_s(instant, 1),
        staged_all_s=staging.before_s(instant, count), staged_peak=float(staging.peak),
    )  # fmt: skip
    for role in ("before", "after"):
        # _measure gives every reading per tick, in millionths: back to calls
        stats[f"commands_{role}"] = stats.pop(f"commands_{role}_us") * count / 1e6
        stats[f"masters_{role}_us"] = sum(stats[f"master{i}_{role}_us"] for i in range(3))
    return {**stats, "curve": curve.thinned()}


def boundary_on_cluster(cfg: Config) -> list[Row]:
    """``--due`` of ``--cluster-total`` entries due at one instant, 1 beat and 2."""
    count = cfg.due or (5_000 if cfg.quick else 100_000)
    total = max(cfg.cluster_total or 0, count)
    lead = cfg.lead if cfg.lead is not None else 60.0
    found: dict[str, dict[str, Any]] = {}
    for beats in (1, 2):
        label = f"cluster-{beats}"
        try:
            found[label] = _on_cluster(cfg, count, total, beats, lead)
        except Exception as error:  # the other run's figures still count
            cfg.log(f"boundary {label} FAILED: {error!r}")
            found[label] = {"failed": repr(error)}
        found[label]["cap"] = _cap(count)
        cfg.log(f"boundary {label}: {json.dumps(found[label], default=str)[:2500]}")
    cfg.details["boundary_cluster"] = found
    ours = list(found.values())

    def row(metric: str, key: str, fmt: str, target: str = "") -> Row:
        return Row("boundary (Cluster)", metric, " / ".join(_show(s, key, fmt) for s in ours),
                   target=target)  # fmt: skip

    def cpu(metric: str, role: str) -> Row:
        def pair(stats: dict[str, Any]) -> str:
            if "failed" in stats:
                return "failed"
            before, after = (stats.get(f"{role}_{w}_us", math.nan) for w in ("before", "after"))
            return " + ".join("n/a" if math.isnan(v) else f"{v:.1f}" for v in (before, after))

        return Row("boundary (Cluster)", metric, " / ".join(pair(s) for s in ours))

    met = all(s.get("last_ms", math.inf) <= TARGET_MS for s in ours)
    early_ok = all(s.get("early") == 0 for s in ours if "failed" not in s)
    return [
        row(f"{count:,} of {total:,} entries due at one instant, schedule on a 3-master "
            "Cluster (1 beat / 2 beats): ms from it to the last message in the queue",
            "last_ms", "{:,.0f}", _target(met, f"≤ {TARGET_MS:.0f}")),
        row("ms from the instant to the first message", "first_ms", "{:,.1f}"),
        row("lateness p50 (ms), from the queue's length every 2 ms", "p50_ms", "{:,.0f}"),
        row("lateness p99 (ms)", "p99_ms", "{:,.0f}"),
        row("messages in the queue at the end (all in, or the cap)", "reached", "{:,.0f}"),
        row("messages in the queue before the instant", "early", "{:.0f}",
            _target(early_ok, "0")),
        row("duplicate messages (same task id)", "duplicates", "{:.0f}"),
        row("ticks missing", "missing", "{:.0f}"),
        row("beats alive at the end (of 1 / 2)", "alive", "{:.0f}"),
        row("s to store the entries not due (add_many)", "rest_load_s", "{:,.1f}"),
        row("s to store the entries due (add_many, beats running)", "due_load_s", "{:,.1f}"),
        row("s from storing them to the instant", "lead_s", "{:.1f}"),
        row("s from the beats' start until registered and idle", "beats_start_s", "{:.1f}"),
        row("s before the instant the broker held the first staged message", "staged_first_s",
            "{:.1f}"),
        row("s before the instant all were staged (n/a: never)", "staged_all_s", "{:.1f}"),
        row("most messages staged at once", "staged_peak", "{:,.0f}"),
        row("messages the beats' logs say they released at the instant", "released",
            "{:,.0f}"),
        row("ms from the instant to the last 'released' log line", "release_logged_last_ms",
            "{:,.0f}"),
        row("commands the masters served from storing the due ones to the instant",
            "commands_before", "{:,.0f}"),
        row("commands the masters served from the instant to the end", "commands_after",
            "{:,.0f}"),
        cpu("CPU µs per tick, the beats: before the instant + from it", "beats"),
        cpu("CPU µs per tick, the 3 masters together: before + from the instant", "masters"),
        *(cpu(f"CPU µs per tick, cluster master {i}: before + from the instant", f"master{i}")
          for i in range(3)),
        cpu("CPU µs per tick, the broker's Redis: before + from the instant", "broker"),
    ]  # fmt: skip
