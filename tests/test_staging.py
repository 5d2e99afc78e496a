"""Staged release: a burst claimed and rendered ahead is in the queue at its instant,
never before, each tick once; a change made before the instant is honoured.

Real clock, real Redis (schedule and broker), beats as in-process Dispatchers: a thread
pops the broker's list as messages arrive and stamps each; the staging settings make
a handful of entries a burst (``periodiq_stage_min``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.api import Periodiq
from celery_periodiq.beat import staging
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.partitions import POLL_MS
from celery_periodiq.ops.doctor import diagnose
from celery_periodiq.protocol.headers import HEADER_ENTRY, HEADER_TICK
from celery_periodiq.protocol.records import RunEnd, RunStart
from tests.processes import wait_for


def staging_app(
    redis_url: str, broker_url: str, lease: float = 10, **settings: Any
) -> tuple[Celery, Periodiq]:
    app = Celery("staging", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_claim_lease = lease
    app.conf.periodiq_stage_min = 1
    app.conf.periodiq_stage_horizon = 30
    app.conf.update(settings)
    return app, periodiq(app)


class Arrivals:
    """Pops the broker's queue as messages arrive, stamping each (ms, host clock)."""

    def __init__(self, broker_url: str, queue: str = "celery") -> None:
        self.got: list[tuple[float, dict[str, Any]]] = []
        self.client = redis.Redis.from_url(broker_url)
        self.queue = queue
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        while not self.stopped.is_set():
            popped = self.client.brpop([self.queue], timeout=0.2)
            if popped is not None:
                self.got.append((time.time() * 1000, json.loads(popped[1])))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.client.close()

    def early(self) -> list[tuple[float, object]]:
        return [
            (at, message["headers"][HEADER_TICK])
            for at, message in self.got
            if at < message["headers"][HEADER_TICK]
        ]

    def entries(self) -> list[str]:
        return sorted(message["headers"][HEADER_ENTRY] for _, message in self.got)

    def ids(self) -> list[str]:
        return [message["headers"]["id"] for _, message in self.got]


