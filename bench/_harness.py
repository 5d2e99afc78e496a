"""Plumbing for bench/beat.py: private Redis servers, real ``celery beat`` processes,
the broker listener, and the two schedulers behind one small interface.

Every run gets its own pair of ``redis-server`` processes (the schedule's and
the broker's) from :class:`celery_periodiq.localredis.LocalRedis`, on free
loopback ports, so nothing here ever touches a Redis you run; with ``cluster`` the
schedule's is a 3-master :class:`~celery_periodiq.localredis.LocalRedisCluster`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from _machine import cpu_seconds

from celery_periodiq.localredis import LocalRedis, LocalRedisCluster

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TASK = "bench.noop"


# ------------------------------------------------------------------ statistics


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between closest ranks; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def from_ms(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ------------------------------------------------------------------ processes


def _python() -> str:
    return sys.executable


class Proc:
    """One child process in its own session, with its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, stdout_pipe: bool = False, stdout_file: Path | None = None) -> Proc:
        """Start it; its output goes to the log, but stdout to a pipe with ``stdout_pipe``
        or to ``stdout_file`` (truncated) when given."""
        handle = self.log.open("ab")
        out = stdout_file.open("wb") if stdout_file is not None else None
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=BENCH,
            stdout=subprocess.PIPE if stdout_pipe else out or handle,
            stderr=handle,
            start_new_session=True,
        )
        handle.close()
        if out is not None:
            out.close()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU time so far (0 once it has exited)."""
        return cpu_seconds(self.pid) or 0.0

    def status_kib(self, key: str) -> int | None:
        """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``)."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def wait_peak(self, timeout: float) -> tuple[int, int] | None:
        """Wait until it exits: its exit code and peak RSS in KiB (``VmHWM``, read every
        5 ms until it exits: a peak in its last 5 ms can be missed; ``wait4``'s
        ``ru_maxrss`` cannot serve, it counts the forking parent's RSS too); None if
        still running after ``timeout`` s."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        peak = 0
        while True:
            peak = max(peak, self.status_kib("VmHWM") or 0)
            code = self.process.poll()
            if code is not None:
                return code, peak
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)

    def signal_group(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.alive and self.process is not None:
            self.signal_group(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM and wait; SIGKILL if it does not go."""
        if self.alive and self.process is not None:
            self.signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self, tail: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-tail:]


def wait_idle(procs: Iterable[Proc], timeout: float = 60.0, quiet: float = 0.5) -> float:
    """Wait until no process in ``procs`` uses CPU for ``quiet`` s; returns seconds waited."""
    procs = list(procs)
    began = time.monotonic()
    before = [p.cpu_seconds() for p in procs]
    while time.monotonic() - began < timeout:
        time.sleep(quiet)
        after = [p.cpu_seconds() for p in procs]
        for p in procs:
            if not p.alive:
                raise RuntimeError(f"{p.name} exited early:\n{p.output()}")
        if all(b - a <= 0.02 for a, b in zip(before, after, strict=True)):
            return time.monotonic() - began
        before = after
    raise RuntimeError(f"{[p.name for p in procs]} still busy after {timeout} s")


