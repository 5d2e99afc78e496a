"""``doctor`` reads a schedule within its sample whole, and on a larger one the entries a
beat quarantined and a random sample, and says so. Real Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, PeriodiqError, periodiq
from tests.test_cli import cli

TASK = "proj.tasks.poll"


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("doctoring", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    client = periodiq(app)
    yield client
    client.store.client.close()


def tenants(count: int) -> list[dict[str, object]]:
    return [{"name": f"tenant-{n:04d}", "task": TASK, "every": 60 + n % 7} for n in range(count)]


def entry_checks(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {check["name"]: check for check in report["checks"]}  # type: ignore[attr-defined]


def test_doctor_samples_a_schedule_larger_than_its_sample_and_says_so(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    api.add_many(tenants(300))
    why = "its state is not JSON (found by a beat)"
    redis_client.hset(api.store.keys.of("tenant-0007").quarantine, "tenant-0007", why)

    sampled = cli(api.app, "doctor", "--sample", "50", "--json")
    full = cli(api.app, "doctor", "--full", "--json")
    text = cli(api.app, "doctor", "--sample", "50").stdout

    report = json.loads(sampled.stdout)
    entries = entry_checks(report)["entries"]
    assert report["sampled"] is True
    assert (entries["status"], entries["sampled"], entries["total"]) == ("fail", True, 300)
    assert 51 <= entries["checked"] <= 51 + 16  # the quarantined one, 50 drawn (rounded up)
    assert str(entries["detail"]).startswith(f"1 entry is quarantined: tenant-0007 ({why}); ")
    assert str(entries["detail"]).endswith(
        f"checked {entries['checked']} of 300 entries: every one a beat quarantined and a "
        "random sample (doctor --full checks every one)"
    )
    assert all(
        entry_checks(report)[name]["sampled"] is True for name in ("alerts", "tasks", "runs")
    )
    assert entry_checks(report)["alerts"]["detail"] == (
        f"no entry is overdue or failing (in the sample of {entries['checked']} of 300 entries)"
    )
    assert "checked" not in entry_checks(report)["redis"]
    assert "random sample" in text
    whole = json.loads(full.stdout)
    assert whole["sampled"] is False
    assert entry_checks(whole)["entries"]["checked"] == entry_checks(whole)["entries"]["total"]
    assert (
        entry_checks(whole)["entries"]["detail"] == f"1 entry is quarantined: tenant-0007 ({why})"
    )


def test_doctor_reads_a_schedule_within_its_sample_whole(api: Periodiq) -> None:
    api.add_many(tenants(40))
    api.store.client.hset(api.store.keys.of("tenant-0003").entries, "tenant-0003", "{not json")

    report = json.loads(cli(api.app, "doctor", "--sample", "40", "--json").stdout)

    entries = entry_checks(report)["entries"]
    assert report["sampled"] is False
    assert (entries["checked"], entries["total"], entries["sampled"]) == (40, 40, False)
    assert str(entries["detail"]).startswith("1 entry is quarantined: tenant-0003 (")


def test_doctor_full_finds_an_invalid_entry_anywhere(api: Periodiq) -> None:
    api.add_many(tenants(300))
    api.store.client.hset(api.store.keys.of("tenant-0123").entries, "tenant-0123", "{not json")

    checks = {check.name: check for check in api.diagnose(sample=None)}

    assert checks["entries"].status == "fail"
    assert checks["entries"].detail.startswith("1 entry is quarantined: tenant-0123 (")
    assert checks["entries"].scope is not None
    assert checks["entries"].scope.checked == 300


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sample", "0"], "Invalid value for '--sample': 0 is not in the range x>=1"),
        (["--sample", "many"], "Invalid value for '--sample': 'many' is not a valid integer"),
        (["--sample", "5", "--full"], "give --sample N or --full, not both"),
    ],
)
def test_doctor_refuses_malformed_options(api: Periodiq, args: list[str], words: str) -> None:
    result = cli(api.app, "doctor", *args)

    assert result.exit_code == 2
    assert words in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("sample", [0, -1, 2.5, True, "10"])
def test_diagnose_refuses_a_bad_sample(api: Periodiq, sample: object) -> None:
    with pytest.raises(PeriodiqError, match=r"sample=.* is invalid \(allowed: a whole number"):
        api.diagnose(sample=sample)  # type: ignore[arg-type]
