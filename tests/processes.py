"""Run real ``celery beat`` and ``celery worker`` processes for tests, and wait on conditions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import redis
from celery import Celery as CeleryApp
from redis.cluster import RedisCluster

from celery_periodiq import Periodiq, periodiq

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "tests" / "apps"
FAKETIME_SITE = ROOT / "tests" / "faketime_site"
CELERY = str(Path(sys.executable).with_name("celery"))
"""The ``celery`` executable the package's entry points were installed for."""
T = TypeVar("T")


def api_for(
    redis_url: str,
    broker_url: str,
    app_name: str = "periodiq_app",
    clustered: bool = False,
    **redis_options: Any,
) -> Periodiq:
    """The runtime API of an app named like the test processes' app (``tests/apps``), so
    it shares their schedule, pointed at the test's Redis (or Redis Cluster) and broker."""
    app = CeleryApp(app_name, broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_redis_cluster = clustered
    app.conf.periodiq_redis_options = redis_options
    api = periodiq(app)
    OPENED.append(api)
    return api


OPENED: list[Periodiq] = []
"""The APIs :func:`api_for` made: ``tests/conftest.py`` closes their Redis clients after
each test. One a test left open was found only by the garbage collector's last pass,
after the last test: an unclosed socket then failed the whole run."""


def close_opened() -> None:
    """Close the Redis clients and the apps of the APIs :func:`api_for` made."""
    while OPENED:
        api = OPENED.pop()
        with contextlib.suppress(Exception):  # closed already, or its Redis gone
            api.store.client.close()
        with contextlib.suppress(Exception):  # its broker connections
            api.app.close()


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_while_growing(
    count: Callable[[], int], target: int, stalled: float, what: str, interval: float = 1.0
) -> int:
    """Poll ``count`` until it reaches ``target``; fail naming ``what`` once it has not
    grown for ``stalled`` seconds. A loaded machine makes it slow; only a stall fails it."""
    best, grew = count(), time.monotonic()
    while best < target:
        time.sleep(interval)
        now = count()
        if now > best:
            best, grew = now, time.monotonic()
        elif time.monotonic() - grew > stalled:
            raise AssertionError(
                f"no progress for {stalled} s waiting for {what}: {best} of {target}"
            )
    return best


def _libfaketime() -> Path | None:
    """libfaketime's library where the ``faketime`` package puts it (Debian's multiarch
    directory, or a plain one)."""
    for pattern in ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/*lib/faketime/libfaketime.so.1"):
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        if found:
            return found[0]
    return None


LIBFAKETIME = _libfaketime()


def launch(prefix: list[str] | None, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command prefix and environment of a process run with ``prefix``.

    ``["faketime", "-f", OFFSET]`` runs it with libfaketime preloaded (``FAKETIME=OFFSET``),
    not through the ``faketime`` wrapper. The wrapper makes a semaphore named by its pid
    and removes it when it exits; one the tests kill leaves it behind, and a later wrapper
    given the same pid fails ("sem_open: File exists") and runs nothing: CI saw a beat
    that never started. libfaketime itself takes such a leftover in its stride. The
    process also loads ``tests/faketime_site/sitecustomize.py``, which mends its
    ``time.sleep``.
    """
    if not prefix or prefix[0] != "faketime":
        return prefix or [], env
    path = os.pathsep.join(filter(None, [str(FAKETIME_SITE), env.get("PYTHONPATH", "")]))
    env = {**env, "PYTHONPATH": path}
    if LIBFAKETIME is None or prefix[1:2] != ["-f"] or len(prefix) != 3:
        return prefix, env  # the wrapper, as given
    return [], {**env, "LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": prefix[2]}


class Celery:
    """One ``celery`` subprocess with its log in a file."""

    def __init__(
        self, args: list[str], env: dict[str, str], log: Path, prefix: list[str] | None = None
    ) -> None:
        self.args = args
        self.env = env
        self.log = log
        self.prefix = prefix or []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Celery:
        handle = self.log.open("ab")
        prefix, env = launch(self.prefix, self.env)
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "celery", *self.args],
            env=env, cwd=APPS, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        handle.close()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.running and self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM and wait, as a clean shutdown would."""
        if self.running and self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Cluster:
    """Beats and workers of ``tests/apps/periodiq_app.py`` sharing one schedule Redis."""

    def __init__(
        self, tmp: Path, redis_url: str, broker_url: str, app: str = "periodiq_app", **settings: Any
    ) -> None:
        self.tmp = tmp
        self.app = app
        self.redis_url = redis_url
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(APPS), str(ROOT)]),
            "TEST_REDIS_URL": redis_url,
            "TEST_BROKER_URL": broker_url,
            "TEST_LEASE": str(settings.pop("lease", 2)),
            "TEST_BEAT_SCHEDULE": json.dumps(settings.pop("beat_schedule", {})),
        }
        self.env.update({key: str(value) for key, value in settings.items()})
        self.processes: list[Celery] = []
        self.clustered = self.env.get("TEST_REDIS_CLUSTER") == "1"
        runs_url = self.env.get("TEST_RUNS_URL")
        self.client: Any = (
            redis.Redis.from_url(runs_url, decode_responses=True)
            if runs_url
            else RedisCluster.from_url(redis_url.split(";")[0], decode_responses=True)
            if self.clustered
            else redis.Redis.from_url(redis_url, decode_responses=True)
        )

    def beat(
        self,
        name: str = "beat",
        prefix: list[str] | None = None,
        app: str | None = None,
        **env: str,
    ) -> Celery:
        """A ``celery beat`` of this cluster's app (or of ``app``: another module, as a
        second version of the code in a rolling deploy)."""
        process = Celery(
            ["-A", app or self.app, "beat", "--loglevel=INFO",
             "-s", str(self.tmp / f"{name}-schedule")],
            {**self.env, **env}, self.tmp / f"{name}.log", prefix,
        )  # fmt: skip
        self.processes.append(process)
        return process.start()

    def worker(
        self,
        name: str = "worker",
        *extra: str,
        pool: str = "threads",
        prefix: list[str] | None = None,
        **env: str,
    ) -> Celery:
        """A ``celery worker`` of this cluster's app; ``prefix`` runs it under another
        command (``faketime``, for a host whose clock is off)."""
        process = Celery(
            ["-A", self.app, "worker", "--loglevel=INFO", "-P", pool, "-c", "4",
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", *extra],
            {**self.env, **env}, self.tmp / f"{name}.log", prefix,
        )  # fmt: skip
        self.processes.append(process)
        return process.start()

    def cli(
        self, *args: str, input: str | None = None, prefix: list[str] | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``celery -A APP periodiq ARGS`` in a subprocess, as a user would type it."""
        command, environment = launch(prefix, {**self.env, "COLUMNS": "80", **env})
        return subprocess.run(
            [*command, CELERY, "-A", self.app, "periodiq", *args],
            env=environment, cwd=APPS, input=input,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    def runs(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.client.lrange("runs", 0, -1)]

    def runs_of(self, entry: str) -> list[dict[str, Any]]:
        return [run for run in self.runs() if run.get("entry") == entry]

    def api(self) -> Periodiq:
        """The runtime API of this cluster's app, on its schedule (and Redis Cluster)."""
        options = json.loads(self.env.get("TEST_REDIS_OPTIONS", "{}"))
        return api_for(
            self.redis_url, self.env["TEST_BROKER_URL"], self.app, self.clustered, **options
        )

    def firing(self, names: list[str], task: str = "record") -> Periodiq:
        """Add ``names`` as 1 s entries of the recording ``task`` (owner "tests"), start
        a worker and two beats, and wait until both beats are ready and each entry ran;
        returns the API."""
        api = self.api()
        for name in names:
            api.add(name, task, every=1, owner="tests")
        worker = self.worker()
        beats = [self.beat("beat-1"), self.beat("beat-2")]
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        wait_for(lambda: all(" ready; " in beat.output() for beat in beats), 60,
                 "both beats to be ready")  # fmt: skip
        wait_for(lambda: all(self.runs_of(name) for name in names), 30, "a run of each")
        return api

    def twice(self) -> list[tuple[str, int]]:
        """The (entry, tick) pairs that ran more than once."""
        seen: set[tuple[str, int]] = set()
        again = []
        for run in self.runs():
            tick = (run["entry"], run["tick"])
            if tick in seen:
                again.append(tick)
            seen.add(tick)
        return again

    def logs(self) -> str:
        """Each process's log: its warnings and errors from the start (the last 40), then
        its last 4,000 characters."""
        return "\n".join(_log_of(p.log.name, p.output()) for p in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


def _log_of(name: str, text: str) -> str:
    tail = text[-4000:]
    head = text[: len(text) - len(tail)]
    notable = [line for line in head.splitlines() if "WARNING/" in line or "ERROR/" in line]
    said = "".join(f"{line}\n" for line in notable[-40:])
    return f"--- {name}\n" + (f"{said}[...]\n" if said else "") + tail


@contextmanager
def cluster(
    tmp: Path, redis_url: str, broker_url: str, app: str = "periodiq_app", **settings: Any
) -> Iterator[Cluster]:
    """A :class:`Cluster` whose processes are stopped afterwards, whatever happens; when
    the test fails inside it, their logs are printed (pytest shows them with the failure:
    a CI run keeps no other trace of them)."""
    running = Cluster(tmp, redis_url, broker_url, app, **settings)
    passed = False
    try:
        yield running
        passed = True
    finally:
        running.stop()
        if not passed:
            print(running.logs())
