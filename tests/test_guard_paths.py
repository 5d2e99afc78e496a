"""Guard paths that could lose or repeat a run, on a real Redis and an injected clock.

A begin sent again with its attempt token (its reply lost, its replicas behind) while
another tick began; a settlement written late, after the entry was updated; a copy of a
tick discarded (expired or revoked in the queue) while the tick's run goes on. Each is
driven through the real scripts (begin.lua, finish.lua, claim.lua, ack.lua), the beat's
real Settler and the real guard of a PeriodicTask run eagerly in this process.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery

from celery_periodiq import PeriodicTask, Periodiq, periodiq
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.beat.publish import Publisher
from celery_periodiq.beat.settle import Settler
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import Tick, to_ms
from celery_periodiq.protocol.records import RunEnd, RunStart

pytestmark = pytest.mark.compat  # make compat: on every server and library set

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> int:
    return to_ms(T0 + timedelta(seconds=seconds))


def start(task_id: str, tick: int | None, attempt: str, **options: Any) -> RunStart:
    return RunStart(
        task_id=task_id, tick_ms=tick, min_gap_ms=0, overlap=options.pop("overlap", "skip"),
        ttl_ms=90_000, retries=0, host="h", history_length=20, attempt=attempt, **options,
    )  # fmt: skip


def app_on(redis_url: str, name: str, **settings: Any) -> Celery:
    app = Celery(name, broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.update(settings)
    return app


def job_every_minute(redis_url: str, name: str) -> tuple[Periodiq, Any]:
    """The API of an app ``name`` on ``redis_url`` with one entry, "job", every minute
    from T0, and its scripts."""
    api = periodiq(app_on(redis_url, name))
    api.add("job", "proj.t", every=60, start_at=T0)
    return api, api.store.scripts


def raw_state(api: Any) -> dict[str, Any]:
    """The entry's state as stored (markers included, whatever the real clock says)."""
    return dict(json.loads(api.store.client.hget(api.store.keys.of("job").state, "job")))


# a begin sent again with its token


@pytest.mark.parametrize(
    "how",
    [{"overlap": "allow"}, {"overlap": "buffer_one"}, {"overlap": "allow", "plain": True}],
    ids=["allow", "buffer_one", "plain"],
)
def test_a_begin_sent_again_is_its_own_though_another_tick_began_meanwhile(
    redis_url: str, how: dict[str, Any]
) -> None:
    # 3 of 4 catch-up runs were lost: each re-sent its begin (its replicas behind) after
    # the next tick's run had begun, and was refused as a duplicate of itself.
    api, scripts = job_every_minute(redis_url, "resent")

    first = scripts.begin("job", start("run-1", at(60), "a1", **how), at(60))
    other = scripts.begin("job", start("run-2", at(120), "b2", **how), at(61))
    again = scripts.begin("job", start("run-1", at(60), "a1", **how), at(62))  # reply lost
    copy = scripts.begin("job", start("run-1", at(60), "c3", **how), at(63))  # another copy

    assert (first.outcome, other.outcome, again.outcome) == ("started", "started", "started")
    assert copy.outcome == "duplicate"
    assert api.get("job").counters == {"started": 2, "duplicate": 1}
    api.store.client.close()


def test_a_begin_sent_again_is_recognised_among_the_newest_starts_only(redis_url: str) -> None:
    # each start keeps its token among the entry's newest starts, no more (memory)
    api, scripts = job_every_minute(redis_url, "resent-window")
    scripts.begin("job", start("run-0", at(60), "first", overlap="allow"), at(60))
    for n in range(1, 17):
        scripts.begin("job", start(f"run-{n}", at(60 + 60 * n), f"t{n}", overlap="allow"), at(61))

    again = scripts.begin("job", start("run-0", at(60), "first", overlap="allow"), at(62))
    latest = scripts.begin("job", start("run-16", at(1020), "t16", overlap="allow"), at(62))

    assert again.outcome == "duplicate"  # 16 starts later: taken for a copy, never run twice
    assert latest.outcome == "started"
    api.store.client.close()


