"""The entry form in a real browser: Debian's Chromium driven by Playwright.

``celery periodiq serve`` runs as a real process against a private Redis, with a real
beat and worker. Signed in, a user creates an entry with the form (the schedule preview
describes it while typing); a bad schedule and bad JSON are each shown beside their field
with nothing written; the created entry fires on the real beat and worker; editing its
schedule changes what the beat does. Screenshots of the form go under the test's tmp dir
(one is copied to $PERIODIQ_SHOTS, when set, for people to look at).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from celery_periodiq.errors import EntryNotFoundError
from celery_periodiq.localredis import LocalRedis
from tests.browser import BROWSER, dashboard, launch, sync_playwright
from tests.processes import cluster, wait_for

pytestmark = BROWSER
TOKEN = "form-token-1"


def _exists(api: object, name: str) -> bool:
    try:
        api.get(name)  # type: ignore[attr-defined]
    except EntryNotFoundError:
        return False
    return True


def test_creating_and_editing_an_entry_in_chromium(tmp_path: Path, redis_url: str) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url) as running,
    ):
        api = running.api()
        running.worker()
        running.beat()
        with dashboard(running, TOKEN) as base, sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/login")
            page.get_by_label("Token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("link", name="New entry").click()

            page.get_by_label("Name").fill("made-in-form")
            page.get_by_label("Task").fill("guarded_record")
            page.get_by_label("Owner").fill("tests")
            page.get_by_label("Schedule").fill("61 * * * *")
            page.get_by_role("button", name="Create entry").click()
            bad_schedule = page.locator("#schedule-error").inner_text()
            written_after_bad_schedule = _exists(api, "made-in-form")
            page.screenshot(path=str(tmp_path / "form-bad-schedule.png"), full_page=True)

            page.get_by_label("Schedule").fill("@every 2s")
            page.get_by_label("Arguments", exact=True).fill('[1, "a"')
            preview = page.locator("#schedule-preview")
            preview.get_by_text("every 2 seconds").wait_for(timeout=10_000)
            described = preview.inner_text()
            page.screenshot(path=str(tmp_path / "form-preview.png"), full_page=True)
            page.get_by_role("button", name="Create entry").click()
            bad_json = page.locator("#args-error").inner_text()
            kept_schedule = page.get_by_label("Schedule").input_value()
            written_after_bad_json = _exists(api, "made-in-form")
            page.screenshot(path=str(tmp_path / "form-bad-json.png"), full_page=True)

            page.get_by_label("Arguments", exact=True).fill("[]")
            page.get_by_role("button", name="Create entry").click()
            page.wait_for_url(base + "/entries/made-in-form")
            wait_for(
                lambda: api.get("made-in-form").counters.get("succeeded", 0) >= 2,
                30, "two runs of the entry made in the form",
            )  # fmt: skip

            page.get_by_role("link", name="Edit", exact=True).click()
            page.get_by_label("Schedule").fill("@every 1h")
            preview.get_by_text("every 1 hour").wait_for(timeout=10_000)
            page.screenshot(path=str(tmp_path / "form-edit.png"), full_page=True)
            page.get_by_role("button", name="Save changes").click()
            page.wait_for_url(base + "/entries/made-in-form")
            entry_page = page.locator("main").inner_text()
            browser.close()
        edited = api.get("made-in-form")
        runs_after_edit = edited.counters.get("succeeded", 0)
        next_fire = api.upcoming("made-in-form", 1, after=api.now())
        now = api.now()
        api.delete_owner("tests")
        api.store.client.close()

    shots = os.environ.get("PERIODIQ_SHOTS")
    if shots:
        shutil.copy(tmp_path / "form-preview.png", Path(shots) / "form-preview.png")
        shutil.copy(tmp_path / "form-bad-json.png", Path(shots) / "form-bad-json.png")
    assert "minute" in bad_schedule
    assert written_after_bad_schedule is False
    assert "every 2 seconds" in described
    assert described.count("+00:00") == 5  # the next five fires
    assert "args: not JSON" in bad_json
    assert kept_schedule == "@every 2s"
    assert written_after_bad_json is False
    assert edited.entry is not None
    assert edited.entry.schedule == "@every 1h"
    assert "@every 1h" in entry_page
    assert runs_after_edit >= 2
    assert 0 < (next_fire[0] - now).total_seconds() <= 3600
    assert len(list(tmp_path.glob("form-*.png"))) == 4
