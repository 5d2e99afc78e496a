"""Check-ins without processes: the settings' checks, the monitor slug, Sentry's monitor
config and the ping URLs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from celery_periodiq import Periodiq
from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.entry import Entry
from celery_periodiq.schedules.interval import every_spec
from celery_periodiq.worker.checkins import _Sender
from celery_periodiq.worker.monitors import (
    monitor_config,
    monitor_slug,
    ping_url,
    status_of,
    uuid_hex,
)

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
RID = "6f0c9e0e-0000-4000-8000-000000000001"


def settings_of(**conf: Any) -> Settings:
    app = Celery("checkins", set_as_current=False)
    app.conf.update(periodiq_redis_url="redis://localhost:6379/0", **conf)
    return Settings.from_app(app)


@pytest.mark.parametrize(
    ("conf", "said"),
    [
        ({"periodiq_checkins": "sentry"}, "periodiq_checkins='sentry' is invalid"),
        ({"periodiq_checkins": ["datadog"]}, "a list of sentry, ping"),
        ({"periodiq_checkins": ["ping"]}, "names 'ping' but no ping URL is set"),
        ({"periodiq_checkin_url": "hc.example/ping/{entry}"}, "an http:// or https:// URL"),
        ({"periodiq_checkin_url": "ftp://hc.example/{entry}"}, "periodiq_checkin_url='ftp:"),
        ({"periodiq_checkin_url": "https://hc.example/{name}"}, "placeholders {entry} and"),
        ({"periodiq_checkin_url": "https://hc.example/{"}, "periodiq_checkin_url="),
        ({"periodiq_checkin_url": 42}, "periodiq_checkin_url=42 is invalid"),
        ({"periodiq_checkin_urls": ["https://hc.example/x"]}, "a dict of entry name -> ping"),
        ({"periodiq_checkin_urls": {"a": "hc.example/x"}}, "periodiq_checkin_urls['a']="),
        ({"periodiq_checkin_urls": {"a": None}}, "periodiq_checkin_urls['a']=None"),
        ({"periodiq_checkin_urls": {"": "https://hc.example/x"}}, "a dict of entry name"),
        ({"periodiq_checkin_timeout": 0}, "0.1 to 30 seconds"),
        ({"periodiq_checkin_timeout": 300}, "0.1 to 30 seconds"),
        ({"periodiq_checkin_timeout": "2"}, "periodiq_checkin_timeout='2' is invalid"),
        ({"periodiq_checkin_timeout": True}, "periodiq_checkin_timeout=True is invalid"),
    ],
)
def test_a_malformed_checkin_setting_is_refused_naming_it(conf: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigurationError, match="setting periodiq_checkin") as caught:
        settings_of(**conf)
    assert said in str(caught.value)


def test_a_ping_url_turns_pings_on_and_kinds_are_named_once() -> None:
    settings = settings_of(
        periodiq_checkins=["sentry", "sentry"],
        periodiq_checkin_urls={"nightly": "https://hc-ping.com/uuid"},
    )
    assert settings.checkins == ("sentry", "ping")
    assert settings.checkin_urls == {"nightly": "https://hc-ping.com/uuid"}
    assert settings.checkin_timeout == 2.0
    assert settings_of().checkins == ()


def test_the_monitor_slug_is_the_entry_name_made_safe_and_distinct() -> None:
    assert monitor_slug("Nightly Report") == "nightly-report"
    assert monitor_slug("billing/invoices:send_all") == "billing-invoices-send_all"
    assert monitor_slug("!!!") == "entry"
    long_a, long_b = "x" * 60 + "a", "x" * 60 + "b"
    assert len(monitor_slug(long_a)) == 50
    assert monitor_slug(long_a) != monitor_slug(long_b)


def test_a_task_id_is_the_check_in_id_both_ends_share() -> None:
    assert uuid_hex(RID) == RID.replace("-", "")
    assert len(uuid_hex("not-a-uuid")) == 32
    assert uuid_hex("not-a-uuid") == uuid_hex("not-a-uuid")


def cron(spec: str, **fields: Any) -> Entry:
    return Entry(name="job", task="proj.job", schedule=spec, form="cron", **fields)


def every(seconds: float, **fields: Any) -> Entry:
    return Entry(name="job", task="proj.job", schedule=every_spec(seconds), form="every", **fields)


def test_a_cron_entry_becomes_a_crontab_monitor_with_its_zone_grace_and_timebox() -> None:
    entry = cron("*/15 * * * *", tz="Europe/Paris", grace=90, failure_threshold=3)
    assert monitor_config(entry, 10.0, NOW) == {
        "schedule": {"type": "crontab", "value": "*/15 * * * *"},
        "timezone": "Europe/Paris",
        "failure_issue_threshold": 3,
        "checkin_margin": 2,  # 90 s of grace, in whole minutes rounded up
        "max_runtime": 8,  # the timebox: half of 15 minutes, rounded up
    }


@pytest.mark.parametrize(
    ("spec", "crontab"),
    [
        ("@daily", "0 0 * * *"),
        ("0 */5 * * * *", "*/5 * * * *"),  # seconds first, at second 0
        ("0 30 9 * * MON-FRI 2026", None),  # a year Sentry cannot say
        ("30 * * * * *", None),  # at second 30
        ("0 0 L * *", None),
        ("@reboot", None),
        ("0 9 ? * 1#2", None),
        ("0 9 ? * MON", "0 9 * * MON"),
        ("0 9 * JUL WED", "0 9 * JUL WED"),  # names are not L or W
    ],
)
def test_a_cron_sentry_cannot_say_gets_no_monitor_config(spec: str, crontab: str | None) -> None:
    config = monitor_config(cron(spec), 10.0, NOW)
    assert (config and config["schedule"]["value"]) == crontab


def test_h_becomes_the_numbers_it_hashed_to() -> None:
    config = monitor_config(cron("H/15 H(0-3) * * *"), 10.0, NOW)
    assert config is not None
    minutes, hours, *rest = config["schedule"]["value"].split()
    assert len(minutes.split(",")) == 4
    assert 0 <= int(hours) <= 3
    assert rest == ["*", "*", "*"]


@pytest.mark.parametrize(
    ("seconds", "schedule"),
    [
        (120, {"type": "interval", "value": 2, "unit": "minute"}),
        (7200, {"type": "interval", "value": 2, "unit": "hour"}),
        (86400, {"type": "interval", "value": 1, "unit": "day"}),
        (90, None),  # Sentry's intervals are whole minutes
        (1, None),
    ],
)
def test_an_interval_becomes_an_interval_monitor(
    seconds: float, schedule: dict[str, Any] | None
) -> None:
    config = monitor_config(every(seconds), 10.0, NOW)
    assert (config and config["schedule"]) == schedule


def test_without_a_timebox_there_is_no_max_runtime_and_calendars_get_no_config() -> None:
    config = monitor_config(every(600, timebox=None), 10.0, NOW)
    assert config is not None
    assert "max_runtime" not in config
    assert "checkin_margin" not in config
    calendar = Entry(name="job", task="proj.job", schedule="Mon *-*-* 09:00", form="calendar")
    assert monitor_config(calendar, 10.0, NOW) is None


def test_a_plain_tasks_monitor_gets_a_max_runtime_only_when_its_entry_sets_a_timebox() -> None:
    plain = monitor_config(every(600), 10.0, NOW, plain=True)
    boxed = monitor_config(every(600, timebox=120), 10.0, NOW, plain=True)
    assert plain is not None
    assert boxed is not None
    assert "max_runtime" not in plain  # it keeps the task's own limits: none to say
    assert boxed["max_runtime"] == 2
    assert monitor_config(every(600), 10.0, NOW)["max_runtime"] == 5  # type: ignore[index]


def test_healthchecks_urls_get_start_nothing_or_fail_and_the_run_id() -> None:
    template = "https://hc.example/ping/{entry}"
    assert ping_url(template, "a b", "in_progress", RID) == (
        f"https://hc.example/ping/a%20b/start?rid={RID}"
    )
    assert ping_url(template, "a b", "ok", RID) == f"https://hc.example/ping/a%20b?rid={RID}"
    assert ping_url("https://hc.example/ping/x/?k=1", "e", "error", RID) == (
        f"https://hc.example/ping/x/fail?k=1&rid={RID}"
    )


def test_a_state_placeholder_gets_cronitors_states() -> None:
    template = "https://cronitor.link/p/KEY/{entry}?state={state}"
    states = [ping_url(template, "job", status, RID) for status in ("in_progress", "ok", "error")]
    assert states == [
        "https://cronitor.link/p/KEY/job?state=run",
        "https://cronitor.link/p/KEY/job?state=complete",
        "https://cronitor.link/p/KEY/job?state=fail",
    ]


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        ("started", "in_progress"),
        ("resumed", None),  # a retry's start: it checked in when it began
        ("retrying", None),
        ("succeeded", "ok"),
        ("skipped_overlap", "ok"),
        ("dropped_too_soon", "ok"),
        ("failed", "error"),
        ("timeboxed", "error"),
        ("revoked", "error"),
        ("expired", "error"),
        ("duplicate", None),
        ("deleted", None),
        ("unguarded", None),
    ],
)
def test_what_each_outcome_tells_a_monitor(outcome: str, status: str | None) -> None:
    assert status_of(outcome) == status


PAGE = Path(__file__).resolve().parent.parent / "docs" / "operations" / "checkins.md"
RUN_BLOCKS = """
import json, re, sys
from celery_periodiq.config import Settings
found = []
for block in re.findall(r"```python\\n(.*?)```", open(sys.argv[1]).read(), re.DOTALL):
    scope = {}
    exec(compile(block, sys.argv[1], "exec"), scope)
    found.append(list(Settings.from_app(scope["app"]).checkins))
