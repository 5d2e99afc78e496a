"""An entry's identity outlives no delete: a claim or settlement made for an entry
that was deleted never applies to a new entry of the same name.

Beats are the real Dispatcher and the real Lua against a private Redis with "now"
injected (see tests/test_one_off.py); a claim left by a beat that died is made with
claim.lua directly, as that beat made it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from celery import Celery

from celery_periodiq import Periodiq
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.records import EventRow, Settlement
from tests.test_one_off import Beat


@pytest.fixture
def start(api: Periodiq) -> datetime:
    return api.now().replace(microsecond=0) + timedelta(days=1)


def claimed_by_a_beat_that_dies(api: Periodiq, at: datetime) -> object:
    parts = api.store.keys.all()
    lease = int(api.settings.claim_lease * 1000)
    batches = api.store.scripts.claim_many(parts, "dead-beat", 10, lease, to_ms(at))
    (claim,) = [claim for batch in batches for claim in batch.claims]
    return claim


def test_a_claim_of_a_deleted_entry_is_not_sent_for_a_new_one_of_that_name(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start)
    claimed_by_a_beat_that_dies(api, start)
    api.delete("job")
    once = start + timedelta(minutes=30)
    api.add("job", "proj.t", at=once)
    beat = Beat(app, api, "beat-b")

    after_the_lease = start + timedelta(seconds=api.settings.claim_lease + 1)
    assert beat.run(after_the_lease) == []  # the old claim is dropped, not taken over
    assert api.get("job").next_run == once
    assert beat.run(once) == [to_ms(once)]
    stored = api.get("job")
    assert (stored.status, stored.runs) == ("ended", 1)


def test_a_late_settlement_of_a_deleted_entry_changes_nothing_of_the_new_one(
    api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start)
    claim = claimed_by_a_beat_that_dies(api, start)
    api.delete("job")
    api.add("job", "proj.t", every=3600, start_at=start + timedelta(hours=1))
    before = api.get("job")
    late = start + timedelta(minutes=1)
    settlement = Settlement(
        claim.id, "job", claim.version, getattr(claim, "inc", None), to_ms(late), to_ms(late),
        counts={"enqueued": 1}, runs=1, events=(EventRow("enqueued", to_ms(start)),),
    )  # fmt: skip
    part = api.store.keys.of("job")

    settled = api.store.scripts.ack(part, "dead-beat", 20, [settlement])

    after = api.get("job")
    assert settled.settled == 1  # its claim is settled: nobody sends it again
    assert (after.next_run, after.runs, after.counters) == (before.next_run, 0, before.counters)
    assert api.history("job") == []
