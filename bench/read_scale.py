"""The read side on a large schedule: a scrape, the dashboard, the JSON API and the CLI.

    .venv/bin/python bench/read_scale.py [--entries 100000] [--topology single|cluster|both]
                                         [--repeat 3] [--json]

For each topology (one private redis-server, or a 3-master Redis Cluster without
replicas: celery_periodiq.localredis) and a private broker, stores a schedule like a
real one: ENTRIES hourly entries ``e00000``... (first ticks spread over the hour
starting two hours from now; one in 1,000 with an owner tag), one daily
``needle-report``, ten paused (``e01234`` among them) and one in 100 of them a daily
report with a past: five days of runs recorded by the beat's and the worker's own
scripts (bench/_ticks.py), one in 50 of those failing. Then, each --repeat times:

- through the real web server (``celery periodiq serve``, a subprocess, over HTTP):
  ``/metrics``, the entries page ``/``, a search that hits (``/?q=needle``) and one
  that misses, a state filter (``/?state=paused``), ``/api/entries?limit=100`` and,
  when its answer gives a cursor, the next page: time and bytes; what each answer
  holds (rows, items, series, whether the needle or ``e01234`` is in it) as a check;
- ``celery periodiq list --all``, ``export``, ``audit`` and ``doctor`` as subprocesses
  (their output to a file): wall time, peak RSS (``VmHWM``), output size;
  ``beats`` as a reference for the CLI's own start-up;

and the Redis memory per entry: ``used_memory`` after loading minus before, summed
over the masters, divided by the entries. Prints the median and the max of each.
A route, parameter or command that is not there (or fails) is printed as
``n/a: <why>``: the bench runs on code that has them and on code that has not.
Children are capped at --cap-gib of address space (RLIMIT_AS), so that a process
reading everything fails rather than take the shared machine's memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import resource
import socket
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
from _harness import BENCH, ROOT, Proc, chunks
from _machine import machine
from _ticks import run_round

NEEDLE = "needle-report"
PAUSED = "e01234"
DAY_MS = 86_400_000
HISTORY_TICKS = 5
CELERY = [sys.executable, "-m", "celery", "-A", "_periodiq_app"]


def name_of(n: int) -> str:
    return f"e{n:05d}"


# ------------------------------------------------------------------ figures


@dataclass
class Figure:
    """One measurement, taken up to --repeat times."""

    label: str
    seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    check: str = ""
    missing: str | None = None
    """Why there is no figure ("n/a: ..."), or None."""

    def cells(self) -> list[str]:
        if self.missing is not None and not self.seconds and not self.rss_kib:
            return [self.label, self.missing, "", "", "", self.check]
        took = (
            [f"{statistics.median(self.seconds):.3f}", f"{max(self.seconds):.3f}"]
            if self.seconds
            else ["–", "–"]
        )
        size = f"{statistics.median(self.sizes):,.0f}" if self.sizes else "–"
        rss = f"{max(self.rss_kib) / 1024:,.1f}" if self.rss_kib else "–"
        check = self.check if self.missing is None else f"{self.check} ({self.missing})".strip()
        return [self.label, *took, size, rss, check]

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "seconds": self.seconds,
            "bytes": self.sizes,
            "peak_rss_kib": self.rss_kib,
            "check": self.check,
            "missing": self.missing,
        }


HEADER = ["measurement", "median (s)", "max (s)", "bytes", "peak RSS (MiB)", "check"]


def table(figures: list[Figure]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(figure.cells()) + " |" for figure in figures]
    return "\n".join(lines)


# ------------------------------------------------------------------ the schedule


def used_memory(ports: list[int]) -> int:
    total = 0
    for port in ports:
        client = redis.Redis(port=port)
        total += int(client.info("memory")["used_memory"])
        client.close()
    return total


def load(api: Any, entries: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Store the schedule (see the module's docstring); returns what it took."""
    from celery_periodiq.beat.dispatch import Dispatcher
    from celery_periodiq.ops.bulk import build_many

    now = api.now()
    first = now + timedelta(hours=2)
    step = 3600 / max(entries, 1)
    history = set(range(50, entries, 100))

    def spec(n: int) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": name_of(n), "task": "proj.poll", "every": 3600,
            "start_at": first + timedelta(seconds=n * step),
        }  # fmt: skip
        if n % 1000 == 3:
            found["owner"] = f"team-{n // 1000 % 5}"
        return found

    began = time.perf_counter()
    hourly = [n for n in range(entries) if n not in history]
    for chunk in chunks(hourly, 50_000):
        api.add_many(spec(n) for n in chunk)
    # daily, its first tick in 12 h: after every hourly one, and last by name too
    needle = {
        "name": NEEDLE,
        "task": "proj.report",
        "every": 86400,
        "start_at": now + timedelta(hours=12),
    }
    api.add_many([needle])
    load_s = time.perf_counter() - began
    log(f"add_many: {len(hourly) + 1:,} entries in {load_s:.1f} s")

    # The reports with a past: added as add_many does but on a clock five days back
    # (Store.put with now_ms), then run day by day by the beat's and worker's scripts.
    began = time.perf_counter()
    start_ms = int(now.timestamp() * 1000) - (HISTORY_TICKS - 1) * DAY_MS - 600_000
    start = datetime.fromtimestamp(start_ms / 1000, UTC)
    names = sorted(history)
    for chunk in chunks(names, 50_000):
        built = build_many(
            api.runtime,
            [{"name": name_of(n), "task": "proj.report", "every": 86400, "start_at": start}
             for n in chunk],
        )  # fmt: skip
        api.store.put("add", built, now_ms=start_ms - 1000)  # the first tick: start_ms
    failing = {name_of(n) for n in names[::50]}
    queue = redis.Redis.from_url(api.app.conf.broker_url)
    dispatcher = Dispatcher(api.app, api.store, "bench:read-scale:history")
    runs = sum(
        run_round(dispatcher, api.store, queue, start_ms + day * DAY_MS, failing)
        for day in range(HISTORY_TICKS)
    )
    queue.close()
    history_s = time.perf_counter() - began
    log(f"history: {len(names):,} entries, {runs:,} runs ({len(failing)} failing) "
        f"in {history_s:.1f} s")  # fmt: skip

    paused = sorted({name_of((1234 + k * entries // 10) % entries) for k in range(10)})
    for name in paused:
        api.pause(name, note="paused by the bench")
    return {
        "entries": api.count(),
        "add_many_s": load_s,
        "history_entries": len(names),
        "history_runs": runs,
        "failing": len(failing),
        "history_s": history_s,
        "paused": paused,
    }


# ------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def capped(proc: Proc, cap_gib: float) -> Proc:
    if cap_gib > 0:
        limit = int(cap_gib * 2**30)
        with contextlib.suppress(OSError):
            resource.prlimit(proc.pid, resource.RLIMIT_AS, (limit, limit))
    return proc


def tail(proc: Proc) -> str:
    lines = [line for line in proc.output().splitlines() if line.strip()]
    return lines[-1][:120] if lines else "no output"


class WebServer:
    """``celery periodiq serve`` on a free port, restarted when a request killed or
    outlasted it."""

    def __init__(self, env: dict[str, str], tmp: Path, cap_gib: float) -> None:
        self.env, self.tmp, self.cap_gib = env, tmp, cap_gib
        self.proc: Proc | None = None
        self.peak_kib = 0
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.port = free_port()
        argv = [*CELERY, "periodiq", "serve", "--port", str(self.port)]
        self.proc = Proc("serve", argv, self.env, self.tmp / f"serve-{self.starts}.log")
        capped(self.proc.start(), self.cap_gib)
        deadline = time.monotonic() + 60
        while True:
            if not self.proc.alive:
                raise RuntimeError(f"celery periodiq serve exited: {tail(self.proc)}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("celery periodiq serve did not listen within 60 s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.peak_kib = max(self.peak_kib, self.proc.status_kib("VmHWM") or 0)
            self.proc.stop()
            self.proc = None

    def get(self, path: str, timeout: float) -> tuple[float, int, bytes]:
        """The status and body of GET ``path``, and how long it took to the last byte."""
        began = time.perf_counter()
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}{path}", timeout=timeout
            ) as r:
                body = r.read()
                status = r.status
        except urllib.error.HTTPError as error:
            body, status = error.read(), error.code
        return time.perf_counter() - began, status, body

    def measure(
        self,
        label: str,
        path: str,
        check: Callable[[bytes], str],
        repeat: int,
        timeout: float,
    ) -> tuple[Figure, bytes]:
        figure, body = Figure(label), b""
        for _ in range(repeat):
            try:
                took, status, body = self.get(path, timeout)
            except (OSError, urllib.error.URLError) as error:
                assert self.proc is not None
                why = f"timed out after {timeout:g} s" if "timed out" in str(error) else str(error)
                if not self.proc.alive:
                    why = f"the server died: {tail(self.proc)}"
                figure.missing = f"n/a: {why}"
                self.stop()  # still reading, or dead: a fresh one for what follows
                self.start()
                break
            if status != 200:
                figure.missing = f"n/a: HTTP {status}: {gist(body)}"
                break
            figure.seconds.append(took)
            figure.sizes.append(len(body))
            figure.check = check(body)
        return figure, body


def gist(body: bytes) -> str:
    """The first words of an answer that is not the one wanted."""
    text = re.sub(r"<[^>]+>|\s+", " ", body.decode(errors="replace")).strip()
    return text[:80] or "empty"


def run_cli(
    label: str, args: list[str], env: dict[str, str], tmp: Path, cap_gib: float,
    repeat: int, timeout: float, ok_codes: tuple[int, ...] = (0,),
) -> Figure:  # fmt: skip
    """``celery periodiq ARGS`` --repeat times: wall time, peak RSS, output bytes."""
    figure = Figure(label)
    out = tmp / "cli.out"
    for _ in range(repeat):
        proc = Proc(label, [*CELERY, *args], env, tmp / "cli.log")
        proc.log.unlink(missing_ok=True)
        began = time.perf_counter()
        capped(proc.start(stdout_file=out), cap_gib)
        ended = proc.wait_peak(timeout)
        took = time.perf_counter() - began
        if ended is None:
            proc.kill()
            figure.missing = f"n/a: still running after {timeout:g} s"
            break
        code, maxrss = ended
        if code == 2 or code < 0:  # a usage error (no such option or command), or killed
            why = f"signal {-code}" if code < 0 else f"usage: {tail(proc)}"
            figure.missing = f"n/a: {why}"
            break
        figure.seconds.append(took)
        figure.rss_kib.append(maxrss)
        figure.sizes.append(out.stat().st_size)
        lines = count_lines(out)
        figure.check = f"{lines:,} lines" + (
            "" if code in ok_codes else f"; exit {code}: {tail(proc)}"
        )
    out.unlink(missing_ok=True)
    return figure


def count_lines(path: Path) -> int:
    lines = 0
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            lines += block.count(b"\n")
    return lines


# ------------------------------------------------------------------ checks


def rows(body: bytes) -> int:
    return body.count(b'href="/entries/')


def rows_check(body: bytes) -> str:
    return f"{rows(body):,} rows"


def needle_check(body: bytes) -> str:
    found = "found" if NEEDLE.encode() in body else "NOT found"
    return f"{rows(body):,} rows; {NEEDLE} {found}"


def paused_check(body: bytes) -> str:
    found = "shown" if f">{PAUSED}<".encode() in body else "NOT shown"
    return f"{rows(body):,} rows; {PAUSED} {found}"


def series_check(body: bytes) -> str:
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return f"{series:,} series"


def items_of(body: bytes) -> tuple[list[Any] | None, Any]:
    """The entries of an /api/entries answer and its next cursor (None: none given)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None, None
    if isinstance(answer, list):
        return answer, None
    if not isinstance(answer, dict):
        return None, None
    items = next((value for value in answer.values() if isinstance(value, list)), None)
    cursor = next(
        (answer[key] for key in ("next_cursor", "next", "cursor") if answer.get(key)), None
    )
    return items, cursor


def items_check(body: bytes) -> str:
    items, cursor = items_of(body)
    if items is None:
        return "not a list of entries"
    return f"{len(items):,} items" + ("; a next cursor" if cursor else "; no cursor")


# ------------------------------------------------------------------ one topology


ROUTES = [
    ("/metrics (scrape)", "/metrics", series_check),
    ("entries page /", "/", rows_check),
    ("search hit /?q=needle", "/?q=needle", needle_check),
    ("search miss /?q=nomatchzzz", "/?q=nomatchzzz", rows_check),
    ("state filter /?state=paused", "/?state=paused", paused_check),
    ("/api/entries?limit=100", "/api/entries?limit=100", items_check),
]


@contextlib.contextmanager
def schedule_redis(topology: str, tmp: Path) -> Iterator[tuple[str, list[int]]]:
    """The schedule's Redis: its URL and its masters' ports."""
    from celery_periodiq.localredis import LocalRedis, LocalRedisCluster

    if topology == "single":
        with LocalRedis(tmp / "schedule") as server:
            yield server.url, [server.port]
    else:
        with LocalRedisCluster(tmp / "cluster", masters=3, replicas=0) as cluster:
            yield cluster.url, cluster.master_ports()


def one_topology(
    topology: str, args: argparse.Namespace, tmp: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    from celery import Celery

    from celery_periodiq import periodiq
    from celery_periodiq.localredis import LocalRedis

    tmp.mkdir(parents=True, exist_ok=True)
    with schedule_redis(topology, tmp) as (url, ports), LocalRedis(tmp / "broker") as broker:
        app = Celery("bench_periodiq", broker=broker.url, set_as_current=False)
        app.conf.periodiq_redis_url = url
        app.conf.periodiq_redis_cluster = topology == "cluster"
        app.conf.periodiq_key_prefix = "periodiq"  # bench/_periodiq_app.py's
        api = periodiq(app)
        before = used_memory(ports)
        setup = load(api, args.entries, log)
        setup["bytes_per_entry"] = (used_memory(ports) - before) / setup["entries"]
        log(f"Redis: {setup['bytes_per_entry']:,.0f} bytes per entry (used_memory)")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT)]),
            "BENCH_BROKER_URL": broker.url,
            "BENCH_REDIS_URL": url,
            "BENCH_REDIS_CLUSTER": "1" if topology == "cluster" else "0",
        }
        figures = []
        web = WebServer(env, tmp, args.cap_gib)
        web.start()
        try:
            answers = {}
            for label, path, check in ROUTES:
                figure, answers[path] = web.measure(label, path, check, args.repeat, args.timeout)
                figures.append(figure)
                log(" | ".join(figure.cells()))
            cursor = items_of(answers[ROUTES[-1][1]])[1]
            if cursor:
                path = f"/api/entries?limit=100&cursor={quote(str(cursor), safe='')}"
                figure, _ = web.measure(
                    "/api/entries next page", path, items_check, args.repeat, args.timeout
                )
            else:
                figure = Figure("/api/entries next page", missing="n/a: no cursor in the answer")
            figures.append(figure)
        finally:
            web.stop()
        server = Figure("web server (all of the above)", rss_kib=[web.peak_kib])
        server.check = f"started {web.starts} time(s)"
        figures.append(server)
        commands = [
            ("celery periodiq beats (start-up)", ["periodiq", "beats"], (0,)),
            ("celery periodiq list --all", ["periodiq", "list", "--all"], (0,)),
            ("celery periodiq export", ["periodiq", "export"], (0,)),
            ("celery periodiq audit (the newest 100)", ["periodiq", "audit"], (0,)),
            # exit 1 without a live beat: a check failed, as it should
            ("celery periodiq doctor", ["periodiq", "doctor"], (0, 1)),
        ]
        for label, argv, ok in commands if not args.no_cli else []:
            figure = run_cli(label, argv, env, tmp, args.cap_gib, args.repeat, args.timeout, ok)
            figures.append(figure)
            log(" | ".join(figure.cells()))
        api.store.client.close()
    return {"setup": setup, "figures": figures}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--topology", choices=["single", "cluster", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=3, help="times each figure is taken")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one try may take")
    parser.add_argument("--cap-gib", type=float, default=8, help="children's RLIMIT_AS (0: none)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--no-cli", action="store_true", help="skip list --all, export and doctor (the web only)"
    )
    args = parser.parse_args()
    if args.entries < 2_000:
        parser.error(f"--entries: at least 2,000 (so that {PAUSED} is one of them)")
    logging.disable(logging.WARNING)  # the bench's tasks are not ones the app knows
    began = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - began:7.1f}s] {text}", flush=True)

    about = machine()
    topologies = ["single", "cluster"] if args.topology == "both" else [args.topology]
    results = {}
    with tempfile.TemporaryDirectory(prefix="periodiq-read-bench-") as tmp:
        for topology in topologies:
            log(f"--- {topology}: {args.entries:,} entries")
            results[topology] = one_topology(topology, args, Path(tmp) / topology, log)
    about["loadavg_after"] = os.getloadavg()
    about["seconds"] = round(time.monotonic() - began, 1)
    print()
    print(
        f"`bench/read_scale.py {' '.join(sys.argv[1:])}` at {about['commit']}, "
        f"{about['when']}; {about['cores']} cores ({about['cpu']}), Redis "
        f"{about['redis_server']}, Python {about['python']}; load average before "
        f"{about['loadavg'][0]:.2f}, after {about['loadavg_after'][0]:.2f}; {about['seconds']} s"
    )
    for topology, found in results.items():
        setup = found["setup"]
        where = "one Redis" if topology == "single" else "3-master Redis Cluster"
        print()
        print(
            f"**{where}**, {setup['entries']:,} entries ({setup['history_entries']:,} with "
            f"{HISTORY_TICKS} days of runs, {setup['failing']} of them failing; "
            f"{len(setup['paused'])} paused): add_many {setup['add_many_s']:.1f} s, history "
            f"{setup['history_s']:.1f} s; Redis {setup['bytes_per_entry']:,.0f} bytes per entry"
        )
        print()
        print(table(found["figures"]))
    if args.json:
        print()
        print(json.dumps({
            "machine": about,
            "entries": args.entries,
            "topologies": {
                topology: {"setup": found["setup"],
                           "figures": [figure.as_json() for figure in found["figures"]]}
                for topology, found in results.items()
            },
        }, indent=2, default=str))  # fmt: skip


if __name__ == "__main__":
    main()