def run_beats(beats: list[Dispatcher], until: Callable[[], bool], seconds: float) -> None:
    """Run passes of ``beats`` in turn until ``until()`` or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        waits = []
        for beat in beats:
            done = beat.dispatch()
            waits.append(0.0 if done.full else (done.seconds_until_next() or 0.2))
        threading.Event().wait(min(min(waits), 0.05))


def burst(api: Periodiq, count: int, seconds: float) -> datetime:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=seconds)
    api.add_many(
        {"name": f"e-{n:03d}", "task": "proj.t", "every": 3600, "start_at": start}
        for n in range(count)
    )
    return start


@pytest.mark.compat
def test_a_staged_burst_is_in_the_queue_at_its_instant_never_before_each_tick_once(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    start = burst(api, 200, 4)
    arrivals = Arrivals(broker_url)
    beats = [Dispatcher(app, api.store, "beat-a"), Dispatcher(app, api.store, "beat-b")]
    run_beats(beats, lambda: start < datetime.now(UTC) - timedelta(seconds=1), 10)
    arrivals.stop()

    # staging writes as kombu 5.7's batch publishing does; below it (the compat suite's
    # oldest kombu) nothing is staged and each tick is sent at its instant, as usual
    batches = hasattr(import_module("kombu.transport.redis").Channel, "supports_batch_publish")
    assert sum(beat._stager.staged_count for beat in beats) == (200 if batches else 0)
    assert arrivals.early() == []
    assert arrivals.entries() == [f"e-{n:03d}" for n in range(200)]
    assert len(set(arrivals.ids())) == 200
    assert all(api.get(f"e-{n:03d}").state.get("last_tick") for n in (0, 199))


def test_an_entry_paused_edited_or_deleted_after_staging_is_not_released_as_staged(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    start = burst(api, 20, 4)
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 20, 3)
    assert beat._stager.staged_count == 20
    api.pause("e-000")
    api.delete("e-001")
    api.update("e-002", args=[42])
    beat.touch()  # what the beat's change listener does
    run_beats([beat], lambda: start < datetime.now(UTC) - timedelta(seconds=1), 8)
    arrivals.stop()

    entries = arrivals.entries()
    assert "e-000" not in entries  # paused
    assert "e-001" not in entries  # deleted
    assert entries.count("e-002") == 1  # edited: its new definition's message only
    (edited,) = [got for _, got in arrivals.got if got["headers"][HEADER_ENTRY] == "e-002"]
    assert "42" in edited["headers"]["argsrepr"]
    # settled: its next tick is scheduled, an interval on
    assert int(api.get("e-002").state["next"]) == int(start.timestamp() * 1000) + 3_600_000
    assert arrivals.early() == []
    assert len(entries) == 19 - 1


def test_messages_a_dead_beat_staged_are_released_at_their_instant_by_another_beat(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url, lease=1)
    start = burst(api, 20, 4)
    arrivals = Arrivals(broker_url)
    dead, alive = Dispatcher(app, api.store, "beat-dead"), Dispatcher(app, api.store, "beat-b")
    run_beats([dead], lambda: dead._stager.staged_count >= 20, 3)
    assert dead._stager.staged_count == 20
    # the staging beat is gone (it never runs again); the other one has nothing of its own
    run_beats([alive], lambda: len(arrivals.got) >= 20, 8)

    def settled() -> bool:  # a lease after the instant, the dead beat's claims are taken over
        return all(api.get(f"e-{n:03d}").state.get("last_tick") for n in range(20))

    run_beats([alive], settled, 8)
    arrivals.stop()  # a message sent again was pushed before its claim was settled

    assert settled()
    assert redis.Redis.from_url(broker_url).llen("celery") == 0
    assert alive._stager.staged_count == 0
    assert arrivals.entries() == [f"e-{n:03d}" for n in range(20)]
    assert arrivals.early() == []
    assert min(at for at, _ in arrivals.got) >= start.timestamp() * 1000


def test_staged_messages_the_broker_lost_are_sent_at_their_instant_the_usual_way(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    burst(api, 20, 4)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 20, 3)
    assert beat._stager.staged_count == 20
    (broker_check,) = [check for check in diagnose(api.runtime) if check.name == "broker"]
    assert "20 messages staged for their instant" in broker_check.detail
    redis.Redis.from_url(broker_url).flushall()  # a broker restarted without its data
    arrivals = Arrivals(broker_url)
    run_beats([beat], lambda: len(arrivals.got) >= 20, 8)
    arrivals.stop()

    assert arrivals.entries() == [f"e-{n:03d}" for n in range(20)]
    assert arrivals.early() == []
    assert all(api.get(f"e-{n:03d}").state.get("last_tick") for n in range(20))


def test_ticks_over_the_staging_cap_are_sent_at_their_instant_the_usual_way(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url, periodiq_stage_max=12)
    burst(api, 20, 4)
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: len(arrivals.got) >= 20, 10)
    arrivals.stop()

    assert beat._stager.staged_count == 12  # the cap: the others waited in the beat
    assert arrivals.entries() == [f"e-{n:03d}" for n in range(20)]
    assert len(set(arrivals.ids())) == 20
    assert arrivals.early() == []


def test_a_tick_whose_earlier_run_was_unfinished_at_its_claim_is_decided_at_its_instant(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    burst(api, 5, 4)
    # e-000's earlier run is unfinished when the burst is claimed (overlap "skip")
    api.store.scripts.begin(
        "e-000", RunStart("r0", None, 0, "skip", 60_000, 0, "h", 10, published=False)
    )
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 4, 3)
    api.store.scripts.finish("e-000", RunEnd("r0", None, "succeeded", "", 5, "h", 10))
    run_beats([beat], lambda: len(arrivals.got) >= 5, 8)
    arrivals.stop()

    assert beat._stager.staged_count == 4  # e-000 waited in the beat, to be decided then
    assert arrivals.entries() == [f"e-{n:03d}" for n in range(5)]  # it was free by then
    assert arrivals.early() == []


def test_a_burst_released_onto_a_queue_with_messages_waiting_goes_behind_them(
    redis_url: str, broker_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a few messages per release call: the release stops and goes on where it stopped
    monkeypatch.setattr(staging, "_RELEASE_MOST", 7)
    app, api = staging_app(redis_url, broker_url)
    start = burst(api, 60, 4)
    broker = redis.Redis.from_url(broker_url)
    broker.lpush("celery", b"waiting")  # no worker drains the queue meanwhile
    beat = Dispatcher(app, api.store, "beat-a")
    lengths: list[tuple[float, int]] = []

    def released() -> bool:
        lengths.append((time.time() * 1000, int(broker.llen("celery"))))
        return lengths[-1][1] > 60 - 3 + 1 and start < datetime.now(UTC)

    run_beats([beat], lambda: beat._stager.staged_count >= 60, 3)
    api.pause("e-000")  # changed after staging: its instant's messages are looked at
    api.update("e-001", args=[42])
    beat.touch()
    run_beats([beat], released, 8)
    run_beats([beat], lambda: False, 0.5)  # anything more would be a copy

    # e-001's new claim was given to the stage script too, which kept its first copy
    assert beat._stager.staged_count == 61
    instant = start.timestamp() * 1000
    assert {length for at, length in lengths if at < instant - 5} == {1}  # none early
    in_order = broker.lrange("celery", 0, -1)[::-1]  # as a worker pops them
    assert in_order[0] == b"waiting"
    entries = [json.loads(message)["headers"][HEADER_ENTRY] for message in in_order[1:]]
    assert sorted(entries) == [f"e-{n:03d}" for n in range(1, 60)]  # each once, e-000 not
    assert entries[-1] == "e-001"  # sent the usual way after the release, when due anew


def test_staged_messages_name_their_entry_as_periodic_task_name(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    start = burst(api, 30, 4)  # one task: the entries share one message template
    arrivals = Arrivals(broker_url)
    beats = [Dispatcher(app, api.store, "beat-a")]
    run_beats(beats, lambda: start < datetime.now(UTC) - timedelta(seconds=1), 10)
    arrivals.stop()

    assert beats[0]._stager.staged_count == 30
    headers = [message["headers"] for _, message in arrivals.got]
    assert arrivals.entries() == [f"e-{n:03d}" for n in range(30)]
    assert [h.get("periodic_task_name") for h in headers] == [h[HEADER_ENTRY] for h in headers]


def test_a_beat_holding_staged_claims_does_not_claim_pass_after_pass_until_their_instant(
    redis_url: str, broker_url: str
) -> None:
    # A lease shorter than how far ahead the beat claims (2 s at the least): the claims'
    # rechecks (their lease running out) and the sweeps fall within the horizon, where
    # nothing can be claimed before their moment: a partition whose next moment is a
    # recheck is claimed once in POLL_MS, and a sweep comes at its moment.
    app, api = staging_app(redis_url, broker_url, lease=1)
    start = burst(api, 20, 4)
    later = start + timedelta(seconds=20)  # due within the stage horizon: claimed ahead too
    api.add_many({"name": "later", "task": "proj.t", "every": 3600, "start_at": later} for _ in "1")
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 20, 4)
    assert beat._stager.staged_count == 20
    assert start.timestamp() - time.time() > 1, "staged too late for the test"
    passes, began = 0, time.monotonic()
    while (left := start.timestamp() - 0.1 - time.time()) > 0:  # as the scheduler does
        done = beat.dispatch()
        passes += 1
        wait = done.seconds_until_next()
        threading.Event().wait(left if wait is None else min(wait, left))
    took = time.monotonic() - began
    polls, sweeps = took / (POLL_MS / 1000), took / 1
    # before: pass after pass from the horizon before the rechecks (45,729 passes in 1.7 s),
    # then in the horizon before each sweep (907 in 1.8 s)
    assert passes <= polls + sweeps + 5, f"{passes} passes in {took:.2f} s"
    print(f"{passes} passes in {took:.2f} s")


def test_ticks_due_with_a_released_burst_but_not_staged_go_out_before_its_settlements(
    redis_url: str, broker_url: str
) -> None:
    # One partition, 5 ticks claimed a pass: the 30 entries added once the burst was
    # staged are claimed at the instant, 6 passes for them. The burst's settlements
    # (tens of microseconds each in Redis: seconds for 100,000) wait until they are out.
    app, api = staging_app(redis_url, broker_url, periodiq_batch_size=5, periodiq_partitions=1)
    start = burst(api, 40, 4)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 40, 3)
    assert beat._stager.staged_count == 40
    api.add_many(
        {"name": f"u-{n:03d}", "task": "proj.t", "every": 3600, "start_at": start}
        for n in range(30)
    )
    beat.touch()  # what the beat's change listener does; no pass before the instant
    assert start.timestamp() - time.time() > 0.2, "staged too late for the test"
    queue = redis.Redis.from_url(broker_url)
    wait_for(lambda: time.time() > start.timestamp() + 0.05, 5, "the instant")
    seen: list[tuple[int, int]] = []  # after each pass: unstaged ticks out, burst settled
    while len(seen) < 50 and (not seen or seen[-1] != (30, 40)):
        beat.dispatch()
        queued = [json.loads(raw)["headers"] for raw in queue.lrange("celery", 0, -1)]
        unstaged = sum(headers[HEADER_ENTRY].startswith("u-") for headers in queued)
        settled = sum(bool(api.get(f"e-{n:03d}").state.get("last_tick")) for n in range(40))
        seen.append((unstaged, settled))
    ids = [headers["id"] for headers in queued]
    queue.close()

    assert seen[-1] == (30, 40), seen
    assert len(seen) >= 6, seen  # a batch a pass: the test's premise
    assert all(settled == 0 for sent, settled in seen if sent < 30), seen
    assert len(ids) == len(set(ids)) == 70


def test_a_window_added_after_staging_holds_the_staged_ticks_it_covers(
    redis_url: str, broker_url: str
) -> None:
    app, api = staging_app(redis_url, broker_url)
    start = burst(api, 20, 4)
    api.update("e-000", owner="ops")
    arrivals = Arrivals(broker_url)
    beat = Dispatcher(app, api.store, "beat-a")
    run_beats([beat], lambda: beat._stager.staged_count >= 20, 3)
    assert beat._stager.staged_count == 20
    api.add_window("freeze", scope="owner:ops", start=start - timedelta(seconds=1),
                   end=start + timedelta(minutes=5))  # fmt: skip
    api.add_window("e-001", scope="entry:e-001", start=start - timedelta(seconds=1),
                   end=start + timedelta(minutes=5))  # fmt: skip
    beat.touch()  # what the beat's change listener does
    run_beats([beat], lambda: start < datetime.now(UTC) - timedelta(seconds=1), 8)
    arrivals.stop()

    entries = arrivals.entries()
    assert "e-000" not in entries  # its owner's window
    assert "e-001" not in entries  # its own window
    assert len(entries) == len(set(entries)) == 18  # the others released as staged
    kinds = {event.kind for name in ("e-000", "e-001") for event in api.history(name)}
    assert "skipped_window" in kinds
    assert arrivals.early() == []