print(json.dumps(found))
"""


def test_the_pages_examples_run_and_their_settings_are_valid() -> None:
    # in a process of their own: sentry_sdk.init() would instrument this one
    ran = subprocess.run(
        [sys.executable, "-c", RUN_BLOCKS, str(PAGE)],
        capture_output=True, text=True, timeout=60, check=False,
        # the page reads its Redis from REDIS_URL, as the tutorial does; nothing connects
        env={**os.environ, "SENTRY_DSN": "", "REDIS_URL": "redis://127.0.0.1:9/0"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == [["sentry"], ["ping"], ["ping"], ["ping"]]


def test_a_definition_redis_cannot_give_leaves_the_check_in_the_last_config_known(
    tmp_path: Path,
) -> None:
    with LocalRedis(tmp_path / "redis") as server:
        app = Celery("checkins-failover", broker="memory://", set_as_current=False)
        app.conf.periodiq_redis_url = server.url
        app.conf.periodiq_checkins = ["sentry"]
        api = Periodiq(app)
        api.add("nightly", "proj.report", cron="0 3 * * *")
        sender = _Sender(api.store)
        known = sender._config("nightly", False)
        sender.configs["nightly", False] = (-math.inf, known)  # its minute is over: read again
        server.stop()  # a failover under way
        during = sender._config("nightly", False)
        never_read = sender._config("weekly", False)
        api.store.client.close()

    assert known is not None
    assert known["schedule"] == {"type": "crontab", "value": "0 3 * * *"}
    assert during == known
    assert never_read is None