def test_a_run_that_ended_leaves_no_token_behind(redis_url: str) -> None:
    # tokens are kept for runs that have not ended (only they may send a begin again):
    # an entry whose runs end keeps none (memory)
    api, scripts = job_every_minute(redis_url, "ended-tokens")
    for n, attempt in enumerate(["a1", "b2"], 1):
        scripts.begin("job", start(f"run-{n}", at(60 * n), attempt, overlap="allow"), at(60 * n))
    scripts.finish("job", RunEnd("run-1", at(60), "succeeded", "", 5, "h", 20, attempt="a1"))
    left = raw_state(api).get("tokens")
    scripts.finish("job", RunEnd("run-2", at(120), "failed", "E", 5, "h", 20, attempt="b2"))

    assert left == ["b2"]
    assert "tokens" not in raw_state(api)
    api.store.client.close()


# a settlement written late, after the entry was updated


class Beats:
    """One entry every 60 s, a beat A whose settlement can be held back (a frozen beat,
    or its ack failed and kept), a beat B that dispatches as usual, and the entry's
    guarded task, all on one injected clock."""

    def __init__(self, redis_url: str) -> None:
        self.now = at(0)
        self.app = app_on(redis_url, "late", periodiq_claim_lease=600)
        self.api = periodiq(self.app)
        self.store = self.api.store
        beats = self

        class Guarded(PeriodicTask):  # type: ignore[misc]
            periodiq_clock = staticmethod(lambda: beats.now)

        @self.app.task(base=Guarded, name="job", shared=False)
        def job() -> None:
            pass

        self.task = job
        self.entry = build_entry("job", "job", every=60, start_at=T0)
        self.store.put("add", [self.entry], now_ms=self.now)
        self.beat_b = Dispatcher(self.app, self.store, "beat-b")
        self.settler = Settler(Publisher(self.app), self.store.settings)
        self.part = self.store.keys.of("job")

    def claim_and_publish_on_a(self, seconds: float) -> Any:
        """Beat A claims and publishes the due tick and stops before its ack: its
        settlement, to be written later."""
        self.now = at(seconds)
        batch = self.store.scripts.claim(self.part, "beat-a", 10, 600_000, self.now)
        [claim] = batch.claims
        sent: list[tuple[str, Tick]] = []
        with self.app.producer_or_acquire() as producer:
            return self.settler.settle(claim, producer, self.now, sent)

    def ack_on_a(self, settlement: Any) -> None:
        self.store.scripts.ack(self.part, "beat-a", 20, [settlement])

    def dispatch_on_b(self, seconds: float) -> None:
        self.now = at(seconds)
        self.beat_b.dispatch(now_ms=self.now)

    def update(self, seconds: float) -> None:
        self.now = at(seconds)
        self.store.put("update", [build_entry("job", "job", every=60, start_at=T0, args=[1])],
                       now_ms=self.now)  # fmt: skip

    def run(self, seconds: float) -> str:
        """The worker takes the newest message of the tick due at ``seconds``: the guard's
        verdict ("ran", or why it was refused)."""
        self.now = at(seconds)
        with self.app.connection_for_read() as connection:
            simple = connection.SimpleQueue("celery")
            messages = [simple.get(timeout=1) for _ in range(simple.qsize())]
            simple.close()
        headers = next(m.headers for m in reversed(messages) if m.headers["periodiq_tick"]
                       == at(seconds))  # fmt: skip
        result = self.task.apply(
            task_id=headers["id"],
            headers={key: value for key, value in headers.items() if key.startswith("periodiq_")},
        )
        if result.state == "IGNORED":
            return self.api.history("job", limit=1)[0].kind
        return "ran"


def test_a_settlement_written_after_an_update_neither_delays_nor_drops_the_next_ticks(
    redis_url: str,
) -> None:
    # The claim after the update copied the entry's prev from before the pending
    # settlement: the on-time tick at 180 s was given twice the minimum gap and dropped as
    # too soon; then the late settlement wrote its older prev over the newer one, and the
    # tick at 240 s was dropped too.
    beats = Beats(redis_url)
    beats.dispatch_on_b(60)
    assert beats.run(60) == "ran"
    pending = beats.claim_and_publish_on_a(120)
    assert beats.run(120) == "ran"
    beats.update(125)  # the entry is scheduled afresh while A's settlement waits

    beats.dispatch_on_b(180)
    at_180 = beats.run(180)
    beats.ack_on_a(pending)  # A writes its settlement at last
    after_late_ack = beats.api.get("job").state
    beats.dispatch_on_b(240)
    at_240 = beats.run(240)

    assert (at_180, at_240) == ("ran", "ran")
    # the late settlement wrote no older tick over the newer claim's
    assert (int(after_late_ack["prev"]), int(after_late_ack["last_tick"])) == (at(180), at(180))
    assert beats.api.get("job").counters.get("dropped_too_soon") is None
    beats.store.client.close()


