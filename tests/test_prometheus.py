"""A real Prometheus server scrapes ``celery periodiq metrics`` and answers a query.

Debian's ``prometheus`` package: ``make test`` installs it; where it cannot be
installed the test is skipped and says why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq.localredis import LocalRedis
from tests.processes import APPS, CELERY, cluster, wait_for
from tests.test_cli import free_port

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="prometheus is not installed (make test installs Debian's package; "
        "apt-get could not here)",
    ),
]


def _query(port: int, expression: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return list(json.load(answer)["data"]["result"])
    except OSError:
        return []  # not up yet


def test_prometheus_scrapes_the_metrics_and_answers_a_query(tmp_path: Path, redis_url: str) -> None:
    assert PROMETHEUS is not None
    metrics_port, prometheus_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: periodiq\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    with (
        LocalRedis(tmp_path / "broker") as broker,
        cluster(tmp_path, redis_url, broker.url) as running,
    ):
        api = running.api()
        api.add("scraped", "record", every=60, owner="tests")
        api.add("resting", "record", every=60, owner="tests")
        api.pause("resting")
        served = subprocess.Popen(
            [CELERY, "-A", "periodiq_app", "periodiq", "metrics", "--port", str(metrics_port)],
            env=running.env, cwd=APPS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        scraper = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prometheus_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            found = wait_for(
                lambda: _query(prometheus_port, 'periodiq_entries{state="paused"}'),
                60, "Prometheus to scrape periodiq_entries", interval=0.5,
            )  # fmt: skip
            up = wait_for(lambda: _query(prometheus_port, "periodiq_up"), 10, "periodiq_up")
        finally:
            for process in (scraper, served):
                process.terminate()
                process.wait(timeout=20)
        api.delete_owner("tests")
        api.store.client.close()

    assert found[0]["metric"]["job"] == "periodiq"
    assert found[0]["value"][1] == "1"
    assert up[0]["value"][1] == "1"
