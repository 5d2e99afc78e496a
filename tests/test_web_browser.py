"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

``celery periodiq serve`` runs as a real process against a private Redis, with a
real beat and worker firing a guarded entry every second. The pages render, an
entry's page shows its history, pausing is refused without the token and works
once signed in; a screenshot of each page, at 1280 px and at a phone's width, is
written under the test's tmp dir. ``make test`` installs Chromium; where it or
Playwright cannot be installed the test is skipped and says why.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from celery_periodiq.localredis import LocalRedis
from tests.browser import BROWSER, dashboard, launch, sync_playwright
from tests.processes import cluster, wait_for

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = BROWSER
TOKEN = "browser-token-1"
ODD = "<i>odd</i> & name"


def _shots(page: Page, folder: Path, name: str) -> None:
    for width, height, kind in ((1280, 900, "wide"), (390, 844, "phone")):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(folder / f"{name}-{kind}.png"), full_page=True)


def test_the_dashboard_in_chromium(tmp_path: Path, redis_url: str) -> None:
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
        with dashboard(running, TOKEN) as base, sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page()

            page.goto(base + "/")
            listed = page.locator("table tbody tr").all_inner_texts()
            _shots(page, tmp_path, "entries")

            page.get_by_role("link", name="heartbeat").click()
            history = page.locator("table tbody").first.inner_text()  # then the audit
            has_plot = page.locator("svg.plot").count()
            anonymous_buttons = page.get_by_role("button", name="Pause").count()
            _shots(page, tmp_path, "entry")

            refused = page.request.post(f"{base}/actions/pause/heartbeat",
                                        form={"note": "no token"})  # fmt: skip
            paused_anonymously = api.get("heartbeat").paused

            page.goto(base + "/login")
            page.get_by_label("Token").fill(TOKEN)
            page.get_by_label("Your name").fill("Chris <b>")  # who the audit trail records
            page.get_by_role("button", name="Sign in").click()
            page.goto(base + "/entries/heartbeat")
            page.get_by_label("Pause note").fill("maintenance <b>window</b>")
            page.get_by_role("button", name="Pause").click()
            banner = page.locator(".banner").first.inner_text()
            audit = page.locator("table.audit tbody").inner_text()
            _shots(page, tmp_path, "entry-paused")

            page.goto(base + "/beats")
            beats = page.locator("table tbody").inner_text()
            _shots(page, tmp_path, "beats")
            browser.close()
        paused = api.get("heartbeat")
        trail = api.audit("heartbeat")
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
    assert [(r.action, r.actor, r.via, r.note) for r in trail][:1] == [
        ("pause", "Chris <b>", "dashboard", "maintenance <b>window</b>")
    ]
    assert [r.action for r in trail] == ["pause", "add"]  # the refused pause: nothing
    assert "Chris <b>" in audit  # shown as text
    assert socket.gethostname() in beats
    assert len(list(tmp_path.glob("*.png"))) == 8
