"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

``celery periodiq serve`` runs as a real process against a private Redis, with a
real beat and worker firing a guarded entry every second. The pages render, an
entry's page shows its history, pausing is refused without the token and works
once signed in; a screenshot of each page, at 1280 px and at a phone's width, is
written under the test's tmp dir. ``make test`` installs Chromium; where it or
Playwright cannot be installed the test is skipped and says why.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from celery_periodiq.localredis import LocalRedis
from tests.processes import APPS, CELERY, cluster, wait_for
from tests.test_cli import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the dev extra brings it
    sync_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs "
        "Debian's package; apt-get could not here)",
    ),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
]
TOKEN = "browser-token-1"
ODD = "<i>odd</i> & name"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def _shots(page: Page, folder: Path, name: str) -> None:
    for width, height, kind in ((1280, 900, "wide"), (390, 844, "phone")):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(folder / f"{name}-{kind}.png"), full_page=True)


def test_the_dashboard_in_chromium(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url) as running,
    ):
        api = running.api()
        api.add("heartbeat", "guarded_record", every=1, owner="tests")
        api.add(ODD, "guarded_record", every=3600, owner="tests")
        running.worker()
        running.beat()
        wait_for(lambda: api.get("heartbeat").counters.get("succeeded", 0) >= 3, 60,
                 "three runs of heartbeat")  # fmt: skip
        served = subprocess.Popen(
            [CELERY, "-A", "periodiq_app", "periodiq", "serve", "--port", str(port),
             "--token", TOKEN],
            env=running.env, cwd=APPS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(lambda: _answers(base + "/"), 30, "the dashboard to answer")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                     args=["--no-sandbox"])  # fmt: skip
                page = browser.new_page()

                page.goto(base + "/")
                listed = page.locator("table tbody tr").all_inner_texts()
                _shots(page, tmp_path, "entries")

                page.get_by_role("link", name="heartbeat").click()
                history = page.locator("table tbody").inner_text()
                has_plot = page.locator("svg.plot").count()
                anonymous_buttons = page.get_by_role("button", name="Pause").count()
                _shots(page, tmp_path, "entry")

                refused = page.request.post(f"{base}/actions/pause/heartbeat",
                                            form={"note": "no token"})  # fmt: skip
                paused_anonymously = api.get("heartbeat").paused

                page.goto(base + "/login")
                page.get_by_label("Token").fill(TOKEN)
                page.get_by_role("button", name="Sign in").click()
                page.goto(base + "/entries/heartbeat")
                page.get_by_label("Pause note").fill("maintenance <b>window</b>")
                page.get_by_role("button", name="Pause").click()
                banner = page.locator(".banner").first.inner_text()
                _shots(page, tmp_path, "entry-paused")

                page.goto(base + "/beats")
                beats = page.locator("table tbody").inner_text()
                _shots(page, tmp_path, "beats")
                browser.close()
        finally:
            served.terminate()
            served.wait(timeout=20)
        paused = api.get("heartbeat")
        api.delete_owner("tests")
        api.store.client.close()

    assert any(row.startswith("heartbeat") for row in listed), listed
    assert any(ODD in row for row in listed), listed  # shown as text, not as markup
    assert "succeeded" in history
    assert "started" in history
    assert has_plot >= 1
    assert anonymous_buttons == 0
    assert refused.status == 403
    assert paused_anonymously is False
    assert banner == "Paused: maintenance <b>window</b>"
    assert paused.paused
    assert paused.note == "maintenance <b>window</b>"
    assert socket.gethostname() in beats
    assert len(list(tmp_path.glob("*.png"))) == 8
