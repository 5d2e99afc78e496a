"""Celery's conventions, kept:

- a misspelled ``periodiq_*`` setting is refused, naming the one meant;
- every message names its entry as ``periodic_task_name`` (django-celery-beat's header,
  which django-celery-results stores);
- ``metrics`` does not take celery-exporter's port;
- a missing entry's error offers the names closest to it;
- an entry that names no zone is read in the app's ``timezone``, as a ``crontab`` is.

Real Redis servers, the API and the CLI in-process (click's runner, as Celery runs it)
and real beats, workers and CLI processes of ``tests/apps/periodiq_app.py``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.schedules import crontab

from celery_periodiq import ConfigurationError, EntryNotFoundError, Periodiq, periodiq
from celery_periodiq.cli.ops import METRICS_PORT
from tests.processes import APPS, CELERY, cluster, wait_for
from tests.test_cli import cli, one_error_line, snapshot


@pytest.fixture
def make_app(redis_url: str, broker_url: str) -> Iterator[Callable[..., Celery]]:
    made: list[Celery] = []

    def make(**settings: Any) -> Celery:
        app = Celery("conventions", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_url
        app.conf.update(settings)

        @app.task(name="proj.make_report", shared=False)
        def make_report() -> None: ...

        made.append(app)
        return app

    yield make
    for app in made:
        client = vars(app).get("_periodiq_client")
        if client is not None:
            client.store.client.close()
        app.close()


# (a) an entry's zone

BERLIN = ZoneInfo("Europe/Berlin")


def test_an_entry_naming_no_zone_is_read_in_the_apps_timezone_through_the_api_and_cli(
    make_app: Callable[..., Celery],
) -> None:
    app = make_app(timezone="Europe/Berlin")
    api = periodiq(app)

    api.add("by-api", "proj.make_report", cron="0 9 * * *")
    api.add("by-api-in-utc", "proj.make_report", cron="0 9 * * *", tz="UTC")
    api.add("by-crontab", "proj.make_report", schedule=crontab(hour=9, minute=0))
    api.add_many([{"name": "by-add-many", "task": "proj.make_report", "cron": "0 9 * * *"}])
    added = cli(app, "add", "by-cli", "proj.make_report", "--cron", "0 9 * * *",
                "--start-at", "2030-01-01T00:00")  # fmt: skip

    assert added.exit_code == 0, added.output
    zones = {item.name: item.entry.tz for item in api.list() if item.entry is not None}
    assert zones == {
        "by-api": "Europe/Berlin", "by-api-in-utc": "UTC", "by-crontab": "Europe/Berlin",
        "by-add-many": "Europe/Berlin", "by-cli": "Europe/Berlin",
    }  # fmt: skip
    new_year = datetime(2026, 1, 1, tzinfo=UTC)
    assert api.upcoming("by-api", 1, after=new_year) == [datetime(2026, 1, 1, 9, tzinfo=BERLIN)]
    by_cli = api.get("by-cli").entry
    assert by_cli is not None
    assert by_cli.start_at == datetime(2030, 1, 1, tzinfo=BERLIN)  # read in the app's zone


def test_list_shows_each_entrys_zone(make_app: Callable[..., Celery]) -> None:
    app = make_app(timezone="Europe/Berlin")
    api = periodiq(app)
    api.add("berlin", "proj.make_report", cron="0 9 * * *")
    api.add("utc", "proj.make_report", cron="0 9 * * *", tz="UTC")

    listed = cli(app, "list")
    as_json = cli(app, "list", "--json")

    assert "0 9 * * * — at 09:00 every day, Europe/Berlin" in listed.stdout
    assert "0 9 * * * — at 09:00 every day, UTC" in listed.stdout
    assert {row["name"]: row["tz"] for row in json.loads(as_json.stdout)} == {
        "berlin": "Europe/Berlin",
        "utc": "UTC",
    }


def test_without_a_timezone_entries_are_in_utc_and_a_stored_entry_keeps_its_zone(
    make_app: Callable[..., Celery],
) -> None:
    periodiq(make_app()).add("stored", "proj.make_report", cron="0 9 * * *")

    moved = make_app(timezone="America/New_York")  # the same schedule, timezone changed
    api = periodiq(moved)
    api.update("stored", owner="ops")
    updated = cli(moved, "update", "stored", "--queue", "reports")

    assert updated.exit_code == 0, updated.output
    entry = api.get("stored").entry
    assert entry is not None
    assert (entry.tz, entry.owner, entry.options) == ("UTC", "ops", {"queue": "reports"})


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Berlin", "Europe/Berlin/"])
def test_a_timezone_that_is_no_zone_is_refused_and_nothing_is_written(
    make_app: Callable[..., Celery], redis_url: str, zone: str
) -> None:
    app = make_app(timezone=zone)
    before = snapshot(redis_url)

    with pytest.raises(ConfigurationError) as refused:
        periodiq(app)
    added = cli(app, "add", "x", "proj.make_report", "--cron", "0 9 * * *")

    said = f"setting timezone={zone!r} is invalid (allowed: an IANA zone name"
    assert str(refused.value).startswith(said)
    assert added.exit_code == 2
    assert said in one_error_line(added)
    assert snapshot(redis_url) == before


def test_a_beat_declares_a_periodic_entry_in_the_apps_timezone_and_leaves_stored_ones(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    conf = {"timezone": "America/New_York"}
    with cluster(tmp_path, redis_url, broker_url, TEST_CONF=json.dumps(conf),
                 TEST_DECLARE_CRON="0 9 * * *") as running:  # fmt: skip
        api = running.api()  # the app without a timezone: UTC
        api.add("runtime", "record", cron="0 9 * * *")
        running.beat()
        wait_for(lambda: _entry(api, "declared-cron"), 60, "the beat to write the declared entry")
        shown = running.cli("show", "declared-cron", "--json")
        declared, runtime = api.get("declared-cron").entry, api.get("runtime").entry

    assert declared is not None
    assert runtime is not None
    assert (declared.tz, runtime.tz) == ("America/New_York", "UTC")
    assert json.loads(shown.stdout)["tz"] == "America/New_York"


def test_with_enable_utc_off_and_no_timezone_the_hosts_zone_is_the_default(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    conf = {"enable_utc": False}
    with cluster(tmp_path, redis_url, broker_url, TEST_CONF=json.dumps(conf)) as running:
        preview = running.cli("next", "0 9 * * *", "--json", TZ="America/Sao_Paulo")
        added = running.cli("add", "local", "record", "--cron", "0 9 * * *",
                            TZ="America/Sao_Paulo")  # fmt: skip
        entry = running.api().get("local").entry

    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["tz"] == "America/Sao_Paulo"
    assert added.returncode == 0, added.stderr
    assert entry is not None
    assert entry.tz == "America/Sao_Paulo"


def _entry(api: Periodiq, name: str) -> object:
    try:
        return api.get(name).entry
    except EntryNotFoundError:
        return None


# (b) periodic_task_name


def test_every_run_names_its_entry_as_periodic_task_name_on_the_worker(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        api = running.firing(["alpha", "beta"])  # one task: one message template for both
        task_id = api.trigger("alpha")
        wait_for(lambda: any(run["task_id"] == task_id for run in running.runs()), 30,
                 "the triggered run")  # fmt: skip
        runs = running.runs()

    assert {run["entry"] for run in runs} == {"alpha", "beta"}
    assert all(run["periodic_task_name"] == run["entry"] for run in runs), runs


# (c) the metrics port


def test_metrics_listens_by_default_on_a_port_no_common_exporter_takes(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    taken = {
        9808: "celery-exporter", 5555: "flower", 8765: "our dashboard", 9090: "prometheus",
        9091: "pushgateway", 9093: "alertmanager", 9100: "node_exporter",
        9121: "redis_exporter", 9187: "postgres_exporter", 9419: "rabbitmq_exporter",
        9540: "celery-exporter (OvalMoney)", 15692: "rabbitmq's prometheus plugin",
        8888: "celery-prometheus-exporter",
    }  # fmt: skip
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", METRICS_PORT)) == 0:
            pytest.skip(f"something else listens on {METRICS_PORT} here")
    log = tmp_path / "metrics.log"
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    with cluster(tmp_path, redis_url, broker_url) as running, log.open("w") as said:
        served = subprocess.Popen(
            [CELERY, "-A", "periodiq_app", "periodiq", "metrics"],
            env=running.env, cwd=APPS, stdout=subprocess.DEVNULL, stderr=said,
        )  # fmt: skip
        try:
            body = wait_for(lambda: _read(url), 30, "the metrics endpoint")
        finally:
            served.terminate()
            served.wait(timeout=20)

    assert METRICS_PORT not in taken
    assert f"periodiq metrics at {url}" in log.read_text()
    assert "periodiq_up 1.0" in body


def _read(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return str(answer.read().decode())
    except OSError:
        return None


# (d) unknown settings


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("periodiq_claim_leese", "setting periodiq_claim_leese is unknown (did you mean "
         "periodiq_claim_lease?)"),
        ("periodiq_redis_uri", "setting periodiq_redis_uri is unknown (did you mean "
         "periodiq_redis_url"),
        ("periodiq_frobnicate", "setting periodiq_frobnicate is unknown; the settings are"),
    ],
)  # fmt: skip
def test_an_unknown_periodiq_setting_is_refused_naming_the_one_meant(
    make_app: Callable[..., Celery], redis_url: str, key: str, said: str
) -> None:
    app = make_app(**{key: 5})
    before = snapshot(redis_url)

    with pytest.raises(ConfigurationError) as refused:
        periodiq(app)
    added = cli(app, "add", "x", "proj.make_report", "--every", "60")

    assert str(refused.value).startswith(said)
    assert added.exit_code == 2
    assert said in one_error_line(added)
    assert snapshot(redis_url) == before


def test_with_celerys_namespace_the_prefixed_keys_are_checked_and_others_left_alone(
    make_app: Callable[..., Celery],
) -> None:
    class Good:
        CELERY_PERIODIQ_CLAIM_LEASE = 5
        PERIODIQ_CELERY_APP = "proj.celery:app"  # a Django setting of ours, not the app's
        PERIODIQ_WHATEVER = 1  # not prefixed: not the app's setting

    class Misspelled(Good):
        CELERY_PERIODIQ_CLAIM_LEESE = 5

    good, bad = make_app(), make_app()
    good.config_from_object(Good, namespace="CELERY")
    bad.config_from_object(Misspelled, namespace="CELERY")

    assert periodiq(good).settings.claim_lease == 5
    with pytest.raises(ConfigurationError, match=r"CELERY_PERIODIQ_CLAIM_LEESE is unknown "
                       r"\(did you mean CELERY_PERIODIQ_CLAIM_LEASE\?\)"):  # fmt: skip
        periodiq(bad)


def test_a_beat_and_a_worker_with_a_misspelled_setting_do_not_start(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    conf = {"periodiq_claim_leese": 5}
    with cluster(tmp_path, redis_url, broker_url, TEST_CONF=json.dumps(conf)) as running:
        worker, beat = running.worker(), running.beat()
        for process in (worker, beat):
            wait_for(lambda p=process: not p.running, 60, "the process to stop")  # type: ignore[misc]
        listed = running.cli("list")

    said = "setting periodiq_claim_leese is unknown (did you mean periodiq_claim_lease?)"
    for process, what in ((worker, "worker"), (beat, "beat")):
        assert process.process is not None
        assert process.process.returncode == 1, process.output()
        (line,) = [line for line in process.output().splitlines() if "CRITICAL" in line]
        assert said in line
        assert line.endswith(f"; the {what} cannot start")
    assert listed.returncode == 2
    assert said in listed.stderr


# (e) did you mean


def _calls(api: Periodiq, name: str) -> list[Callable[[], object]]:
    return [
        lambda: api.get(name), lambda: api.pause(name), lambda: api.resume(name),
        lambda: api.delete(name), lambda: api.update(name, owner="x"),
        lambda: api.history(name), lambda: api.trigger(name), lambda: api.upcoming(name),
    ]  # fmt: skip


def test_a_name_that_is_no_entry_is_refused_with_the_names_closest_to_it(
    make_app: Callable[..., Celery], redis_url: str
) -> None:
    app = make_app()
    api = periodiq(app)
    api.add("proj.make_report", "proj.make_report", every=60)
    api.add("proj.make_reports", "proj.make_report", every=60)
    api.add("cleanup", "proj.make_report", every=60)
    before = snapshot(redis_url)

    errors = []
    for call in _calls(api, "make_report"):
        with pytest.raises(EntryNotFoundError) as missing:
            call()
        errors.append(str(missing.value))
    with pytest.raises(EntryNotFoundError) as unlike:
        api.get("zzz")
    shown = cli(app, "show", "make_report")

    meant = "no entry named 'make_report' (did you mean 'proj.make_report' or 'proj.make_reports'?)"
    assert errors == [meant] * len(errors)
    assert str(unlike.value) == "no entry named 'zzz'"
    assert shown.exit_code == 3
    assert one_error_line(shown) == f"Error: {meant}"
    assert snapshot(redis_url) == before


def test_in_a_large_schedule_the_names_containing_it_are_offered(
    make_app: Callable[..., Celery],
) -> None:
    api = periodiq(make_app())
    api.add_many(
        {"name": f"tenant-{n:05d}", "task": "proj.make_report", "every": 3600}
        for n in range(20_001)
    )
    api.add("proj.make_report", "proj.make_report", every=60)

    with pytest.raises(EntryNotFoundError) as missing:
        api.get("make_report")

    assert str(missing.value) == "no entry named 'make_report' (did you mean 'proj.make_report'?)"
