"""The Django admin's "Periodic entries" in a real browser (Debian's Chromium driven by
Playwright), served by ``manage.py runserver`` with a real beat and worker: sign in as a
user of the group that may add and change entries, create one with the form (the
schedule preview shows its next fires), see it run, edit its schedule, see the change.
Screenshots of the list, the form and the entry go under the test's tmp dir, and also
to ``$PERIODIQ_SHOTS`` when that names a folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.browser import BROWSER, launch, sync_playwright
from tests.django_site import LIST, django_site
from tests.processes import cluster, wait_for

pytestmark = BROWSER


def test_the_django_admin_in_chromium(tmp_path: Path) -> None:
    shots: list[Path] = []
    with (
        django_site(tmp_path / "site") as site,
        cluster(tmp_path, site.redis_url, site.broker_url) as running,
    ):
        api = site.api()
        api.add("nightly-report", "reports.send_daily", cron="0 3 * * *", owner="reports")
        running.worker()
        running.beat()
        with sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def shot(name: str) -> None:
                shots.append(tmp_path / f"django-{name}.png")
                page.screenshot(path=str(shots[-1]), full_page=True)

            page.goto(site.url + "/admin/login/?next=" + LIST)
            page.get_by_label("Username").fill("keeper")
            page.get_by_label("Password").fill("pw-keeper")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url("**" + LIST)
            listed = page.locator("#result_list tbody").inner_text()
            shot("list")

            page.get_by_role("link", name="Add periodic entry").click()
            page.get_by_label("Name", exact=True).fill("browser-made")
            page.get_by_label("Task", exact=True).fill("guarded_record")
            page.get_by_label("Schedule", exact=True).fill("@every 1s")
            page.get_by_label("Keyword arguments").fill('{"by": "chromium"}')
            preview = page.locator("#schedule-preview li").first
            preview.wait_for(timeout=10_000)
            previewed = page.locator("#schedule-preview").inner_text()
            shot("form")
            page.get_by_role("button", name="Save").click()
            page.wait_for_url("**/browser-made/change/")

            runs = wait_for(lambda: running.runs_of("browser-made"), 60, "a run of browser-made")
            wait_for(lambda: api.get("browser-made").counters.get("succeeded"), 30, "a success")
            page.reload()
            shown = page.locator("#content-main").inner_text()
            has_plot = page.locator("svg.plot").count()
            shot("entry")

            page.get_by_role("button", name="Edit").click()
            page.get_by_label("Schedule", exact=True).fill("*/10 * * * *")
            page.get_by_role("button", name="Save").click()
            page.wait_for_url("**/browser-made/change/")
            edited = page.locator("#content-main").inner_text()
            browser.close()
        entry = api.get("browser-made").entry
        trail = api.audit("browser-made")
    target = os.environ.get("PERIODIQ_SHOTS")
    if target and Path(target).is_dir():
        for path in shots:
            shutil.copy(path, Path(target) / path.name)

    assert "nightly-report" in listed
    assert previewed.startswith("Runs every 1 second; next:")
    assert len(previewed.splitlines()) == 6  # five instants
    assert runs[0]["kwargs"] == {"by": "chromium"}
    assert "succeeded" in shown
    assert has_plot >= 1
    assert entry is not None
    assert entry.schedule == "*/10 * * * *"
    assert "*/10 * * * *" in edited
    assert [(r.action, r.actor, r.via) for r in reversed(trail)] == [
        ("add", "keeper", "admin"),
        ("update", "keeper", "admin"),
    ]
    assert trail[0].changes["schedule"] == ("@every 1s", "*/10 * * * *")
    assert "Audit" in edited
    assert all(path.stat().st_size > 10_000 for path in shots)
