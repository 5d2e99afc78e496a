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
