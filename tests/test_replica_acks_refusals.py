"""A worker's refusal (too soon, a duplicate, an overlap, expired) is let go only once the
replicas have its record, as a start is run only once they have it: a failover before
then would lose the record of why the tick did not run, and its message is consumed.

begin.lua knows a refused begin sent again by its attempt token and tells it the same
refusal, recorded once, whatever changed since.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.protocol.records import RunEnd, RunStart
from celery_periodiq.worker.begin import begin_run
from tests.processes import wait_for
from tests.test_replica_acks import START, acked_app, primary, synced_replica

__all__ = ["primary"]  # the fixture, imported


def run_start(task_id: str, tick_ms: int, attempt: str) -> RunStart:
    return RunStart(
        task_id=task_id, tick_ms=tick_ms, min_gap_ms=0, overlap="skip", ttl_ms=600_000,
        retries=0, host="h", history_length=20, attempt=attempt,
    )  # fmt: skip


FIRST, SECOND = to_ms(START + timedelta(seconds=60)), to_ms(START + timedelta(seconds=120))
APP = "refusals"


@pytest.fixture
def started(primary: LocalRedis, broker_url: str) -> Iterator[Periodiq]:
    """The API (no replica acks) of entry "acked", whose tick FIRST's run "one" (attempt
    token "a1") started."""
    app, _, _ = acked_app(primary, broker_url, APP)
    app.conf.periodiq_replica_acks = 0  # no replica: every reply is returned at once
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    assert api.store.scripts.begin("acked", run_start("one", FIRST, "a1"), FIRST).outcome == (
        "started"
    )
    yield api
    api.store.client.close()


def stored_state(api: Periodiq) -> Any:
    """The entry "acked"'s state as begin.lua keeps it."""
    return json.loads(api.store.client.hget(api.store.keys.of("acked").state, "acked") or "{}")


def test_a_refused_begin_sent_again_is_told_the_same_refusal_recorded_once(
    started: Periodiq,
) -> None:
    # Before: the begin sent again was decided afresh; the run it overlapped had ended
    # meanwhile, so it started, and the entry recorded both a refusal and a start of it.
    api, scripts = started, started.store.scripts

    refused = scripts.begin("acked", run_start("two", SECOND, "b2"), SECOND)
    scripts.finish("acked", RunEnd(task_id="one", tick_ms=FIRST, outcome="succeeded", error="",
                                   duration_ms=5, host="h", history_length=20, attempt="a1"),
                   SECOND + 5)  # fmt: skip
    again = scripts.begin("acked", run_start("two", SECOND, "b2"), SECOND + 10)  # reply lost
    other = scripts.begin("acked", run_start("two", SECOND, "c3"), SECOND + 20)  # a copy

    assert refused.outcome == again.outcome == "skipped_overlap"
    assert again.note == refused.note == "run one is unfinished"
    assert other.outcome == "started"  # another delivery, decided afresh: nothing runs now
    kinds = [event.kind for event in api.history("acked", limit=20)]
    assert kinds.count("skipped_overlap") == 1
    assert kinds.count("started") == 2
    assert api.get("acked").counters.get("skipped_overlap") == 1


def test_a_refused_begin_sent_again_after_four_other_refusals_is_decided_afresh(
    started: Periodiq,
) -> None:
    # The entry keeps its four newest refusals: what a begin sent again within seconds needs
    api, scripts = started, started.store.scripts
    copies = [scripts.begin("acked", run_start("one", FIRST, f"c{n}"), FIRST + n) for n in range(5)]
    again = scripts.begin("acked", run_start("one", FIRST, "c0"), FIRST + 10)

    assert [copy.outcome for copy in copies] == ["duplicate"] * 5
    assert again.outcome == "duplicate"  # decided afresh: the same answer, recorded again
    assert api.get("acked").counters.get("duplicate") == 6
    assert [refusal[0] for refusal in stored_state(api)["refused"]] == ["c0", "c4", "c3", "c2"]


def test_damaged_refusals_in_the_state_are_ignored_and_replaced(started: Periodiq) -> None:
    api = started
    key = api.store.keys.of("acked").state
    state = api.store.client.hget(key, "acked")
    assert state is not None
    damaged = state[:-1] + ', "refused": [["c1", 5], "c1", 7]}'  # written by someone else
    api.store.client.hset(key, "acked", damaged)

    copy = api.store.scripts.begin("acked", run_start("one", FIRST, "c1"), FIRST + 1)

    assert copy.outcome == "duplicate"
    assert stored_state(api)["refused"] == [["c1", "duplicate", "this tick already began"]]


def test_a_refusal_waits_until_a_replica_has_its_record_and_is_recorded_once(
    tmp_path: Path, primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the refusal was returned at once, its message let go, while no replica had
    # its record; the primary failing then lost the tick silently.
    caplog.set_level(logging.INFO, logger="celery_periodiq.task")
    replica = synced_replica(tmp_path, primary)
    app, acked, bodies = acked_app(primary, broker_url, "refusal-replicated")
    app.conf.periodiq_replica_timeout = 1  # a replica that answers does, on a loaded machine
    api = periodiq(app)
    api.add("acked", "proj.acked", every=60, start_at=START)
    tick = to_ms(START + timedelta(seconds=60))
    headers = {HEADER_ENTRY: "acked", HEADER_TICK: tick}
    assert acked.apply(args=[tick], task_id="first", headers=headers).state == "SUCCESS"
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)  # connected, but it acknowledges nothing
    outcome: list[str] = []
    copy = threading.Thread(
        target=lambda: outcome.append(
            acked.apply(args=[tick], task_id="copy", headers=headers).state
        )
    )
    try:
        copy.start()
        waits = "run copy waits: 0 of the 1 replicas required"
        wait_for(lambda: waits in caplog.text or not copy.is_alive(), 30, "the refused copy")
        assert copy.is_alive()  # its message is not let go
        assert "its refusal (duplicate) is written again until the replicas have it" in caplog.text
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    copy.join(30)

    assert outcome == ["IGNORED"]
    assert bodies == [tick]
    assert "run copy: the replicas have its refusal (duplicate) after " in caplog.text
    replica_client = redis.Redis(port=replica.port, decode_responses=True)
    recorded = replica_client.lrange(api.store.keys.of("acked").history("acked"), 0, -1)
    replica_client.close()
    assert sum('"duplicate"' in event for event in recorded) == 1  # sent again, recorded once
    assert api.get("acked").counters.get("duplicate") == 1
    replica.close()
    api.store.client.close()


def test_a_refusal_no_replica_acknowledges_is_let_go_after_thirty_seconds_and_said(
    started: Periodiq, primary: LocalRedis, broker_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # No replica at all, replica acks 1: every begin is behind. The Redis clock is
    # injected (begin.lua takes it as an argument): the second begin comes 31 s later.
    acked_api = periodiq(acked_app(primary, broker_url, APP)[0])
    clock = iter([FIRST + 1, FIRST + 31_001, FIRST + 31_002])
    logger = logging.getLogger("celery_periodiq.task")

    refusal = begin_run(acked_api.store, "acked", run_start("one", FIRST, "c1"), logger,
                        lambda: next(clock))  # fmt: skip

    assert refusal.outcome == "duplicate"
    assert next(clock) == FIRST + 31_002  # sent twice: once, and once more 31 s later
    assert "its refusal (duplicate) is written again until the replicas have it" in caplog.text
    assert "its refusal (duplicate) is recorded on the primary, but the replicas did not " \
        "have it" in caplog.text  # fmt: skip
    assert started.get("acked").counters.get("duplicate") == 1  # written twice, recorded once
    acked_api.store.client.close()
