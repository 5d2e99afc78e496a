"""Declaration sets and generations, script by script against a real Redis: what lets
two versions of the code run side by side (see tests/test_rolling_deploy.py for the
beats themselves). A declaration set's generation is when it was first declared; a
definition is written only by a generation at least as new as the one that wrote it,
or once no beat of that one lives; a declared entry is removed only once no beat of
the generation that wrote it lives."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.declare.registry import declaration_of
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.store.store import Store


@pytest.fixture
def store(redis_url: str) -> Store:
    app = Celery("decl", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    return periodiq(app).store


def declared(name: str, *args: Any, every: int = 60) -> Entry:
    return build_entry(name, "proj.t", source="config", every=every, args=list(args))


def declare(store: Store, *entries: Entry) -> int:
    """Declare the set of ``entries`` as a starting beat does; its generation."""
    digest, names = declaration_of(list(entries))
    return store.declare(digest, names)


def live(store: Store, generation: int, seconds: float = 60) -> None:
    """A beat of ``generation`` sends a heartbeat: it lives for ``seconds`` more."""
    now = store.now_ms()
    store.alive(f"beat-of-{generation}", now + int(seconds * 1000), now, generation)


def args_of(store: Store, name: str) -> list[Any]:
    entry = store.load([name])[0].entry
    assert entry is not None
    return list(entry.args)


def state_of(store: Store, name: str) -> dict[str, Any]:
    raw = store.client.hget(store.keys.of(name).state, name)
    return dict(json.loads(raw))


def ran(store: Store, name: str, runs: int) -> None:
    """The entry ran ``runs`` times and has a history."""
    part = store.keys.of(name)
    state = state_of(store, name)
    state.update(runs=runs, n={"succeeded": runs})
    store.client.hset(part.state, name, json.dumps(state))
    store.client.lpush(part.history(name), json.dumps(["succeeded", "", 1]))


# generations


def test_a_set_gets_the_redis_clock_when_first_declared_and_keeps_it(store: Store) -> None:
    before = store.now_ms()
    first = declare(store, declared("a"))
    after = store.now_ms()

    again = declare(store, declared("a"))

    assert before <= first <= after
    assert again == first


def test_a_set_declared_later_is_newer_even_within_one_millisecond(store: Store) -> None:
    generations = [declare(store, declared(f"entry-{i}")) for i in range(20)]

    assert generations == sorted(set(generations))


def test_a_lost_declaration_declared_again_by_its_beat_keeps_its_generation(
    store: Store,
) -> None:
    digest, names = declaration_of([declared("a")])
    first = store.declare(digest, names)
    newer = declare(store, declared("b"))
    store.client.delete(store.keys.declaration(digest))  # a failover lost it

    again = store.declare(digest, names, first)

    assert again == first < newer


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(lambda c, key: c.rpush(key, "x"), id="a list"),
        pytest.param(lambda c, key: c.set(key, "x"), id="a string"),
        pytest.param(
            lambda c, key: c.hset(key, mapping={"gen": "soon", "names": "{"}),
            id="a hash of garbage",
        ),
    ],
)
def test_a_declaration_key_holding_garbage_is_written_again(store: Store, garbage: Any) -> None:
    digest, names = declaration_of([declared("a"), declared("b")])
    garbage(store.client, store.keys.declaration(digest))

    generation = store.declare(digest, names)
    sets = store.declaration_sets([digest])

    assert generation > 0
    assert sets[digest].generation == generation
    assert sets[digest].names == names
    assert sets[digest].problem is None


def test_an_unreadable_declaration_set_is_reported_not_raised(store: Store) -> None:
    store.client.rpush(store.keys.declaration("listed"), "x")
    store.client.hset(store.keys.declaration("garbled"), mapping={"gen": "1", "names": "{"})

    sets = store.declaration_sets(["listed", "garbled", "missing"])

    assert {digest: found.names for digest, found in sets.items()} == {
        "listed": None, "garbled": None,
    }  # fmt: skip
    assert "another type, not a hash" in str(sets["listed"].problem)
    assert "not JSON" in str(sets["garbled"].problem)


def test_a_declaration_expires_a_day_after_its_last_beat(store: Store) -> None:
    digest, names = declaration_of([declared("a")])
    store.declare(digest, names)
    key = store.keys.declaration(digest)
    store.client.pexpire(key, 1000)

    store.scripts.heartbeat("b1", "alive", 10_000, {}, declared=digest)

    assert 23 * 3600 * 1000 < store.client.pttl(key) <= 24 * 3600 * 1000


# put.lua, reconcile mode


def test_an_older_generation_never_overwrites_a_newer_definition_while_that_one_lives(
    store: Store,
) -> None:
    older = declare(store, declared("acc.x", "old"))
    newer = declare(store, declared("acc.x", "new"))
    live(store, older)
    live(store, newer)
    store.put("reconcile", [declared("acc.x", "new")], generation=newer)
    ran(store, "acc.x", 4)
    before = store.load(["acc.x"])[0]

    statuses = [store.put("reconcile", [declared("acc.x", "old")], generation=older)
                for _ in range(3)]  # fmt: skip

    after = store.load(["acc.x"])[0]
    assert statuses == [["newer"]] * 3
    assert after == before
    assert args_of(store, "acc.x") == ["new"]


def test_a_definition_goes_back_to_the_older_generation_once_no_newer_beat_lives(
    store: Store,
) -> None:
    older = declare(store, declared("acc.x", "old"))
    newer = declare(store, declared("acc.x", "new"))
    live(store, older)
    live(store, newer, 1)
    store.put("reconcile", [declared("acc.x", "new")], generation=newer)
    ran(store, "acc.x", 4)
    time.sleep(1.1)  # the newer deployment's last beat is gone (a rollback): time passes

    status = store.put("reconcile", [declared("acc.x", "old")], generation=older)

    after = store.load(["acc.x"])[0]
    assert status == ["replaced"]
    assert args_of(store, "acc.x") == ["old"]
    assert after.runs == 4
    assert len(store.history("acc.x", 10)) == 1
    assert state_of(store, "acc.x")["gen"] == older


def test_reconciling_again_and_again_flips_no_definition_between_two_live_generations(
    store: Store,
) -> None:
    older = declare(store, declared("acc.x", "old"))
    newer = declare(store, declared("acc.x", "new"))
    live(store, older)
    live(store, newer)
    store.put("reconcile", [declared("acc.x", "old")], generation=older)

    rounds = []
    for _ in range(3):  # every beat reconciles again after each Redis error, in any order
        rounds.append(store.put("reconcile", [declared("acc.x", "new")], generation=newer))
        rounds.append(store.put("reconcile", [declared("acc.x", "old")], generation=older))

    after = store.load(["acc.x"])[0]
    assert rounds == [["replaced"], ["newer"], ["unchanged"], ["newer"], ["unchanged"], ["newer"]]
    assert args_of(store, "acc.x") == ["new"]
    assert after.version == 2


def test_an_older_generation_with_the_same_definition_leaves_it_unchanged(
    store: Store,
) -> None:
    older = declare(store, declared("acc.x"), declared("acc.y"))
    newer = declare(store, declared("acc.x"))
    live(store, older)
    live(store, newer)
    store.put("reconcile", [declared("acc.x")], generation=newer)
    before = state_of(store, "acc.x")

    status = store.put("reconcile", [declared("acc.x")], generation=older)

    assert status == ["unchanged"]
    assert state_of(store, "acc.x") == before


def test_a_newer_generation_takes_over_an_unchanged_definition(store: Store) -> None:
    older = declare(store, declared("acc.x"), declared("acc.y"))
    newer = declare(store, declared("acc.x"))
    store.put("reconcile", [declared("acc.x")], generation=older)
    version = state_of(store, "acc.x")["version"]

    status = store.put("reconcile", [declared("acc.x")], generation=newer)

    assert status == ["unchanged"]
    assert state_of(store, "acc.x")["gen"] == newer
    assert state_of(store, "acc.x")["version"] == version


# remove.lua, declared entries


def test_a_declared_entry_stays_while_a_beat_of_the_generation_that_wrote_it_lives(
    store: Store,
) -> None:
    writer = declare(store, declared("acc.y"))
    live(store, writer, 1)
    store.put("reconcile", [declared("acc.y")], generation=writer)

    while_alive = store.remove_declared(["acc.y"])
    time.sleep(1.1)  # its last beat's heartbeat runs out
    once_gone = store.remove_declared(["acc.y"])

    assert while_alive == ([], ["acc.y"])
    assert once_gone == (["acc.y"], [])
    assert store.existing(["acc.y"]) == []


def test_deleting_a_declared_entry_through_the_api_ignores_generations(
    store: Store, redis_url: str
) -> None:
    writer = declare(store, declared("acc.y"))
    live(store, writer)
    store.put("reconcile", [declared("acc.y")], generation=writer)

    removed = store.remove(["acc.y"])

    assert removed == ["acc.y"]


# beat.lua


def test_beats_say_which_set_they_declare_until_they_stop_or_their_heartbeat_runs_out(
    store: Store,
) -> None:
    scripts = store.scripts
    scripts.heartbeat("a", "start", 60_000, {}, declared="d1")
    scripts.heartbeat("b", "start", 60_000, {}, declared="d2")
    scripts.heartbeat("gone-soon", "start", 1, {}, declared="d3")
    scripts.heartbeat("old-code", "start", 60_000, {})
    deadline = time.monotonic() + 5  # until gone-soon's 1 ms heartbeat has run out
    while "gone-soon" in {beat.id for beat in store.beats()} and time.monotonic() < deadline:
        time.sleep(0.001)

    both = scripts.heartbeat("a", "alive", 60_000, {}, declared="d1")
    scripts.heartbeat("b", "stop", 0, {})
    one = scripts.heartbeat("a", "alive", 60_000, {}, declared="d1")

    assert both.declarations == {"a": "d1", "b": "d2", "old-code": ""}
    assert one.declarations == {"a": "d1", "old-code": ""}
    assert set(store.client.hkeys(store.keys.declarers)) == {"a"}
    assert {beat.id: beat.declared for beat in store.beats()} == {"a": "d1", "old-code": ""}


def test_a_beat_learns_that_its_declaration_is_gone(store: Store) -> None:
    digest, names = declaration_of([declared("a")])
    store.declare(digest, names)

    kept = store.scripts.heartbeat("a", "alive", 60_000, {}, declared=digest)
    store.client.delete(store.keys.declaration(digest))
    lost = store.scripts.heartbeat("a", "alive", 60_000, {}, declared=digest)
    store.client.set(store.keys.declaration(digest), "garbage")
    garbled = store.scripts.heartbeat("a", "alive", 60_000, {}, declared=digest)

    assert (kept.registered, lost.registered, garbled.registered) == (True, False, False)


def test_a_declarers_key_of_another_type_is_replaced(store: Store) -> None:
    store.client.set(store.keys.declarers, "garbage")

    pulse = store.scripts.heartbeat("a", "start", 60_000, {}, declared="d1")

    assert pulse.declarations == {"a": "d1"}
    assert store.client.type(store.keys.declarers) == "hash"


def test_every_new_key_is_in_the_slot_of_the_script_that_touches_it(store: Store) -> None:
    keys = store.keys
    tags = {keys.declarers, keys.generation, keys.declaration("d1")}
    part = keys.of("acc.x")

    assert {key.split("}")[0] + "}" for key in tags} == {keys.tag}
    assert part.generations.startswith(part.tag)