def test_a_settlement_written_after_its_run_began_leaves_nothing_waiting(
    redis_url: str,
) -> None:
    # The late settlement marked its run as queued (and the entry as waiting since then)
    # although the run had begun: under overlap "buffer_one" the next tick was then held
    # back as if a run were waiting, and doctor said a message waited.
    beats = Beats(redis_url)
    pending = beats.claim_and_publish_on_a(60)
    assert beats.run(60) == "ran"

    beats.ack_on_a(pending)  # A writes its settlement at last
    batch = beats.store.scripts.claim(beats.part, "beat-a", 10, 600_000, at(120))

    assert "queued" not in raw_state(beats.api)
    assert "waiting_since" not in beats.api.get("job").state
    assert [claim.queued for claim in batch.claims] == [False]
    beats.store.client.close()


# a copy of a tick discarded while its run goes on


def test_a_discarded_copy_of_a_tick_leaves_its_live_run_alone(redis_url: str) -> None:
    # A copy of a tick (the same task id) that expired in the queue, or was revoked by
    # id, cleared the marker of the tick's run that was going on: the next tick started
    # beside it despite overlap "skip", and the status said "expired" while it ran.
    api, scripts = job_every_minute(redis_url, "discarded")
    scripts.begin("job", start("run-1", at(60), "a1"), at(60))

    copies = [
        scripts.finish("job", RunEnd("run-1", at(60), outcome, "", 0, "h", 20, ran=False), at(61))
        for outcome in ("expired", "revoked")
    ]
    stored, marker = api.get("job"), raw_state(api)["running"]
    next_tick = scripts.begin("job", start("run-2", at(120), "b2"), at(120))

    assert marker[0] == "run-1"  # the run's marker is still its own
    assert stored.state["last_status"] == "running"
    assert next_tick.outcome == "skipped_overlap"
    assert copies == ["duplicate", "duplicate"]  # neither changed the run: no check-in
    assert api.get("job").counters == {"started": 1, "duplicate": 2, "skipped_overlap": 1}
    api.store.client.close()


def test_a_discarded_copy_of_a_tick_whose_run_ended_is_a_duplicate(redis_url: str) -> None:
    api, scripts = job_every_minute(redis_url, "discarded-late")
    scripts.begin("job", start("run-1", at(60), "a1"), at(60))
    scripts.finish("job", RunEnd("run-1", at(60), "succeeded", "", 5, "h", 20), at(61))

    copy = scripts.finish("job", RunEnd("run-1", at(60), "expired", "", 0, "h", 20, ran=False))

    assert copy == "duplicate"
    assert api.get("job").state["last_status"] == "succeeded"
    assert api.get("job").counters == {"started": 1, "succeeded": 1, "duplicate": 1}
    api.store.client.close()


def test_a_retry_revoked_in_the_queue_ends_its_run(redis_url: str) -> None:
    # the one message that never ran yet holds its run's marker: a retry waiting
    api, scripts = job_every_minute(redis_url, "retry-revoked")
    scripts.begin("job", start("run-1", at(60), "a1"), at(60))
    retrying = RunEnd("run-1", at(60), "retrying", "", 5, "h", 20, final=False, retry_ttl_ms=9000)
    scripts.finish("job", retrying, at(61))

    ended = scripts.finish("job", RunEnd("run-1", at(60), "revoked", "", 0, "h", 20, ran=False))

    assert ended == "revoked"
    assert "running" not in raw_state(api)
    assert api.get("job").state["last_status"] == "revoked"
    api.store.client.close()


def test_a_message_that_expired_before_its_tick_ran_is_recorded_as_expired(
    redis_url: str,
) -> None:
    api = periodiq(app_on(redis_url, "expired"))
    api.add("job", "proj.t", every=60, start_at=T0)

    outcome = api.store.scripts.finish(
        "job", RunEnd("run-1", at(60), "expired", "", 0, "h", 20, ran=False)
    )

    assert outcome == "expired"
    assert api.get("job").counters == {"expired": 1}
    assert api.get("job").state.get("last_status") is None
    api.store.client.close()
