"""Celery's conventions, kept:

- a misspelled ``periodiq_*`` setting is refused, naming the one meant;
- every message names its entry as ``periodic_task_name`` (django-celery-beat's header,
  which django-celery-results stores);
- ``metrics`` does not take celery-exporter's port;
- a missing entry's error offers the names closest to it;

Real Redis servers, the API and the CLI in-process (click's runner, as Celery runs it)
and real beats, workers and CLI processes of ``tests/apps/periodiq_app.py``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

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
