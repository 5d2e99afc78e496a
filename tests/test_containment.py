"""One entry's damaged keys never hurt the others, and the damaged entry can be repaired.

Each test damages one entry's data in Redis the way another program could (a key of
the wrong type, a deleted or garbage state, a deleted definition), runs the real
Lua scripts through the beat's Dispatcher on an injected clock, and checks that the
healthy entry's tick is published in the same pass, that the damaged one is
quarantined or rebuilt with a reason, and that the API can show, update and delete
it. Real processes are in tests/test_containment_processes.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import (
    EntryError,
    EntryNotFoundError,
    Periodiq,
    StoreRefusedError,
    periodiq,
)
from celery_periodiq.beat.dispatch import Dispatcher
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.protocol.records import EventRow, RunStart, Settlement
from tests.test_cli import cli, one_error_line

START = datetime(2026, 1, 1, tzinfo=UTC)
FIRST = START + timedelta(seconds=60)  # the first tick of an every=60 entry anchored at START
TASK = "proj.tasks.poll"


class World:
    """A schedule with a healthy and a victim entry, a beat's dispatcher, a Redis broker."""

    def __init__(self, redis_url: str, broker_url: str) -> None:
        self.app = Celery("contain", broker=broker_url, set_as_current=False)
        self.app.conf.periodiq_redis_url = redis_url
        self.api: Periodiq = periodiq(self.app)
        self.store = self.api.store
        self.keys = self.store.keys
        self.client = self.store.client
        self.part = self.keys.of("victim")
        self.broker = redis.Redis.from_url(broker_url, decode_responses=True)
        self.dispatcher = Dispatcher(self.app, self.store, "test-beat")
        for name in ("healthy", "victim"):
            self.api.add(name, TASK, every=60, start_at=START)
            # as if added before START: both are due at FIRST
            self.store.put("update", [self.api.get(name).entry], now_ms=to_ms(START))  # type: ignore[list-item]

    def run_beat(self, at: datetime) -> list[str]:
        """One beat pass at ``at``; returns the entries whose ticks were published."""
        self.dispatcher.dispatch(now_ms=to_ms(at))
        sent = [json.loads(raw) for raw in self.broker.lrange("celery", 0, -1)]
        self.broker.delete("celery")
        return sorted(message["headers"]["periodiq_entry"] for message in sent)

    def close(self) -> None:
        self.broker.close()
        self.client.close()


@pytest.fixture
def world(redis_url: str, broker_url: str) -> Iterator[World]:
    running = World(redis_url, broker_url)
    yield running
    running.close()


Damage = Callable[[World], None]


def _wrong_type(kind: str) -> Damage:
    def damage(world: World) -> None:
        key = getattr(world.part, kind)("victim")
        world.client.delete(key)
        world.client.set(key, "garbage")  # a string where periodiq keeps a list

    return damage


def _state_of(world: World, name: str) -> dict[str, Any]:
    part = world.keys.of(name)
    return dict(json.loads(world.client.hget(part.state, name) or "{}"))


def _set_state(world: World, name: str, state: dict[str, Any]) -> None:
    part = world.keys.of(name)
    world.client.hset(part.state, name, json.dumps(state))


WRONG_TYPES = ["history", "failures"]


@pytest.mark.parametrize("kind", WRONG_TYPES)
def test_a_wrong_typed_key_quarantines_its_entry_and_the_others_fire_in_the_same_pass(
    world: World, kind: str
) -> None:
    _wrong_type(kind)(world)

    sent = world.run_beat(FIRST)

    # the victim's tick was claimed before anything could see its keys: it is sent once,
    # settled, and its entry quarantined; the worker's guard refuses such a run
    assert sent == ["healthy", "victim"]
    victim = world.api.get("victim")
    assert victim.status == "quarantined"
    assert f"{getattr(world.part, kind)('victim')} holds a string, not a list" in (
        victim.invalid or ""
    )
    assert world.client.hget(world.part.quarantine, "victim") == victim.invalid
    assert world.api.get("healthy").next_run == FIRST + timedelta(seconds=60)
    assert world.run_beat(FIRST + timedelta(seconds=60)) == ["healthy"]  # and it stays out


@pytest.mark.parametrize("kind", WRONG_TYPES)
def test_list_shows_a_damaged_entry_before_any_beat_saw_it(world: World, kind: str) -> None:
    _wrong_type(kind)(world)

    listed = {stored.name: stored.status for stored in world.api.list()}

    assert listed == {"healthy": "active", "victim": "quarantined"}


