"""One run of the demo: start the processes, drive the timeline, stop, account, print.

Imported by demo.py once ``REDIS_URL`` and ``PERIODIQ_DEMO`` are set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import redis

from celery_periodiq import Schedule, periodiq
from example_project import audit, channels, show
from example_project.main import app
from example_project.settings import KEY_PREFIX
from example_project.tally import Tally, Window, tally

__all__ = ["Session"]

ROOT = Path(__file__).resolve().parent.parent
QUEUES = ("celery", "sensors")
MARGIN = 2.0
"""Seconds: a tick due this close to the end may not have been claimed yet; it is not counted."""
TRIGGER_LEAD = 3.0
"""Seconds before a scheduled make-report tick that the manual run is triggered."""
CHANNEL = 42
HISTORY_OF = "make-report"
T = TypeVar("T")


class Process:
    """One ``celery`` subprocess in its own process group, its output in a log file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.args, self.env, self.log = name, args, env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "example_project", *self.args],
                env=self.env, cwd=self.log.parent, stdin=subprocess.DEVNULL, stdout=handle,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.running:
            os.killpg(self.pid, signum)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a clean shutdown); SIGKILL if it has not ended within ``timeout``."""
        if not self.running or self.process is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(10)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.running and self.process is not None:
            self.signal(signal.SIGKILL)
            self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Runtime:
    """The entry created at run time, remembered across its deletion."""

    name: str
    schedule: Schedule
    first_ms: int
    deleted_ms: int | None = None
    events: list[tuple[str, int | None]] | None = None


class Session:
    """The demo's processes, timeline and report."""

    def __init__(self, url: str, seconds: float, logs: Path, began: float) -> None:
        self.url, self.seconds, self.logs, self.began = url, seconds, logs, began
        self.api = periodiq(app)
        self.client = redis.Redis.from_url(url, decode_responses=True)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        self.env = {**os.environ, "PYTHONPATH": path}
        self.processes: dict[str, Process] = {}
        self.runtime: Runtime | None = None
        self.claims_at_kill: dict[str, int] = {}
        self.start_ms = self.stop_ms = 0
        self._trigger_tick: datetime | None = None

    # output

    def say(self, label: str, text: str) -> None:
        print(f"[{time.monotonic() - self.began:5.1f}s] {label:<7} {text}", flush=True)

    # processes

    def _start(self, name: str, *args: str) -> Process:
        process = Process(name, list(args), self.env, self.logs / f"{name}.log")
        self.processes[name] = process
        return process.start()

    def _wait(self, condition: Callable[[], T], timeout: float, what: str, *needed: Process) -> T:
        """Poll ``condition`` until it holds; fail with the logs if it times out or one of
        the ``needed`` processes exits."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            dead = [process.name for process in needed if not process.running]
            if dead or time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {p.log}\n{p.output()[-3000:]}" for p in self.processes.values()
                )
                problem = f"{dead[0]} exited" if dead else f"no {what} after {timeout:g} s"
                raise RuntimeError(f"{problem} (waiting for {what})\n{tails}")
            time.sleep(0.1)

    def stop_all(self) -> None:
        """Stop every process the demo started (idempotent)."""
        for process in self.processes.values():
            process.stop(timeout=10)

    # the run

    def run(self, json_path: Path | None) -> int:
        """Start, watch ``seconds``, stop, print; returns the exit status."""
        self.say("demo", f"two beats and a worker run example_project for {self.seconds:g} s "
                 "with fast schedules (PERIODIQ_DEMO=1)")  # fmt: skip
        for key in self.client.scan_iter(f"{{{KEY_PREFIX}}}:*"):
            self.client.delete(key)
        for key in self.client.scan_iter(f"example:{KEY_PREFIX}:*"):
            self.client.delete(key)
        worker = self._start(
            "worker", "worker", "-P", "prefork", "-c", "4", "-Q", ",".join(QUEUES),
            "-n", "demo-worker@%h", "--without-gossip", "--without-mingle", "--loglevel=INFO",
        )  # fmt: skip
        self._wait(lambda: " ready." in worker.output(), 60, "a ready worker", worker)
        self.say(
            "worker", f"ready (pid {worker.pid}, prefork, 4 processes, queues {','.join(QUEUES)})"
        )
        beats = [self._start(name, "beat", "--loglevel=INFO") for name in ("beat-a", "beat-b")]
        self._wait(
            lambda: len(self.api.beats()) == 2 and self.api.list(), 60, "two live beats", *beats
        )
        entries = self.api.list()
        self.say("beats", f"beat-a (pid {self.processes['beat-a'].pid}) and beat-b "
                 f"(pid {self.processes['beat-b'].pid}) live, both active; {len(entries)} "
                 "entries reconciled from @periodic and beat_schedule")  # fmt: skip
        self.start_ms = self._now_ms()
        self._timeline()
        self.processes["beat-b"].stop()
        self.stop_ms = self._now_ms()
        self.say("stop", "beats stopped; waiting for the worker to finish queued runs")
        self._wait(self._drained, 60, "drained queues", worker)
        worker.stop()
        self.say("stop", f"worker stopped; logs in {self.logs}")
        return self._report(json_path)

    def _now_ms(self) -> int:
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def _timeline(self) -> None:
        start, seconds = time.monotonic(), self.seconds
        events: list[tuple[float, Callable[[], None]]] = [
            (0.1 * seconds, self._connect),
            (0.5 * seconds, self._kill),
            (0.75 * seconds, self._disconnect),
        ]
        trigger_at = self._trigger_offset()
        if trigger_at is not None:
            events.append((trigger_at, self._trigger))
        events.sort(key=lambda event: event[0])
        progress = 10.0
        while True:
            elapsed = time.monotonic() - start
            if events and elapsed >= events[0][0]:
                events.pop(0)[1]()
                continue
            if elapsed >= progress:
                runs = sum(1 for r in audit.runs(self.client, KEY_PREFIX) if r["kind"] == "ran")
                alive = sum(1 for n in ("beat-a", "beat-b") if self.processes[n].running)
                self.say("...", f"{runs} runs so far, {alive} beat(s) alive")
                progress += 10
            if elapsed >= seconds:
                return
            upcoming = min(seconds, progress, events[0][0] if events else seconds)
            time.sleep(max(upcoming - elapsed, 0.0))

    def _trigger_offset(self) -> float | None:
        """When to trigger make-report by hand: TRIGGER_LEAD s before one of its ticks."""
        entry = self.api.get("make-report").entry
        if entry is None:
            return None
        schedule = entry.parsed_schedule()
        earliest = self.start_ms / 1000 + 0.15 * self.seconds + TRIGGER_LEAD
        latest = self.start_ms / 1000 + self.seconds - MARGIN - 1
        for fire in schedule.upcoming(datetime.fromtimestamp(self.start_ms / 1000, UTC), 20):
            if earliest <= fire.timestamp() <= latest:
                self._trigger_tick = fire
                return fire.timestamp() - TRIGGER_LEAD - self.start_ms / 1000
        return None

    # timeline events

    def _connect(self) -> None:
        stored = channels.connect_channel(app, CHANNEL, "sales@example.com")
        if stored.entry is None or stored.next_run is None:
            raise RuntimeError(f"runtime entry {stored.name!r} was stored without a next tick")
        self.runtime = Runtime(
            stored.name, stored.entry.parsed_schedule(), int(stored.next_run.timestamp() * 1000)
        )
        self.say("api", f"connect_channel({CHANNEL}): periodiq(app).add({stored.name!r}, "
                 f"every=5, owner={channels.owner_tag(CHANNEL)!r}); first tick "
                 f"{show.clock(stored.next_run)}")  # fmt: skip

    def _trigger(self) -> None:
        task_id = self.api.trigger("make-report")
        self.say("api", f"periodiq(app).trigger('make-report') -> manual run {task_id[:8]}, "
                 f"{TRIGGER_LEAD:g} s before its tick at {show.clock(self._trigger_tick)}: "
                 "that tick comes too soon after it")  # fmt: skip

    def _kill(self) -> None:
        names = {process.pid: name for name, process in self.processes.items()}
        self.claims_at_kill = {names.get(b.pid, b.id): b.ticks_claimed for b in self.api.beats()}
        victim = self.processes["beat-a"]
        victim.kill()
        claims = ", ".join(f"{name} {n}" for name, n in sorted(self.claims_at_kill.items()))
        self.say("kill", f"SIGKILL beat-a (pid {victim.pid}); ticks claimed so far: {claims}; "
                 "beat-b carries on alone")  # fmt: skip

    def _disconnect(self) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        runtime.events = [
            (e.kind, None if e.tick is None else int(e.tick.timestamp() * 1000))
            for e in self.api.history(runtime.name, limit=1000)
        ]
        removed = channels.disconnect_channel(app, CHANNEL)
        runtime.deleted_ms = self._now_ms()
        self.say("api", f"disconnect_channel({CHANNEL}): periodiq(app).delete_owner("
                 f"{channels.owner_tag(CHANNEL)!r}) deleted {removed}")  # fmt: skip

    # the end

    def _drained(self) -> bool:
        pipe = self.client.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.llen(queue)
        pipe.hlen("unacked")
        if any(pipe.execute()):
            return False
        return not any(stored.running for stored in self.api.list())

    def _tallies(self) -> list[Tally]:
        records = audit.runs(self.client, KEY_PREFIX)
        window = Window(self.start_ms, self.stop_ms - int(MARGIN * 1000))
        tallies = []
        for stored in self.api.list():
            if stored.entry is None:
                continue
            events = [
                (e.kind, None if e.tick is None else int(e.tick.timestamp() * 1000))
                for e in self.api.history(stored.name, limit=1000)
            ]
            schedule = stored.entry.parsed_schedule()
            tallies.append(tally(stored.name, schedule, window, records, events))
        runtime = self.runtime
        if runtime is not None:
            end = min(runtime.deleted_ms or self.stop_ms, self.stop_ms) - int(MARGIN * 1000)
            span = Window(max(runtime.first_ms - 1, window.start_ms), end)
            tallies.append(tally(runtime.name, runtime.schedule, span, records,
                                 runtime.events or []))  # fmt: skip
        return tallies

    def _report(self, json_path: Path | None) -> int:
        cli = show.cli_available(self.env)
        print()
        show.entry_list(self.api, self.env, cli)
        print()
        show.history(self.api, self.env, cli, HISTORY_OF)
        print()
        tallies = self._tallies()
        show.summary(tallies, self.start_ms, self.stop_ms - int(MARGIN * 1000))
        records = audit.runs(self.client, KEY_PREFIX)
        show.mailbox(records)
        leftovers = self._leftovers()
        duplicates = sum(t.duplicates for t in tallies)
        lost = sum(len(t.lost) for t in tallies)
        ok = duplicates == 0 and lost == 0
        print(f"\n{'OK' if ok else 'FAILED'}: {duplicates} duplicate runs, {lost} lost ticks "
              f"({time.monotonic() - self.began:.1f} s in all)")  # fmt: skip
        if json_path is not None:
            summary: dict[str, Any] = {
                "ok": ok, "duplicates": duplicates, "lost": lost, "cli": cli,
                "seconds": self.seconds, "claims_at_kill": self.claims_at_kill,
                "runtime_entry": self.runtime.name if self.runtime else None,
                "runtime_deleted": bool(self.runtime and self.runtime.deleted_ms),
                "leftover_keys": leftovers, "entries": [t.as_dict() for t in tallies],
            }  # fmt: skip
            json_path.write_text(json.dumps(summary, indent=2))
        return 0 if ok else 1

    def _leftovers(self) -> list[str]:
        """Keys still held for the deleted runtime entry (there should be none)."""
        if self.runtime is None:
            return []
        return sorted(self.client.scan_iter(f"{{{KEY_PREFIX}}}:*:{self.runtime.name}"))
