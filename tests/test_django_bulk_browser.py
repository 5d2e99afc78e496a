"""The Django admin list's bulk actions in a real browser (Debian's Chromium driven by
Playwright), served by ``manage.py runserver`` on a private Redis and broker.

A view-only user sees no checkboxes and no actions, and a post of the action (with
Django's CSRF token) is refused with nothing changed. A user of the group that may
change and delete ticks two entries and pauses them with a note (the admin's messages
say what changed and what was skipped), then filters by owner, selects all matching,
asks to delete, is shown what would go and confirms. Screenshots go under the test's
tmp dir (and to $PERIODIQ_SHOTS, when that names a folder).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.browser import BROWSER, launch, sync_playwright
from tests.django_site import LIST, django_site

pytestmark = BROWSER


def signed_in(browser: Any, base: str, user: str) -> Any:
    """A page of a fresh browser context signed in as ``user``, on the list."""
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(base + "/admin/login/?next=" + LIST)
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(f"pw-{user}")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**" + LIST)
    return page


def test_bulk_actions_in_the_django_admin_in_chromium(tmp_path: Path) -> None:
    with django_site(tmp_path / "site") as site:
        api = site.api()
        for name in ("export-eu", "export-us", "export-asia"):
            api.add(name, "reports.send_daily", cron="0 3 * * *", owner="exports")
        api.add("cleanup", "reports.send_daily", cron="0 4 * * *", owner="ops")
        api.pause("export-us", note="broken")
        with sync_playwright() as playwright:
            browser = launch(playwright)

            viewer = signed_in(browser, site.url, "viewer")
            viewer_boxes = viewer.locator('input[name="names"]').count()
            viewer_actions = viewer.get_by_label("Bulk action").count()
            refused = viewer.request.post(
                site.url + LIST + "bulk/",
                form={"action": "pause", "names": "cleanup", "note": "x",
                      "csrfmiddlewaretoken": _csrf(viewer)},
                headers={"Referer": site.url + LIST},
            )  # fmt: skip # the form's fields together
            refused_status = refused.status

            page = signed_in(browser, site.url, "keeper")
            page.get_by_label("Select export-eu").check()
            page.get_by_label("Select export-us").check()
            page.get_by_label("Bulk action").select_option("pause")
            page.get_by_label("Bulk pause note").fill("quarter close")
            page.get_by_label("Bulk pause until").fill("3h")
            page.get_by_role("button", name="Go").click()
            page.wait_for_url("**" + LIST)
            told = page.locator("ul.messagelist").inner_text()
            page.screenshot(path=str(tmp_path / "django-bulk-paused.png"), full_page=True)

            page.get_by_label("Owner tag").fill("exports")
            page.get_by_role("button", name="Filter").click()
            page.get_by_label("all 3 matching this search").check()
            page.get_by_label("Bulk action").select_option("delete")
            page.get_by_role("button", name="Go").click()
            asked = page.locator("#bulk-delete-names").inner_text()
            kept_while_asking = len(api.list(owner="exports"))
            page.screenshot(path=str(tmp_path / "django-bulk-delete.png"), full_page=True)
            page.get_by_role("button", name="Yes, I’m sure").click()
            page.wait_for_url(lambda url: url.endswith("?owner=exports&sort=next"))
            deleted = page.locator("ul.messagelist").inner_text()
            browser.close()
        after = {item.name: (item.status, item.note) for item in api.list()}

    target = os.environ.get("PERIODIQ_SHOTS")
    if target and Path(target).is_dir():
        shutil.copy(tmp_path / "django-bulk-paused.png", Path(target) / "django-bulk.png")
    assert (viewer_boxes, viewer_actions) == (0, 0)
    assert refused_status == 403
    assert "Paused 1 entry until 3h (note: quarter close): export-eu." in told
    assert "Skipped 1 entry: export-us (paused already)." in told
    assert asked.splitlines() == ["export-asia", "export-eu", "export-us"]
    assert kept_while_asking == 3
    assert "Deleted 3 entries: export-asia, export-eu, export-us." in deleted
    assert after == {"cleanup": ("active", None)}


def _csrf(page: Any) -> str:
    """Django's CSRF cookie of the page's context (what its forms send back)."""
    cookies = page.context.cookies()
    return next(cookie["value"] for cookie in cookies if cookie["name"] == "csrftoken")
