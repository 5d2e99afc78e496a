"""An entry neither due nor in flight would never run again: doctor says so, and
``doctor --reindex`` schedules it again.

Every script keeps an entry that should run in its partition's due set or in flight;
these tests put one in neither the way damaged data or a write from outside periodiq
could (the bug of ack.lua fixed with them did too), and check that ``diagnose`` names
it, leaves alone what is in flight, paused, disabled, ended or a cluster-event entry,
and that ``reindex`` makes it due again so that a beat runs it. Real Redis, the real
scripts, the beat's Dispatcher on an injected clock (tests/test_containment.py's World).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from celery_periodiq.model.plan import to_ms
from tests.test_cli import cli
from tests.test_containment import FIRST, START, World


@pytest.fixture
def world(redis_url: str, broker_url: str) -> Iterator[World]:
    running = World(redis_url, broker_url)
    yield running
    running.close()


def _scheduled(world: World) -> tuple[str, str]:
    (check,) = [check for check in world.api.diagnose() if check.name == "due"]
    return check.status, check.detail


def test_an_entry_neither_due_nor_in_flight_is_named_and_scheduled_again(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    assert _scheduled(world) == ("ok", "every entry that should run is due or in flight")
    world.client.zrem(world.part.due, "victim")
    assert world.api.get("victim").status == "active"  # what it looked like: nothing said

    status, detail = _scheduled(world)

    assert status == "fail"
    assert detail.startswith("1 entry is neither due nor in flight, so no beat will run")
    assert detail.endswith("again: victim (doctor --reindex repairs them)")
    assert world.run_beat(FIRST) == ["healthy"]  # as lost as doctor says

    caplog.set_level(logging.WARNING, logger="celery_periodiq")
    world.api.reindex()

    assert "scheduled again 1 entry that was neither due nor in flight" in caplog.text
    assert world.client.zscore(world.part.due, "victim") == to_ms(FIRST)
    assert _scheduled(world)[0] == "ok"
    world.dispatcher.touch(None)  # what the beat's listener does with reindex's notice
    sent = world.run_beat(FIRST + timedelta(seconds=1))
    assert sent == ["victim"]  # late, as a missed tick is: the policy decides, once
    assert world.api.get("victim").next_run == FIRST + timedelta(seconds=60)


def test_an_entry_with_no_state_and_not_due_is_scheduled_now_and_rebuilt(world: World) -> None:
    world.client.hdel(world.part.state, "victim")
    world.client.zrem(world.part.due, "victim")
    assert "victim" in _scheduled(world)[1]

    before = world.api.now()
    world.api.reindex()

    due = world.client.zscore(world.part.due, "victim")
    assert due is not None
    assert due >= to_ms(before) - 1000  # now, on the Redis clock
    world.dispatcher.touch(None)
    world.run_beat(world.api.now() + timedelta(seconds=1))
    kinds = [event.kind for event in world.api.history("victim")]
    assert kinds[0] == "rebuilt"
    assert world.api.get("victim").next_run is not None


@pytest.mark.parametrize("state", ["kept", "deleted", "garbage next"])
def test_a_tick_in_flight_is_not_taken_for_a_lost_entry_nor_scheduled_twice(
    world: World, state: str
) -> None:
    # a claim's id is name@next, or name@due when the state has no readable next tick
    if state == "deleted":
        world.client.hdel(world.part.state, "victim")
    elif state == "garbage next":
        stored = json.loads(world.client.hget(world.part.state, "victim") or "{}")
        world.client.hset(world.part.state, "victim", json.dumps({**stored, "next": "soon"}))
    batch = world.store.scripts.claim(world.part, "test-beat", 10, 2000, to_ms(FIRST))
    assert "victim" in {claim.name for claim in batch.claims}
    assert world.client.zscore(world.part.due, "victim") is None

    assert _scheduled(world)[0] == "ok"
    world.api.reindex()

    assert world.client.zscore(world.part.due, "victim") is None  # its claim holds it
    assert world.store.scripts.claim(world.part, "other-beat", 10, 2000, to_ms(FIRST)).claims == []


@pytest.mark.parametrize("kind", ["paused", "disabled", "ended", "reboot", "quarantined"])
def test_entries_that_should_not_run_are_neither_named_nor_scheduled(
    world: World, kind: str
) -> None:
    if kind == "paused":
        world.api.pause("victim")
    elif kind == "disabled":
        world.api.update("victim", enabled=False)
    elif kind == "ended":
        entry = world.api.update("victim", max_runs=1).entry
        world.store.put("update", [entry], now_ms=to_ms(START))  # type: ignore[list-item]
        assert world.run_beat(FIRST) == ["healthy", "victim"]
        assert world.api.get("victim").status == "ended"
    elif kind == "reboot":
        world.api.update("victim", cron="@reboot")
    else:
        world.client.hset(world.part.entries, "victim", "{not json")
        world.run_beat(FIRST)
    world.client.zrem(world.part.due, "victim")

    assert _scheduled(world)[0] == "ok"
    world.api.reindex()
    assert world.client.zscore(world.part.due, "victim") is None


def test_doctor_cli_names_it_and_reindex_repairs_it(world: World) -> None:
    world.client.zrem(world.part.due, "victim")

    found = cli(world.app, "doctor", "--json")

    assert found.exit_code == 1
    (check,) = [c for c in json.loads(found.stdout)["checks"] if c["name"] == "due"]
    assert (check["status"], "victim" in check["detail"]) == ("fail", True)
    repaired = cli(world.app, "doctor", "--reindex")
    assert "scheduled again 1 entry that was neither due nor in flight" in repaired.stderr
    assert world.client.zscore(world.part.due, "victim") == to_ms(FIRST)


@pytest.mark.parametrize("role", ["due", "ticks", "inflight"])
def test_a_claim_key_of_another_type_is_named_and_replaced_and_the_ticks_go_on(
    world: World, role: str
) -> None:
    key = getattr(world.part, role)
    world.client.delete(key)
    world.client.set(key, "written by something else")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        world.store.scripts.claim(world.part, "test-beat", 10, 2000, to_ms(FIRST))

    status, detail = _scheduled(world)

    assert status == "fail"
    kind = "hash" if role == "ticks" else "zset"
    assert f"{key} holds a string, not a {kind}: no tick of its partition can be claimed" in detail
    world.api.reindex()
    assert _scheduled(world)[0] == "ok"
    world.dispatcher.touch(None)
    assert world.run_beat(FIRST) == ["healthy", "victim"]  # due again: rebuilt from states


def test_ticks_in_flight_the_in_flight_set_lacks_are_named_and_looked_at_again(
    world: World,
) -> None:
    batch = world.store.scripts.claim(world.part, "dead-beat", 10, 2000, to_ms(FIRST))
    assert "victim" in {claim.name for claim in batch.claims}
    world.client.delete(world.part.inflight)  # the claim's lease is lost with it
    assert world.run_beat(FIRST + timedelta(seconds=5)) == ["healthy"]  # never looked at

    status, detail = _scheduled(world)

    assert status == "fail"
    assert "at least 1 tick is in flight but not in the in-flight set" in detail
    world.api.reindex()
    assert world.client.zcard(world.part.inflight) == 1
    world.dispatcher.touch(None)
    assert world.run_beat(FIRST + timedelta(seconds=6)) == ["victim"]  # taken over, sent
    assert world.api.get("victim").next_run == FIRST + timedelta(seconds=60)
    assert _scheduled(world)[0] == "ok"
