"""Large schedules: bulk creation in pipelined batches, listings that page instead of
reading everything, deletion by owner in batches. Real Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from celery.schedules import crontab

from celery_periodiq import EntryError, EntryExistsError, Periodiq, periodiq
from celery_periodiq.model.build import EntryBuilder, build_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.reader import EntryReader
from celery_periodiq.protocol.records import EventRow, Settlement
from tests.test_cli import cli

TASK = "proj.tasks.poll"
START = datetime(2029, 12, 31, tzinfo=UTC)


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("scaled", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_batch_size = 50  # so that a few hundred entries take several batches
    client = periodiq(app)
    yield client
    client.store.client.close()


def tenants(count: int, **options: object) -> list[dict[str, object]]:
    return [
        {"name": f"tenant-{n:04d}", "task": TASK, "every": 60 + n % 7, "owner": f"o{n % 3}",
         **options}
        for n in range(count)
    ]  # fmt: skip


def test_add_many_creates_every_entry_in_batches(api: Periodiq) -> None:
    created = api.add_many(tenants(400))

    assert len(created) == 400
    assert api.count() == 400
    assert api.count(owner="o1") == 133
    assert {stored.name for stored in api.entries(batch=64)} == set(created)


def test_add_many_after_a_script_flush_writes_every_batch(api: Periodiq) -> None:
    api.add("first", TASK, every=60)  # the scripts are loaded
    api.store.client.script_flush()  # each pipelined batch meets NOSCRIPT

    created = api.add_many(tenants(400))

    assert len(created) == 400
    assert api.count() == 401
    assert sum(1 for stored in api.entries(batch=100) if stored.next_run is not None) == 401


def test_add_many_with_one_bad_entry_writes_nothing_and_names_every_bad_one(
    api: Periodiq,
) -> None:
    batch = [*tenants(10), {"name": "bad", "task": TASK, "cron": "61 * * * *"},
             {"name": "worse", "task": TASK}, "not a dict"]  # fmt: skip

    with pytest.raises(EntryError) as caught:
        api.add_many(batch)  # type: ignore[arg-type]

    message = str(caught.value)
    assert message.startswith("3 bad entries, nothing written: #10: entry 'bad': cron")
    assert "#11: entry 'worse': give exactly one of cron=, every=, calendar=" in message
    assert "#12: 'not a dict' is not a dict of options" in message
    assert api.count() == 0


def test_add_many_takes_a_schedule_object_and_names_an_unknown_option(api: Periodiq) -> None:
    bad = [{"name": "x", "task": TASK, "every": 60, "source": "code"},
           {"name": "y", "task": TASK, "evry": 60}]  # fmt: skip # table: one entry per row

    with pytest.raises(EntryError) as caught:
        api.add_many(bad)
    created = api.add_many([{"name": "z", "task": TASK, "schedule": crontab(minute="*/5")}])

    assert str(caught.value).startswith(
        "2 bad entries, nothing written: #0: unknown option 'source' (allowed: name, task, "
        "schedule and the options of add: cron, every,"
    )
    assert "#1: unknown option 'evry'" in str(caught.value)
    assert created == ["z"]
    assert api.get("z").entry.schedule == "*/5 * * * *"  # type: ignore[union-attr]


def test_add_many_refuses_names_that_exist_or_repeat(api: Periodiq) -> None:
    api.add("tenant-0003", TASK, every=60)

    with pytest.raises(EntryExistsError, match="entries exist already: 'tenant-0003'"):
        api.add_many(tenants(10))
    with pytest.raises(EntryError, match="name 'x' is given twice"):
        api.add_many([{"name": "x", "task": TASK, "every": 1}] * 2)
    assert api.count() == 1


def test_list_with_a_limit_reads_only_the_soonest(api: Periodiq) -> None:
    api.add_many(tenants(300))
    api.pause("tenant-0000")

    soonest = api.list(limit=10)
    everything = api.list()

    assert [stored.name for stored in soonest] == [stored.name for stored in everything[:10]]
    assert len(api.list(limit=1000)) == 300  # due ones, then the paused one
    assert [stored.name for stored in api.list(owner="o2", limit=5)] == [
        stored.name for stored in everything if stored.entry and stored.entry.owner == "o2"
    ][:5]


def test_cli_list_shows_the_soonest_and_says_how_many_more(api: Periodiq) -> None:
    api.add_many(tenants(150))

    result = cli(api.app, "list", "--limit", "20")

    *_, count, no_beat = result.stdout.rstrip().splitlines()
    assert result.exit_code == 0
    assert count.startswith(
        "20 of 150 entries, soonest first: 20 active (--limit N shows more, --all every"
    )
    assert no_beat.startswith("No beat is running")


def test_cli_list_all_prints_every_entry_page_by_page(api: Periodiq) -> None:
    api.add_many(tenants(1200))

    text = cli(api.app, "list", "--all")
    shapes = json.loads(cli(api.app, "list", "--all", "--json").stdout)

    rows = [line for line in text.stdout.splitlines() if line.startswith("tenant-")]
    assert len(rows) == 1200
    assert text.stdout.count("NAME ") == 1  # one header for all the pages
    assert "\n1200 entries: 1200 active\nNo beat is running: " in text.stdout
    assert len(shapes) == 1200
    assert {item["name"] for item in shapes} == {f"tenant-{n:04d}" for n in range(1200)}


def test_delete_owner_removes_in_batches(api: Periodiq) -> None:
    api.add_many(tenants(300))

    removed = api.delete_owner("o0")

    assert len(removed) == 100
    assert api.count() == 200
    assert api.count(owner="o0") == 0


def test_add_many_anchors_each_entry_of_one_interval_to_its_own_start(api: Periodiq) -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    api.add_many(
        {"name": f"e{n}", "task": TASK, "every": 60, "start_at": start + timedelta(seconds=n)}
        for n in range(5)
    )
    api.add("e-unbounded", TASK, every=60)

    firsts = {stored.name: stored.next_run for stored in api.list()}

    assert [firsts[f"e{n}"] for n in range(5)] == [start + timedelta(seconds=n) for n in range(5)]
    unbounded = firsts["e-unbounded"]
    assert unbounded is not None
    assert unbounded.timestamp() % 60 == 0  # on the epoch's grid


def test_add_many_with_one_interval_and_a_bad_start_names_that_entry(api: Periodiq) -> None:
    good = {"task": TASK, "every": 60, "start_at": datetime(2030, 1, 1, tzinfo=UTC)}
    batch = [{"name": "a", **good}, {"name": "b", **good, "start_at": datetime(2030, 1, 1)},
             {"name": "c", **good, "end_at": datetime(2029, 1, 1, tzinfo=UTC)}]  # fmt: skip

    with pytest.raises(EntryError) as caught:
        api.add_many(batch)

    message = str(caught.value)
    assert message.startswith("2 bad entries, nothing written: #1: entry 'b': start_at:")
    assert "has no time zone" in message
    assert "#2: entry 'c': end_at 2029-01-01T00:00:00+00:00 is before start_at" in message
    assert api.count() == 0


def test_put_script_given_one_name_twice_reads_what_it_wrote_for_it(api: Periodiq) -> None:
    store = api.store
    store.ensure_layout(record=True)
    entry = build_entry("twice", TASK, every=60)
    now = datetime.now(UTC)
    part = store.keys.of("twice")

    added = store.scripts.put(part, "add", [store.put_item(entry, now)] * 2)
    replaced = store.scripts.put(part, "update", [store.put_item(entry, now)] * 2)

    assert added == ["created", "exists"]
    assert replaced == ["replaced", "replaced"]
    assert api.get("twice").version == 3
    assert api.count() == 1


ALIKE_CASES = [
    {"every": 60, "start_at": datetime(2030, 1, 1, tzinfo=UTC)},
    {"every": 60.0, "start_at": datetime(2030, 1, 1, 0, 0, 7, tzinfo=UTC)},
    {"every": 60, "end_at": datetime(2031, 1, 1, tzinfo=UTC), "owner": "o"},
    {"cron": "H * * * *", "tz": "Europe/Berlin"},
    {"cron": "H * * * *", "tz": "Europe/Berlin", "start_at": datetime(2030, 1, 1, tzinfo=UTC)},
    {"every": 60, "tolerance": 1, "jitter": 1},
    {"every": 60, "tolerance": 1.0, "jitter": True},  # True is not a number of seconds
    {"every": 60, "start_at": datetime(2030, 1, 1)},  # naive
    {"every": 60, "start_at": "2030-01-01"},
    {"every": 60, "timebox": 90},  # longer than the interval
    {"every": 60, "args": [1, {"b": 2, "a": 1}], "kwargs": {"z": 1}},
]


@pytest.mark.parametrize(
    ("name", "task"),
    [("e1", TASK), ('é"\\✓', TASK), (" bad", TASK), ("e1", "\x00periodiq:name\x00")],
)
def test_entries_built_alike_equal_entries_built_alone(name: str, task: str) -> None:
    builder = EntryBuilder()

    def outcome(build: object) -> tuple[object, ...]:
        try:
            entry = build()  # type: ignore[operator]
        except (EntryError, TypeError) as error:
            return ("error", str(error))
        return (entry.to_json(), entry.digest, entry.parsed_schedule().next_after(START))

    for options in ALIKE_CASES * 2:  # the second time, alike ones are copied
        alone = outcome(lambda: build_entry(name, task, **options))  # noqa: B023
        alike = outcome(lambda: builder.build(name, task, dict(options)))  # noqa: B023
        assert alike == alone, options


def test_definitions_read_alike_equal_definitions_read_alone() -> None:
    reader = EntryReader()
    model = {"task": TASK, "schedule": "@every 1h", "form": "every", "catchup": "last",
             "overlap": "skip", "tolerance": "auto", "timebox": "auto",
             "expires": "auto"}  # fmt: skip
    cases = [
        {"name": "a"},
        {"name": "b", "start_at": "2030-01-01T00:00:07+00:00"},
        {"name": "c", "start_at": "2030-01-01T00:00:07"},  # no offset
        {
            "name": "d",
            "start_at": "2030-01-01T00:00:07+00:00",
            "end_at": "2029-01-01T00:00:00+00:00",
        },
        {"name": " e"},
        {"name": 5},
        {},  # no name
        {"name": "f", "jitter": True},
        {"name": "g", "jitter": 1},
        {"name": "h", "args": [1]},
    ]

    for case in cases * 2:  # the second time, alike ones are copied
        text = json.dumps({**model, **case})
        assert _outcome(lambda: reader.read(text)) == _outcome(lambda: Entry.from_json(text)), case  # noqa: B023


def test_alike_definitions_share_a_schedule_only_where_it_does_not_hash_the_name() -> None:
    reader = EntryReader()
    bounds = {"start_at": "2030-01-01T00:00:07+00:00"}
    hashed = {"task": TASK, "schedule": "H H * * *", "form": "cron", **bounds}
    every = {"task": TASK, "schedule": "@every 1h", "form": "every", **bounds}

    crons = [reader.read(json.dumps({**hashed, "name": f"h{n}"})) for n in range(6)]
    intervals = [reader.read(json.dumps({**every, "name": f"i{n}"})) for n in range(3)]

    for entry in crons + intervals:  # what each would be, read alone
        alone = Entry.from_json(entry.to_json()).parsed_schedule()
        assert entry.parsed_schedule().next_after(START) == alone.next_after(START)
    assert len({entry.parsed_schedule().next_after(START) for entry in crons}) > 1
    assert len({id(entry.parsed_schedule()) for entry in intervals}) == 1


def test_definitions_read_by_name_equal_definitions_read_alone() -> None:
    reader = EntryReader()
    model = {"task": TASK, "schedule": "@every 1h", "form": "every",
             "start_at": "2030-01-01T00:00:07+00:00"}  # fmt: skip
    cases = [
        ("a", {"name": "a"}),
        ("b", {"name": "b"}),  # only the name differs: looked up, not parsed
        ('q"uo\\te', {"name": 'q"uo\\te'}),
        ("é", {"name": "é"}),
        ("c", {"name": "c", "start_at": "2031-01-01T00:00:00+00:00"}),
        ("d", {"name": "d", "kwargs": {"name": "d"}}),  # its name twice: read in full
        ("e", {"name": "e", "kwargs": {"name": "x"}}),
        ("f", {"name": "f", "args": [1, [2]]}),
        ("g", {"name": "g", "jitter": 1}),
        ("h", {"name": " h"}),  # another name than the claim's
        ("i", {"name": "i", "schedule": "H * * * *", "form": "cron"}),
        ("j", {"name": "j", "schedule": "H * * * *", "form": "cron"}),
    ]

    for name, case in cases * 2:  # the second time, those alike are looked up
        text = json.dumps({**model, **case}, sort_keys=True, separators=(",", ":"))
        alone = _outcome(lambda: Entry.from_json(text))  # noqa: B023
        assert _outcome(lambda: reader.read_named(text, name)) == alone, case  # noqa: B023
    assert reader._texts  # some were looked up


def test_one_claim_and_one_ack_take_more_entries_than_lua_unpacks_at_once(
    redis_url: str, broker_url: str
) -> None:
    # claim.lua and ack.lua read and write a call's entries with one command per key,
    # in pieces of 1,000 arguments (Lua's unpack stops near 8,000): a call of 4,500
    # ticks in one partition (9,000 values for the claims' HSET) must claim and settle
    # every one of them.
    app = Celery("scaled", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.periodiq_partitions = 1
    api = periodiq(app)
    api.add_many(tenants(4500, start_at=START))
    first = START + timedelta(seconds=67)  # every entry's first tick has come
    part = api.store.keys.part(0)
    scripts = api.store.scripts

    batch = scripts.claim(part, "beat-1", 5000, 60_000, int(first.timestamp() * 1000))
    settlements = [
        Settlement(claim.id, claim.name, claim.version, None,
                   claim.nominal_ms + 3_600_000, claim.nominal_ms + 3_600_000,
                   counts={"enqueued": 1}, events=(EventRow("enqueued", claim.nominal_ms),),
                   late=(5,), runs=1)
        for claim in batch.claims
    ]  # fmt: skip
    settled = scripts.ack(part, "beat-1", 10, settlements)

    client = api.store.client
    assert len(batch.claims) == 4500
    assert settled.settled == 4500
    assert client.hlen(part.ticks) == client.zcard(part.inflight) == 0
    assert client.zcount(part.due, "-inf", "+inf") == 4500
    assert api.count() == 4500
    assert all(stored.state.get("runs") == "1" for stored in api.entries())
    assert int(client.hget(part.stats, "l1")) == 4500  # each 5 ms late: the first bucket
    api.store.client.close()


def test_a_settlement_given_twice_in_one_ack_counts_once(api: Periodiq) -> None:
    api.add("tenant", TASK, every=60, start_at=START)
    part = api.store.keys.of("tenant")
    first = int((START + timedelta(seconds=60)).timestamp() * 1000)
    (claim,) = api.store.scripts.claim(part, "beat-1", 10, 60_000, first).claims
    settlement = Settlement(
        claim.id, "tenant", claim.version, None, first + 60_000, first + 60_000,
        counts={"enqueued": 1}, events=(EventRow("enqueued", first),), runs=1,
    )  # fmt: skip

    settled = api.store.scripts.ack(part, "beat-1", 10, [settlement, settlement])

    stored = api.get("tenant")
    assert settled.settled == 1
    assert stored.state.get("runs") == "1"
    assert stored.state["n:enqueued"] == "1"
    assert len(api.store.client.lrange(part.history("tenant"), 0, -1)) == 1


def _outcome(read: object) -> tuple[object, ...]:
    """What reading a definition gives: the entry and what is derived from it, or its error."""
    try:
        entry = read()  # type: ignore[operator]
    except EntryError as error:
        return ("error", str(error))
    return (entry, entry.to_json(), entry.digest, entry.parsed_schedule().next_after(START))
