"""What the browser tests share: Debian's Chromium driven by Playwright, their marks
(skipped, saying why, where either is missing), and the dashboard served by a real
``celery periodiq serve`` process."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.processes import APPS, CELERY, Cluster, wait_for
from tests.test_cli import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the dev extra brings it
    sync_playwright = None  # type: ignore[assignment]

BROWSER = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs "
        "Debian's package; apt-get could not here)",
    ),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
]
"""The marks of a test that drives Chromium."""


def answers(url: str) -> bool:
    """Whether ``url`` answers at all (any status)."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def launch(playwright: Any) -> Any:
    """Chromium, headless, as Debian packages it."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])


@contextlib.contextmanager
def dashboard(running: Cluster, token: str) -> Iterator[str]:
    """``celery periodiq serve`` of the cluster's app, changes needing ``token``: its base
    URL once it answers; stopped on leaving."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    served = subprocess.Popen(
        [CELERY, "-A", "periodiq_app", "periodiq", "serve", "--port", str(port),
         "--token", token],
        env=running.env, cwd=APPS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip # one argument and its value a pair
    try:
        wait_for(lambda: answers(base + "/"), 30, "the dashboard to answer")
        yield base
    finally:
        served.terminate()
        served.wait(timeout=20)
