"""What a bench run ran on: the commit, the time, the machine, the versions, the load."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from celery_periodiq.localredis import find_redis_server


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    """The commit of this checkout, now, the CPU, the versions and the load average."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = find_redis_server()
    redis_version = subprocess.run(
        [server, "--version"], capture_output=True, text=True, check=False
    ).stdout.split()
    root = Path(__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or "?",
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "redis_server": next((w[2:] for w in redis_version if w.startswith("v=")), "?"),
        "celery": _version("celery"),
        "kombu": _version("kombu"),
        "redis_py": _version("redis"),
        "celery_periodiq": _version("celery-periodiq"),
        "celery_redbeat": _version("celery-redbeat"),
        "loadavg": os.getloadavg(),
    }


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (/proc), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ceiling(one_thread_us: float, every_us: float, loop_wall_us: float) -> tuple[float, float]:
    """The least wall time a tick can take on this machine, when one thread of it costs
    ``one_thread_us`` of CPU and all its processes ``every_us`` (sharing the cores), and
    ``loop_wall_us`` (a batched loop's message) over that: ``(floor_us, ceiling)``."""
    floor_us = max(one_thread_us, every_us / (os.cpu_count() or 1))
    return floor_us, loop_wall_us / floor_us