def wait_for(condition: Any, timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def _wait_in_sync(primary: LocalRedis, timeout: float = 30.0) -> None:
    """Wait until ``primary`` has an online replica."""
    client = redis.Redis(port=primary.port, decode_responses=True)
    deadline = time.monotonic() + timeout
    try:
        while client.info("replication").get("slave0", {}).get("state") != "online":
            if time.monotonic() > deadline:
                raise RuntimeError(f"no replica of {primary.url} in sync after {timeout} s")
            time.sleep(0.05)
    finally:
        client.close()


def sleep_until(epoch: float) -> None:
    delay = epoch - time.time()
    if delay > 0:
        time.sleep(delay)


# ------------------------------------------------------------------ messages


@dataclass(frozen=True, slots=True)
class Message:
    """One message as the listener saw it arrive in the broker."""

    seq: int
    """Publish order (the list is drained oldest first)."""
    arrival: float
    """Epoch seconds when the listener popped it (an upper bound of when it arrived)."""
    task_id: str
    entry: str
    due_ms: int | None
    """The tick's due instant: periodiq_tick, or RedBeat's own due (bench_due)."""

    @property
    def lateness_ms(self) -> float:
        assert self.due_ms is not None
        return self.arrival * 1000 - self.due_ms


class Listener:
    """bench/_listener.py as a child process draining the broker's ``celery`` list."""

    def __init__(self, tmp: Path, broker_url: str) -> None:
        self.broker_url = broker_url
        self.out = tmp / "messages.jsonl"
        self.client = redis.Redis.from_url(broker_url)
        self.proc = Proc(
            "listener",
            [_python(), str(BENCH / "_listener.py"), "--url", broker_url, "--out", str(self.out)],
            dict(os.environ),
            tmp / "listener.log",
        )

    def start(self) -> Listener:
        self.proc.start(stdout_pipe=True)
        assert self.proc.process is not None
        assert self.proc.process.stdout is not None
        line = self.proc.process.stdout.readline()
        if b"ready" not in line:
            raise RuntimeError(f"listener did not start:\n{self.proc.output()}")
        return self

    def received(self) -> int:
        return int(self.client.get("bench:received") or 0)

    def wait_received(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` messages arrived; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.received() < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def wait_settled(self, count: int, timeout: float, quiet: float = 1.5) -> bool:
        """Wait for ``count`` messages, then until none arrives for ``quiet`` s.

        Duplicates can make the count reach ``count`` early; the quiet period
        lets the rest arrive. False when ``count`` was not reached in time.
        """
        deadline = time.monotonic() + timeout
        reached = self.wait_received(count, timeout)
        last, since = self.received(), time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.received()
            if now != last:
                last, since = now, time.monotonic()
        return reached

    def stop(self) -> list[Message]:
        self.proc.signal_group(signal.SIGTERM)
        assert self.proc.process is not None
        self.proc.process.wait(timeout=60)
        messages = []
        with self.out.open() as lines:
            for seq, line in enumerate(lines):
                arrival, task_id, entry, due, _task = json.loads(line)
                messages.append(Message(seq, arrival, task_id, entry or "?", due))
        return messages


# ------------------------------------------------------------------ schedulers


@dataclass(frozen=True, slots=True)
class Spec:
    """One benchmark entry: an interval schedule whose first tick is due at ``first_ms``."""

    name: str
    first_ms: int
    every: float
    """Seconds between ticks."""


@dataclass
class Run:
    """One system under test with its own Redis pair, listener and beats."""

    system: str
    """``periodiq`` or ``redbeat``."""
    tmp: Path
    schedule_redis: LocalRedis | LocalRedisCluster
    broker_redis: LocalRedis
    broker_url: str
    """What the beats publish to (the broker, or the slow proxy in front of it)."""
    listener: Listener
    env: dict[str, str]
    loglevel: str
    beats: list[Proc] = field(default_factory=list)
    _extra: list[Proc] = field(default_factory=list)

    @property
    def cluster(self) -> bool:
        return isinstance(self.schedule_redis, LocalRedisCluster)

    @property
    def schedule_url(self) -> str:
        return self.schedule_redis.url

    @property
    def client(self) -> Any:
        if self.cluster:
            return redis.RedisCluster.from_url(self.schedule_url, decode_responses=True)
        return redis.Redis.from_url(self.schedule_url, decode_responses=True)

    # beats

    def start_beat(self) -> Proc:
        index = len(self.beats)
        module = "_periodiq_app" if self.system == "periodiq" else "_redbeat_app"
        proc = Proc(
            f"{self.system}-beat{index}",
            [_python(), "-m", "celery", "-A", module, "beat", f"--loglevel={self.loglevel}",
             "-s", str(self.tmp / f"beat{index}-schedule")],
            self.env,
            self.tmp / f"beat{index}.log",
        )  # fmt: skip
        self.beats.append(proc.start())
        return proc

    def start_beats(self, count: int) -> None:
        """Start ``count`` beats and wait until they are up and idle."""
        client = self.client
        for index in range(count):
            proc = self.start_beat()
            if self.system == "periodiq":
                wait_for(
                    lambda n=index + 1: client.zcard("{periodiq}:beats") >= n,
                    60,
                    f"{proc.name} to register",
                )
            elif index == 0:
                # The first RedBeat beat takes the lock; the others wait for it.
                wait_for(lambda: client.exists("redbeat::lock"), 60, "RedBeat's lock")
            wait_idle([proc])

    def beat_ids(self) -> dict[int, str]:
        """celery_periodiq beat id by process id (the id is host:pid:random)."""
        ids = self.client.zrange("{periodiq}:beats", 0, -1)
        return {int(beat_id.split(":")[-2]): beat_id for beat_id in ids}

    # entries

    def load(self, specs: Sequence[Spec]) -> float:
        """Store ``specs`` the fast way for this system; returns seconds taken."""
        began = time.perf_counter()
        if self.system == "periodiq":
            _load_periodiq(self.schedule_url, self.broker_url, specs, cluster=self.cluster)
        else:
            _load_redbeat(self.schedule_url, self.broker_url, specs)
        return time.perf_counter() - began

    def extra(self, proc: Proc) -> Proc:
        self._extra.append(proc)
        return proc

    def close(self) -> None:
        for proc in [*self.beats, *self._extra]:
            proc.stop()


def _load_periodiq(
    schedule_url: str, broker_url: str, specs: Sequence[Spec], *, cluster: bool = False
) -> None:
    """The API's bulk path: ``Periodiq.add_many``, 50,000 entries per call."""
    from celery import Celery

    from celery_periodiq import periodiq

    app = Celery("bench-load", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = schedule_url
    app.conf.periodiq_key_prefix = "periodiq"  # the bench apps share one schedule
    app.conf.periodiq_redis_cluster = cluster
    app.task(name=TASK)(lambda: None)  # known to the app: add_many checks the name
    api = periodiq(app)
    for chunk in chunks(specs, 50_000):
        created = api.add_many(
            {"name": s.name, "task": TASK, "every": s.every, "start_at": from_ms(s.first_ms)}
            for s in chunk
        )
        if len(created) != len(chunk):
            raise RuntimeError(f"periodiq add_many: {len(created)} of {len(chunk)} created")
    api.store.client.close()


def redbeat_app(schedule_url: str, broker_url: str) -> Any:
    from celery import Celery
    from redbeat.schedulers import ensure_conf

    app = Celery("bench-redbeat", broker=broker_url, set_as_current=False)
    app.conf.redbeat_redis_url = schedule_url
    app.conf.result_expires = None
    ensure_conf(app)
    return app


def _load_redbeat(schedule_url: str, broker_url: str, specs: Sequence[Spec]) -> None:
    """What ``RedBeatSchedulerEntry.save()`` writes, for many entries per pipeline."""
    from celery.schedules import schedule
    from redbeat.decoder import RedBeatJSONEncoder, to_timestamp
    from redbeat.schedulers import RedBeatSchedulerEntry

    app = redbeat_app(schedule_url, broker_url)
    conf = app.redbeat_conf
    client = redis.Redis.from_url(schedule_url, decode_responses=True)
    for chunk in chunks(specs, 1000):
        pipe = client.pipeline(transaction=False)
        for s in chunk:
            every = timedelta(seconds=s.every)
            entry = RedBeatSchedulerEntry(
                name=s.name,
                task=TASK,
                schedule=schedule(run_every=every, app=app),
                args=[],
                kwargs={},
                options={},
                app=app,
                last_run_at=from_ms(s.first_ms) - every,
            )
            definition = {
                "name": entry.name, "task": entry.task, "args": entry.args,
                "kwargs": entry.kwargs, "options": entry.options, "schedule": entry.schedule,
                "enabled": entry.enabled,
            }  # fmt: skip
            meta = {"last_run_at": entry.last_run_at}
            pipe.hset(entry.key, "definition", json.dumps(definition, cls=RedBeatJSONEncoder))
            pipe.hsetnx(entry.key, "meta", json.dumps(meta, cls=RedBeatJSONEncoder))
            # The score RedBeat writes right after a run at last_run_at (its ``score``
            # property is only right when computed at that moment): due, whole seconds.
            pipe.zadd(conf.schedule_key, {entry.key: to_timestamp(entry.last_run_at + every)})
        pipe.execute()
    client.close()


@contextlib.contextmanager
def run(
    system: str,
    tmp_root: Path,
    label: str,
    *,
    loglevel: str = "WARNING",
    lease: float = 10.0,
    max_interval: float | None = None,
    lock_timeout: float | None = None,
    broker_delay: float | None = None,
    replica_acks: int | None = None,
    listen: bool = True,
    broker: str | None = None,
    queue: str | None = None,
    cluster: bool = False,
) -> Iterator[Run]:
    """Fresh Redis servers, a listener and (later) beats for one system; all stopped after.
    With ``replica_acks`` (0 or more) the schedule's Redis has a replica, in sync before
    the beats start, and celery_periodiq's beats wait for that many. Without ``listen``
    the listener is not started (nothing drains the queue); with ``broker`` (a URL) the
    beats publish there instead of to the private broker Redis, to the queue ``queue``
    (Celery's ``task_default_queue``) when given. With ``cluster`` the schedule's store
    is a 3-master Redis Cluster without replicas (celery_periodiq only)."""
    tmp = tmp_root / label
    tmp.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        schedule_redis: LocalRedis | LocalRedisCluster = stack.enter_context(
            LocalRedisCluster(tmp / "schedule-cluster", masters=3, replicas=0)
            if cluster
            else LocalRedis(tmp / "schedule-redis")
        )
        if isinstance(schedule_redis, LocalRedisCluster):
            # Its nodes keep an append-only file fsynced on every write (for the failover
            # tests); here no persistence, as the single Redis servers of the other runs.
            for node in schedule_redis.nodes:
                with redis.Redis(port=node.port) as client:
                    client.config_set("appendonly", "no")
        if replica_acks is not None:
            replica = stack.enter_context(LocalRedis(
                tmp / "schedule-replica",
                extra_args=["--replicaof", "127.0.0.1", str(schedule_redis.port)],
            ))  # fmt: skip
            _wait_in_sync(schedule_redis)
            del replica
        broker_redis = stack.enter_context(LocalRedis(tmp / "broker-redis"))
        listener = Listener(tmp, broker_redis.url)
        if listen:
            listener.start()
        stack.callback(listener.proc.stop)
        broker_url = broker or broker_redis.url
        proxy = None
        if broker_delay is not None:
            proxy = Proc(
                "slowproxy",
                [_python(), str(BENCH / "_slowproxy.py"), "--upstream", str(broker_redis.port),
                 "--delay", str(broker_delay)],
                dict(os.environ),
                tmp / "slowproxy.log",
            ).start(stdout_pipe=True)  # fmt: skip
            stack.callback(proxy.stop)
            assert proxy.process is not None
            assert proxy.process.stdout is not None
            port = int(proxy.process.stdout.readline().split()[1])
            broker_url = f"redis://127.0.0.1:{port}/0"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT)]),
            "BENCH_BROKER_URL": broker_url,
            "BENCH_REDIS_URL": schedule_redis.url,
            "BENCH_LEASE": str(lease),
        }
        if max_interval is not None:
            env["BENCH_MAX_INTERVAL"] = str(max_interval)
        if lock_timeout is not None:
            env["BENCH_LOCK_TIMEOUT"] = str(lock_timeout)
        if replica_acks is not None:
            env["BENCH_REPLICA_ACKS"] = str(replica_acks)
        if queue is not None:
            env["BENCH_QUEUE"] = queue
        if cluster:
            env["BENCH_REDIS_CLUSTER"] = "1"
        current = Run(
            system, tmp, schedule_redis, broker_redis, broker_url, listener, env, loglevel
        )
        stack.callback(current.close)
        yield current


def run_limit(
    tmp_root: Path, label: str, count: int, lead: float = 2.0, batch: int = 0
) -> tuple[list[Message], float]:
    """bench/_limit.py against a fresh broker; returns the messages and its own loop seconds."""
    tmp = tmp_root / label
    tmp.mkdir(parents=True, exist_ok=True)
    with LocalRedis(tmp / "broker-redis") as broker:
        listener = Listener(tmp, broker.url).start()
        try:
            at = time.time() + lead
            proc = Proc(
                "limit",
                [_python(), str(BENCH / "_limit.py"), "--broker", broker.url,
                 "--count", str(count), "--at", f"{at:.3f}", "--batch", str(batch)],
                dict(os.environ),
                tmp / "limit.log",
            ).start(stdout_pipe=True)  # fmt: skip
            assert proc.process is not None
            out, _ = proc.process.communicate(timeout=300)
            report = json.loads(out.decode().strip().splitlines()[-1])
            listener.wait_received(count + 1, 60)
        finally:
            messages = listener.stop()
    return messages, float(report["seconds"])
