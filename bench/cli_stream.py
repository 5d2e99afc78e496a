"""What ``list --all``, ``export`` and ``doctor`` cost on a large schedule: wall time,
time to the first byte of output, bytes written and the command's peak RSS.

    .venv/bin/python bench/cli_stream.py [--entries 100000] [--command 'list --all' ...]

Stores ENTRIES entries (every 5 min, an owner tag each, one in a hundred paused) with
``Periodiq.add_many`` in batches, in a private redis-server on loopback; then runs each
command as a user types it, ``celery -A _periodiq_app periodiq COMMAND``, in its own
process, reading its stdout as it comes (and throwing it away). The peak RSS is the
command's own ``ru_maxrss``, taken by a small parent: the whole process, Python,
Celery and all (``next @hourly``, which reads no Redis, shows what that floor is).
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CELERY = str(Path(sys.executable).with_name("celery"))

COMMANDS = [
    "next @hourly",  # reads no Redis: what a periodiq command costs before any entry
    "list --all",
    "list --all --json",
    "export",
    "export --format jsonl",
    "doctor",
    "doctor --full",
]


def load(url: str, entries: int, batch: int) -> None:
    """``entries`` entries, ``batch`` per ``add_many``; one in a hundred paused."""
    from celery import Celery

    from celery_periodiq import periodiq

    app = Celery("bench_periodiq", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = url
    app.conf.periodiq_key_prefix = "periodiq"
    app.task(name="proj.poll")(_poll)  # known to the app: add_many does not warn
    api = periodiq(app)
    began = time.perf_counter()
    for start in range(0, entries, batch):
        api.add_many(
            {"name": f"tenant-{n:07d}", "task": "proj.poll", "every": 300, "owner": f"o{n % 100}"}
            for n in range(start, min(start + batch, entries))
        )
    for n in range(0, entries, 100):
        api.pause(f"tenant-{n:07d}", note="bench")
    print(f"stored {entries:,} entries in {time.perf_counter() - began:.1f} s", flush=True)
    api.store.client.close()


def _poll() -> None:
    """The entries' task (never run here)."""


# A small Python that runs the command and writes the command's peak RSS (KiB) to a
# file: a child forked from this benchmark would count this process's own RSS in its
# ru_maxrss (Linux keeps the high-water mark of the memory it had before exec).
_MEASURED = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(code)"
)


def run(command: str, env: dict[str, str]) -> tuple[float, float | None, int, float, int]:
    """Wall time (s), time to the first byte (s), bytes written, peak RSS (MiB), exit code."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as peak:
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-S", "-c", _MEASURED, peak.name,
             CELERY, "-A", "_periodiq_app", "periodiq", *shlex.split(command)],
            cwd=BENCH, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip # one line per argument group
        assert process.stdout is not None
        first, size = None, 0
        while chunk := process.stdout.read1(1 << 16):
            if first is None:
                first = time.perf_counter() - began
            size += len(chunk)
        code = process.wait()
        took = time.perf_counter() - began
        return took, first, size, int(peak.read() or 0) / 1024, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=20_000, help="entries per add_many")
    parser.add_argument(
        "--command",
        dest="commands",
        action="append",
        help=f"a periodiq command to run (repeat; default: {', '.join(COMMANDS)})",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from celery_periodiq.localredis import LocalRedis

    with LocalRedis() as server:
        load(server.url, args.entries, args.batch)
        env = {
            **os.environ,
            "BENCH_REDIS_URL": server.url,
            "BENCH_BROKER_URL": "memory://",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "COLUMNS": "100",
        }
        print(f"| command ({args.entries:,} entries) | wall (s) | first byte (s) "
              "| output (MB) | peak RSS (MiB) | exit |")  # fmt: skip # the table's header
        print("|---|---|---|---|---|---|")
        for command in args.commands or COMMANDS:
            took, first, size, peak, code = run(command, env)
            shown = "-" if first is None else f"{first:.2f}"
            print(
                f"| `{command}` | {took:.1f} | {shown} | {size / 1e6:.1f} | {peak:.0f} | {code} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
