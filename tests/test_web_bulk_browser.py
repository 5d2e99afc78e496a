"""The dashboard's bulk actions in a real browser: Debian's Chromium driven by Playwright,
against ``celery periodiq serve`` as a real process with a real worker on a private
Redis and broker.

Not signed in, the list has no checkboxes and a post is refused with nothing changed.
Signed in, a user ticks two entries and pauses them with a note and an end (one paused
already is skipped, and said so); filters by owner and runs all matching now (the
worker runs each); dismisses, then accepts, the question before a delete; selects all
shown and resumes them. Screenshots go under the test's tmp dir (and to
$PERIODIQ_SHOTS, when set).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from celery_periodiq.localredis import LocalRedis
from tests.browser import BROWSER, dashboard, launch, sync_playwright
from tests.processes import cluster, wait_for

pytestmark = BROWSER
TOKEN = "bulk-token-1"


def test_bulk_actions_on_the_dashboard_in_chromium(tmp_path: Path, redis_url: str) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url) as running,
    ):
        api = running.api()
        for name in ("nightly-a", "nightly-b", "nightly-c"):
            api.add(name, "guarded_record", cron="0 3 * * *", owner="reports")
        api.add("sync", "guarded_record", cron="0 4 * * *", owner="ops")
        api.pause("nightly-b", note="broken")
        running.worker()
        with dashboard(running, TOKEN) as base, sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def shot(name: str) -> None:
                page.screenshot(path=str(tmp_path / f"bulk-{name}.png"), full_page=True)

            page.goto(base + "/")
            anonymous_boxes = page.locator('input[name="names"]').count()
            refused = page.request.post(base + "/bulk", form={"action": "delete", "names": "sync"})
            refused_status = refused.status

            page.goto(base + "/login")
            page.get_by_label("Token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_label("Select nightly-a").check()
            page.get_by_label("Select nightly-b").check()
            page.get_by_label("Bulk pause note").fill("db migration")
            page.get_by_label("Bulk pause until").fill("2h")
            shot("ticked")
            page.get_by_role("button", name="Pause", exact=True).click()
            paused = page.locator("#bulk-done").inner_text()
            paused_skipped = page.locator("#bulk-skipped").inner_text()
            shot("paused")

            page.get_by_role("link", name="Back to the entries").click()
            page.get_by_label("Owner tag").fill("reports")
            page.get_by_role("button", name="Filter").click()
            page.get_by_label("all 3 matching this search").check()
            page.get_by_role("button", name="Run now").click()
            ran = page.locator("#bulk-done").inner_text()
            shot("ran")
            runs = wait_for(
                lambda: all(running.runs_of(f"nightly-{x}") for x in "abc"),
                60, "a run of each nightly entry",
            )  # fmt: skip # one argument per line

            page.get_by_role("link", name="Back to the entries").click()
            page.get_by_label("Select nightly-c").check()
            page.once("dialog", lambda dialog: dialog.dismiss())
            page.get_by_role("button", name="Delete").click()
            kept_after_dismiss = sorted(item.name for item in api.list(owner="reports"))
            page.once("dialog", lambda dialog: dialog.accept())
            page.get_by_role("button", name="Delete").click()
            deleted = page.locator("#bulk-done").inner_text()

            page.goto(base + "/")  # the whole list, not the one filtered by owner
            page.get_by_label("Select all shown").check()
            page.get_by_role("button", name="Resume").click()
            resumed = page.locator("#bulk-done").inner_text()
            resumed_skipped = page.locator("#bulk-skipped").inner_text()
            shot("resumed")
            browser.close()
        after = {item.name: item.status for item in api.list()}
        api.store.client.close()

    shots = os.environ.get("PERIODIQ_SHOTS")
    if shots:
        shutil.copy(tmp_path / "bulk-ticked.png", Path(shots) / "dashboard-bulk.png")
        shutil.copy(tmp_path / "bulk-paused.png", Path(shots) / "dashboard-bulk-done.png")
    assert anonymous_boxes == 0
    assert refused_status == 403
    assert paused == "Paused 1 entry until 2h (note: db migration): nightly-a."
    assert paused_skipped == "nightly-b: paused already"
    assert ran == "Ran 3 entries now: nightly-a, nightly-b, nightly-c."
    assert runs
    assert kept_after_dismiss == ["nightly-a", "nightly-b", "nightly-c"]
    assert deleted == "Deleted 1 entry: nightly-c."
    assert resumed == "Resumed 2 entries: nightly-a, nightly-b."
    assert resumed_skipped == "sync: not paused"
    assert after == {"nightly-a": "active", "nightly-b": "active", "sync": "active"}
    assert all(path.stat().st_size > 10_000 for path in tmp_path.glob("bulk-*.png"))