def _next_notice(pubsub: Any, seconds: float = 5.0) -> str | None:
    """The next change notice ``pubsub`` receives within ``seconds`` (None: none came)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            return str(message["data"])
    return None


def test_a_pauses_index_of_another_type_ends_no_pause_and_stops_no_tick(world: World) -> None:
    end = world.api.pause("victim", until="1h").paused_until
    assert end is not None
    # an entry of the victim's partition, due at the pause's end
    neighbour = next(f"n{n}" for n in range(1000) if world.keys.of(f"n{n}") == world.part)
    world.api.add(neighbour, TASK, every=60, start_at=end)
    world.client.delete(world.part.pauses)
    world.client.set(world.part.pauses, "garbage")  # written by someone else

    sent = world.run_beat(end + timedelta(seconds=1))

    assert neighbour in sent  # the partition's ticks go on
    assert "victim" not in sent
    assert world.api.get("victim").status == "paused"  # its end is not seen
    assert "holds a string, not a zset" in world.api.diagnose()[-1].detail
    listening = world.store.changes()
    world.api.reindex()
    heard = _next_notice(listening)  # what the beats' listeners hear: claim every partition
    listening.close()
    assert heard is not None
    assert heard.endswith(" entries")
    world.dispatcher.touch(None)  # what the beat's listener does with it
    world.run_beat(end + timedelta(seconds=2))
    assert world.api.get("victim").status == "active"  # its end seen again


def test_a_history_key_damaged_after_the_claim_never_publishes_the_tick_twice(
    world: World,
) -> None:
    # The beat claims, publishes, then finds the history key of the wrong type when it
    # settles: the claim must still be settled, or it is taken over after its lease and
    # published again.
    batch = world.store.scripts.claim(world.part, "test-beat", 10, 2000, to_ms(FIRST))
    _wrong_type("history")(world)
    settlements = [
        Settlement(claim.id, claim.name, claim.version, None,
                   to_ms(FIRST) + 60_000, to_ms(FIRST) + 60_000,
                   counts={"enqueued": 1}, events=(EventRow("enqueued", claim.nominal_ms),))
        for claim in batch.claims if claim.name == "victim"
    ]  # fmt: skip

    settled = world.store.scripts.ack(world.part, "test-beat", 100, settlements)

    assert settled.settled == 1
    assert world.client.hlen(world.part.ticks) == 0
    after_lease = world.store.scripts.claim(world.part, "other-beat", 10, 2000, to_ms(FIRST) + 5000)
    assert after_lease.claims == []
    assert world.api.get("victim").status == "quarantined"


def test_a_deleted_state_is_rebuilt_and_its_tick_still_fires(world: World) -> None:
    world.client.hdel(world.part.state, "victim")
    assert world.api.get("victim").status == "active"  # not "ended": the beat rebuilds it

    sent = world.run_beat(FIRST)

    assert sent == ["healthy", "victim"]
    victim = world.api.get("victim")
    assert (victim.status, victim.next_run) == ("active", FIRST + timedelta(seconds=60))
    kinds = [event.kind for event in world.api.history("victim")]
    assert kinds[:2] == ["rebuilt", "enqueued"]


def test_a_state_whose_next_tick_is_garbage_is_rebuilt(world: World) -> None:
    _set_state(world, "victim", {**_state_of(world, "victim"), "next": "soon"})

    assert world.run_beat(FIRST) == ["healthy", "victim"]
    assert world.api.get("victim").next_run == FIRST + timedelta(seconds=60)


def test_a_state_that_is_not_json_is_rebuilt(world: World) -> None:
    world.client.hset(world.part.state, "victim", "{not json")
    assert world.api.get("victim").status == "active"

    assert world.run_beat(FIRST) == ["healthy", "victim"]
    assert _state_of(world, "victim")["next"] == to_ms(FIRST) + 60_000


@pytest.mark.parametrize("damage", ["deleted", "not json"])
def test_a_state_lost_after_the_claim_and_begun_afresh_by_the_guard_keeps_its_next_tick(
    world: World, damage: str
) -> None:
    # CI saw a real beat's entry stop for good: the beat claimed its tick, then the
    # state was lost, and the worker's guard began the run on a fresh state (no version,
    # no incarnation) before the beat settled. The settlement took that state for
    # another incarnation's and wrote nothing: no next tick, and nothing said why.
    batch = world.store.scripts.claim(world.part, "test-beat", 10, 2000, to_ms(FIRST))
    (claim,) = [claim for claim in batch.claims if claim.name == "victim"]
    assert claim.inc is not None
    if damage == "deleted":
        world.client.hdel(world.part.state, "victim")
    else:
        world.client.hset(world.part.state, "victim", "{not json")
    start = RunStart(
        task_id=task_id_for(world.keys.prefix, "victim", claim.nominal_ms),
        tick_ms=claim.nominal_ms, min_gap_ms=30_000, overlap="skip", ttl_ms=30_000,
        retries=0, host="h", history_length=100,
    )  # fmt: skip
    began = world.store.scripts.begin("victim", start, now_ms=to_ms(FIRST) + 50)
    assert began.outcome == "started"
    following = to_ms(FIRST) + 60_000
    enqueued = (EventRow("enqueued", claim.nominal_ms),)
    settlement = Settlement(
        claim.id, claim.name, claim.version, claim.inc, following, following,
        counts={"enqueued": 1}, events=enqueued,
    )  # fmt: skip

    assert world.store.scripts.ack(world.part, "test-beat", 100, [settlement]).settled == 1

    victim = world.api.get("victim")
    assert (victim.status, victim.next_run) == ("active", FIRST + timedelta(seconds=60))
    assert _state_of(world, "victim")["last_run"] == to_ms(FIRST) + 50  # the guard's start kept
    assert world.run_beat(FIRST + timedelta(seconds=60)) == ["healthy", "victim"]


@pytest.mark.parametrize("damage", ["deleted", "not json"])
def test_a_claim_whose_state_was_lost_is_taken_over_not_dropped(world: World, damage: str) -> None:
    # A beat claims, then dies; the entry's state is lost meanwhile. The claim's
    # incarnation matches no state any more, but the entry was not deleted: another beat
    # takes the claim over, as any other, and settles it with the next tick. Dropping
    # it, as for a deleted entry, left the entry neither due nor in flight: never run again.
    batch = world.store.scripts.claim(world.part, "dead-beat", 10, 2000, to_ms(FIRST))
    assert "victim" in {claim.name for claim in batch.claims}
    if damage == "deleted":
        world.client.hdel(world.part.state, "victim")
    else:
        world.client.hset(world.part.state, "victim", "{not json")

    sent = world.run_beat(FIRST + timedelta(seconds=5))  # the lease (2 s) ran out

    assert sent == ["healthy", "victim"]
    victim = world.api.get("victim")
    assert (victim.status, victim.next_run) == ("active", FIRST + timedelta(seconds=60))


def test_a_claim_of_a_deleted_entry_is_dropped_when_its_lease_runs_out(world: World) -> None:
    world.store.scripts.claim(world.part, "dead-beat", 10, 2000, to_ms(FIRST))
    world.api.delete("victim")

    batch = world.store.scripts.claim(world.part, "other-beat", 10, 2000, to_ms(FIRST) + 5000)

    assert "victim" not in {claim.name for claim in batch.claims}
    assert world.client.hlen(world.part.ticks) == 0  # nothing of it left in flight
    assert world.client.zcard(world.part.inflight) == 0


def test_a_missing_state_at_an_instant_that_is_no_tick_is_scheduled_afresh(
    world: World,
) -> None:
    # Someone moved the entry in the due set too: its due instant is no tick any more.
    world.client.hdel(world.part.state, "victim")
    world.client.zadd(world.part.due, {"victim": to_ms(FIRST) - 7_000})

    sent = world.run_beat(FIRST)

    assert sent == ["healthy"]
    victim = world.api.get("victim")
    assert (victim.status, victim.next_run) == ("active", FIRST + timedelta(seconds=60))
    assert world.run_beat(FIRST + timedelta(seconds=60)) == ["healthy", "victim"]


def test_a_deleted_state_of_a_jittered_entry_keeps_its_tick(world: World) -> None:
    entry = world.api.add("jittery", TASK, every=60, start_at=START, jitter=20).entry
    assert entry is not None
    world.store.put("update", [entry], now_ms=to_ms(START))
    part = world.keys.of("jittery")
    due = world.client.zscore(part.due, "jittery")
    world.client.hdel(part.state, "jittery")

    world.run_beat(datetime.fromtimestamp(float(due or 0) / 1000, UTC))  # type: ignore[arg-type]

    (enqueued,) = [e for e in world.api.history("jittery") if e.kind == "enqueued"]
    assert enqueued.tick == FIRST


def test_a_deleted_definition_is_reported_and_delete_removes_what_is_left(
    world: World,
) -> None:
    world.client.hdel(world.part.entries, "victim")

    assert world.run_beat(FIRST) == ["healthy"]
    victim = world.api.get("victim")
    assert (victim.status, victim.entry) == ("quarantined", None)
    assert "definition is missing" in (victim.invalid or "")

    world.api.delete("victim")

    assert world.client.keys("*victim*") == []
    assert not world.client.hexists(world.part.state, "victim")
    with pytest.raises(EntryNotFoundError):
        world.api.get("victim")


@pytest.mark.parametrize("kind", WRONG_TYPES)
def test_delete_removes_an_entry_with_a_wrong_typed_key(world: World, kind: str) -> None:
    _wrong_type(kind)(world)
    world.run_beat(FIRST)

    world.api.delete("victim")

    assert world.client.keys("*victim*") == []
    assert world.client.hlen(world.part.quarantine) == 0


@pytest.mark.parametrize("kind", WRONG_TYPES)
def test_update_repairs_an_entry_with_a_wrong_typed_key(world: World, kind: str) -> None:
    _wrong_type(kind)(world)
    world.run_beat(FIRST)

    repaired = world.api.update("victim", every=30)

    assert (repaired.status, repaired.invalid) == ("active", None)
    assert world.client.type(getattr(world.part, kind)("victim")) in ("none", "list")
    assert world.client.hlen(world.part.quarantine) == 0
    assert repaired.next_run is not None


def test_pause_of_an_entry_whose_state_is_not_json_says_so_and_changes_nothing(
    world: World,
) -> None:
    world.client.hset(world.part.state, "victim", "{not json")

    with pytest.raises(EntryError, match=r"damaged.*not a JSON object.*update or delete repairs"):
        world.api.pause("victim", note="why")

    assert world.client.hget(world.part.state, "victim") == "{not json"


def test_show_and_history_work_on_an_entry_with_a_wrong_typed_history(world: World) -> None:
    _wrong_type("history")(world)

    assert world.api.history("victim") == []
    assert world.api.get("victim").status == "quarantined"
    assert [name for name, _ in world.api.failures()] == []


def test_a_wrong_typed_shared_key_is_a_refused_command_not_an_unreachable_redis(
    world: World,
) -> None:
    world.client.delete(world.part.entries)
    world.client.set(world.part.entries, "garbage")

    with pytest.raises(StoreRefusedError, match=r"refused a command: .*WRONGTYPE") as caught:
        world.api.list()

    assert "holds data written by something else" in str(caught.value)


def test_the_guard_refuses_a_run_of_a_damaged_entry_and_quarantines_it(
    world: World,
) -> None:
    _wrong_type("failures")(world)

    admission = world.store.scripts.begin("victim", _run_start(to_ms(FIRST)), to_ms(FIRST))

    assert (admission.outcome, admission.runs) == ("damaged", False)
    assert "holds a string, not a list" in admission.note
    assert world.api.get("victim").status == "quarantined"
    assert "last_run" not in _state_of(world, "victim")


# The command line on damaged entries (click's runner against the same real Redis)


def test_cli_list_and_show_work_on_a_damaged_entry_and_flag_it(world: World) -> None:
    _wrong_type("history")(world)

    listed = cli(world.app, "list", "--json")
    shown = cli(world.app, "show", "victim", "--json")

    assert (listed.exit_code, shown.exit_code) == (0, 0)
    states = {item["name"]: (item["state"], item["problem"]) for item in json.loads(listed.stdout)}
    assert states["healthy"] == ("active", None)
    assert states["victim"][0] == "quarantined"
    assert "history:victim holds a string, not a list" in states["victim"][1]
    assert json.loads(shown.stdout)["history"] == []


def test_cli_delete_and_update_repair_a_damaged_entry(world: World) -> None:
    world.client.hset(world.part.state, "victim", "{not json")

    paused = cli(world.app, "pause", "victim")
    updated = cli(world.app, "update", "victim", "--every", "30")

    assert paused.exit_code == 2
    assert "damaged" in paused.stderr
    assert "unreachable" not in paused.stderr
    assert updated.exit_code == 0, updated.output
    assert world.api.get("victim").status == "active"
    assert cli(world.app, "delete", "victim", "--yes").exit_code == 0
    assert world.client.keys("*victim*") == []


def test_cli_a_wrong_typed_shared_key_exits_6_not_4(world: World) -> None:
    part = world.keys.of("new")
    world.client.delete(part.due)
    world.client.set(part.due, "garbage")

    result = cli(world.app, "add", "new", TASK, "--every", "60")

    assert result.exit_code == 6
    assert "refused a command: WRONGTYPE" in one_error_line(result)


def test_cli_update_and_delete_of_a_declared_entry_need_force(world: World) -> None:
    declared = world.api.get("healthy").entry
    assert declared is not None
    world.store.put("reconcile", [declared.evolve(name="from-code", source="code")])

    refused = cli(world.app, "delete", "from-code", "--yes")
    not_updated = cli(world.app, "update", "from-code", "--every", "30")

    assert (refused.exit_code, not_updated.exit_code) == (2, 2)
    assert "declared in code: the next deploy (a beat starting) restores it; pass --force" in (
        one_error_line(refused)
    )
    assert world.api.get("from-code").entry == declared.evolve(name="from-code", source="code")
    assert cli(world.app, "update", "from-code", "--every", "30", "--force").exit_code == 0
    assert cli(world.app, "delete", "from-code", "--yes", "--force").exit_code == 0
    with pytest.raises(EntryNotFoundError):
        world.api.get("from-code")


def test_cli_add_warns_about_a_task_the_app_does_not_know(world: World) -> None:
    @world.app.task(name="proj.tasks.known")
    def known() -> None:
        """A task the app knows."""

    unknown = cli(world.app, "add", "typo", "proj.tasks.knwon", "--every", "60")
    fine = cli(world.app, "add", "fine", "proj.tasks.known", "--every", "60")

    assert unknown.exit_code == 0
    assert "Warning: task 'proj.tasks.knwon' is not registered in app 'contain'" in (unknown.stderr)
    assert (fine.exit_code, fine.stderr) == (0, "")


def test_doctor_names_entries_whose_task_the_app_does_not_know(world: World) -> None:
    checks = {check.name: check for check in world.api.diagnose()}

    assert checks["tasks"].status == "warn"
    assert "does not know the task of healthy (proj.tasks.poll), victim" in checks["tasks"].detail


def test_doctor_names_entries_whose_runs_nobody_started(world: World) -> None:
    # A sent run marks its entry as waiting until a worker's guard takes one (begin.lua).
    world.run_beat(FIRST)
    world.store.scripts.begin("healthy", _run_start(to_ms(FIRST)), now_ms=to_ms(FIRST) + 1000)
    assert "waiting_since" not in _state_of(world, "healthy")
    state = _state_of(world, "victim")
    assert state["waiting_since"] > 0
    # ten minutes pass (ten intervals) without a worker taking victim's run
    _set_state(world, "victim", {**state, "waiting_since": state["waiting_since"] - 600_000})

    checks = {check.name: check for check in world.api.diagnose()}

    assert checks["runs"].status == "warn"
    assert "runs of victim (queue celery) were sent but no worker started one" in (
        checks["runs"].detail
    )
    assert "healthy" not in checks["runs"].detail


def _run_start(tick_ms: int) -> RunStart:
    return RunStart(
        task_id="t1", tick_ms=tick_ms, min_gap_ms=0, overlap="skip", ttl_ms=1000,
        retries=0, host="h", history_length=10,
    )  # fmt: skip


def test_a_definition_deleted_while_its_tick_is_in_flight_is_reported_too(
    world: World,
) -> None:
    batch = world.store.scripts.claim(world.part, "test-beat", 10, 2000, to_ms(FIRST))
    world.client.hdel(world.part.entries, "victim")  # between the claim and the ack
    settlements = [
        Settlement(claim.id, claim.name, claim.version)
        for claim in batch.claims if claim.name == "victim"
    ]  # fmt: skip

    world.store.scripts.ack(world.part, "test-beat", 40, settlements)

    victim = world.api.get("victim")
    assert (victim.status, victim.entry) == ("quarantined", None)
    world.api.delete("victim")
    assert world.client.keys("*victim*") == []
    assert not world.client.hexists(world.part.state, "victim")
