"""Redis behind Sentinel: the store follows the primary the sentinels name.

A real Sentinel setup on loopback (``LocalSentinel``: a primary, two replicas,
three sentinels, ``down-after-milliseconds`` 1000): settings are checked, the API
works through it, and beats and a worker carry on when the primary is SIGKILLed.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.config import Settings, redacted, sentinel_hosts
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.localredis import LocalRedis, LocalSentinel
from celery_periodiq.store.topology import replicas
from tests.processes import cluster, wait_for, wait_while_growing

MASTER = {"master_name": "mymaster"}


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSentinel]:
    with LocalSentinel(tmp_path_factory.mktemp("sentinel")) as running:
        yield running


def through(sentinel: LocalSentinel, broker_url: str, name: str) -> Periodiq:
    """The API of an app whose schedule is behind ``sentinel``."""
    app = Celery(name, broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = sentinel.url
    app.conf.periodiq_redis_options = MASTER
    return periodiq(app)


def settings_of(url: str, **options: object) -> Settings:
    app = Celery("sentinel-settings", set_as_current=False)
    app.conf.periodiq_redis_url = url
    app.conf.periodiq_redis_options = options
    return Settings.from_app(app)


def test_a_sentinel_url_lists_every_sentinel_the_database_and_the_password() -> None:
    url = "sentinel://:s3cret@h1:26379;sentinel://h2:26380;sentinel://h3:26381/2"

    assert sentinel_hosts(url) == ([("h1", 26379), ("h2", 26380), ("h3", 26381)], 2, None, "s3cret")
    assert redacted(url) == "sentinel://***@h1:26379;sentinel://h2:26380;sentinel://h3:26381/2"
    assert settings_of(url, **MASTER).redis_url == url


@pytest.mark.parametrize(
    ("url", "options", "words"),
    [
        ("sentinel://h1:26379", {}, ["master_name", "mymaster"]),
        ("sentinel://h1:26379", {"master_name": ""}, ["master_name"]),
        ("sentinel://h1", MASTER, ["sentinel://host:port"]),
        ("sentinel://h1:26379;redis://h2:6379", MASTER, ["sentinel://host:port"]),
        ("sentinel://h1:26379/zero", MASTER, ["database number"]),
        ("sentinel://h1:26379", {**MASTER, "sentinel_kwargs": "x"}, ["sentinel_kwargs"]),
        ("sentinel://:pw@h1:notaport", MASTER, ["sentinel://***@h1:notaport"]),
    ],
)
def test_a_bad_sentinel_setting_is_refused_with_a_clear_error(
    url: str, options: dict[str, object], words: list[str]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        settings_of(url, **options)

    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert "pw" not in str(caught.value)


def test_sentinel_and_redis_cluster_do_not_combine() -> None:
    app = Celery("sentinel-settings", set_as_current=False)
    app.conf.periodiq_redis_url = "sentinel://h1:26379"
    app.conf.periodiq_redis_options = MASTER
    app.conf.periodiq_redis_cluster = True

    with pytest.raises(ConfigurationError, match="periodiq_redis_cluster"):
        Settings.from_app(app)


@pytest.mark.compat
def test_the_api_works_through_sentinel_and_after_a_failover(
    sentinel: LocalSentinel, broker_url: str
) -> None:
    api = through(sentinel, broker_url, "through-sentinel")
    api.add("report", "proj.report", every=60, owner="tests")
    first = sentinel.primary()
    assert first is not None
    assert api.store.client.wait(2, 5000) == 2  # both replicas have it before the kill

    sentinel.kill_primary()
    wait_for(lambda: sentinel.primary() not in (None, first), 30, "a replica to be promoted")
    stored = wait_for(lambda: _get(api, "report"), 30, "the API to reach the new primary")

    assert stored.entry is not None
    assert stored.entry.owner == "tests"
    api.add("after", "proj.report", every=60, owner="tests")
    assert sorted(entry.name for entry in api.list(owner="tests")) == ["after", "report"]
    first.start()  # back, as a replica of the new primary (the sentinels reconfigure it)
    api.delete_owner("tests")
    api.store.client.close()


def test_doctor_shows_the_primary_its_replicas_and_the_sentinels(
    sentinel: LocalSentinel, broker_url: str
) -> None:
    api = through(sentinel, broker_url, "doctor-sentinel")
    app = api.app
    # a primary killed by an earlier test rejoins as a replica a few seconds after it restarts
    wait_for(lambda: _online_replicas(api) == 2, 60, "both replicas to be in sync")
    primary = wait_for(sentinel.primary, 30, "the sentinels to agree on a primary")

    report = {check.name: check for check in api.diagnose()}["sentinel"]

    assert report.status == "ok", report.detail
    assert f"primary 127.0.0.1:{primary.port} ('mymaster')" in report.detail
    assert "2 replicas: 127.0.0.1:" in report.detail
    assert ", lag " in report.detail
    assert report.detail.endswith("3 of 3 sentinels answer")

    app.conf.periodiq_redis_url = sentinel.url.replace(
        f"sentinel://127.0.0.1:{sentinel.sentinel_ports[0]}", "sentinel://127.0.0.1:1"
    )
    vars(app).pop("_periodiq_client", None)
    degraded = {check.name: check for check in periodiq(app).diagnose()}["sentinel"]
    assert degraded.status == "warn"
    assert degraded.detail.endswith("2 of 3 sentinels answer")
    api.store.client.close()


def _online_replicas(api: Periodiq) -> int:
    return len(replicas(api.store.client.info("replication"), "online"))


def _get(api: Periodiq, name: str) -> object:
    try:
        return api.get(name)
    except Exception:  # the old primary's connection fails until the client re-asks
        return None


def test_beats_and_a_worker_follow_two_failovers_in_a_row_running_no_tick_twice(
    tmp_path: Path, sentinel: LocalSentinel
) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        LocalRedis(tmp_path / "runs") as runs,
        cluster(tmp_path, sentinel.url, broker.url, TEST_RUNS_URL=runs.url,
                TEST_REDIS_OPTIONS=json.dumps(MASTER), TEST_REPLICA_ACKS="1") as running,
    ):  # fmt: skip
        names = [f"every-second-{n}" for n in range(6)]
        api = running.firing(names, task="guarded_record")

        took = []
        for _ in range(2):
            killed = sentinel.kill_primary()
            killed_at = time.time()
            wait_for(lambda: sentinel.primary() not in (None, killed), 30, "a promotion")  # noqa: B023
            wait_for(
                lambda: all(any(r["at"] > killed_at + 1 for r in running.runs_of(name))  # noqa: B023
                            for name in names),
                60, "every entry to fire again after the failover",
            )  # fmt: skip
            took.append(time.time() - killed_at)
            killed.start()  # it comes back as a replica of the new primary
            wait_for(lambda: sentinel.in_sync(), 30, "both replicas in sync")

        print(f"failovers: every entry fired again {took[0]:.1f} s and {took[1]:.1f} s "
              "after each kill")  # fmt: skip
        # The same processes carried on: nobody restarted them.
        assert all(process.running for process in running.processes), running.logs()
        assert max(took) < 30
        assert running.twice() == []
        api.delete_owner("tests")
        api.store.client.close()


@pytest.mark.timeout(600)  # 5,000 runs at a loaded machine's pace
def test_a_failover_during_a_burst_of_5000_ticks_runs_each_exactly_once_none_refused(
    tmp_path: Path, sentinel: LocalSentinel
) -> None:
    with (
        LocalRedis(tmp_path / "broker") as broker,
        LocalRedis(tmp_path / "runs") as runs,
        cluster(tmp_path, sentinel.url, broker.url, TEST_RUNS_URL=runs.url,
                TEST_REDIS_OPTIONS=json.dumps(MASTER), TEST_REPLICA_ACKS="1") as running,
    ):  # fmt: skip
        api = running.api()
        worker = running.worker(pool="threads")
        running.beat("beat-1")
        running.beat("beat-2")
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        due = datetime.fromtimestamp(math.ceil(time.time()) + 4, UTC)
        names = [f"tenant-{n}" for n in range(5000)]
        api.add_many(
            {"name": name, "task": "guarded_record", "every": 3600,
             "start_at": due - timedelta(hours=1), "owner": "tests"}
            for name in names
        )  # fmt: skip
        sent, ran = redis.Redis.from_url(broker.url), redis.Redis.from_url(runs.url)
        wait_for(lambda: sent.llen("celery") + ran.llen("runs") >= 500, 30,
                 "the burst to begin", interval=0.005)  # fmt: skip
        killed = sentinel.kill_primary()
        in_flight_at_kill = sent.llen("celery") + ran.llen("runs")
        killed_at = time.monotonic()
        wait_for(lambda: sentinel.primary() not in (None, killed), 30, "a promotion")

        def done() -> set[str]:
            return {r["entry"] for r in running.runs()}

        try:  # the pace is the machine's: only a stall fails
            wait_while_growing(lambda: len(done()), len(names), 60,
                               "every tick of the burst to run")  # fmt: skip
        except AssertionError as error:  # what was left, and what the processes said
            left = api.store.client
            raise AssertionError(
                f"{error}: {len(done())} of 5000 ran, {len(_refused(api, names, done()))} "
                f"refused; {sent.llen('celery')} messages queued; in flight: "
                f"{sum(left.zcard(part.inflight) for part in api.store.keys.all())}\n"
                f"{running.logs()[-20000:]}"
            ) from None
        took = time.monotonic() - killed_at
        waits = [float(seconds) for seconds in re.findall(
            r"the replicas have its start after (\d+\.\d+) s", worker.output())]  # fmt: skip

        print(
            f"burst: {in_flight_at_kill} of 5000 ticks sent when the primary was killed; "
            f"all 5000 had run {took:.1f} s after the kill; {len(waits)} runs waited for the "
            f"replicas to have their start, the longest {max(waits, default=0.0):.1f} s"
        )
        assert in_flight_at_kill < 5000  # the kill came during the burst
        assert running.twice() == []
        assert len(running.runs()) == len(names)  # each exactly once
        assert " not started" not in worker.output()  # none refused for want of a replica
        assert all(process.running for process in running.processes), running.logs()
        killed.start()
        wait_for(lambda: sentinel.in_sync(), 30, "both replicas in sync")
        sent.close()
        ran.close()
        api.delete_owner("tests")
        api.store.client.close()


def _refused(api: Periodiq, names: list[str], ran: set[str]) -> set[str]:
    """Entries not in ``ran`` whose run was refused because no replica acknowledged it."""
    return {
        name for name in names if name not in ran
        and any(event.kind == "revoked" and "replicas required" in
                event.fields.get("error", "") for event in api.history(name, limit=5))
    }  # fmt: skip
