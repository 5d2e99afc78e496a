"""``periodiq(app)``: the runtime API against a private Redis and a private Redis broker.

Entries start in 2090 (``start_at``), so every next run below is a hand-written
instant that does not depend on the clock.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import (
    ConfigurationError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    Periodiq,
    PeriodiqError,
    StoreUnavailableError,
    periodiq,
)
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.plan import to_ms
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.protocol.records import RunEnd

TASK = "proj.tasks.report"
START = datetime(2090, 1, 1, tzinfo=UTC)
KEYS = Keys("periodiq:t", 16)  # the app "t" below, with the default partitions


def due_key(name: str) -> str:
    return KEYS.of(name).due


def change_state(client: redis.Redis, name: str, **changes: Any) -> None:
    """Change fields of an entry's stored state, as the scripts do."""
    part = KEYS.of(name)
    state = json.loads(client.hget(part.state, name) or "{}")
    state.update(changes)
    client.hset(part.state, name, json.dumps(state))


Snapshot = dict[Any, tuple[Any, Any, bool]]


def minutes(n: int) -> datetime:
    return START + timedelta(minutes=n)


AppFactory = Callable[..., Celery]


@pytest.fixture
def make_app(broker_url: str) -> Iterator[AppFactory]:
    """Build Celery apps on the private broker; they are closed after the test."""
    apps: list[Celery] = []

    def build(redis_url: str, **conf: Any) -> Celery:
        app = Celery("t", broker=broker_url, set_as_current=False)
        app.conf.periodiq_redis_url = redis_url
        app.conf.update(conf)
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: AppFactory, redis_url: str) -> Celery:
    return make_app(redis_url)


@pytest.fixture
def api(app: Celery) -> Iterator[Periodiq]:
    client = periodiq(app)
    yield client
    client.store.client.close()


@pytest.fixture
def broker(broker_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(broker_url)
    yield client
    client.close()


@pytest.fixture
def populated(api: Periodiq) -> Periodiq:
    """A schedule with an owned entry, a paused one and some history."""
    api.add("report", TASK, every=60, start_at=START, owner="team")
    api.add("cleanup", "proj.tasks.cleanup", cron="0 3 * * *", start_at=START)
    api.add("sync", "proj.tasks.sync", every=600, start_at=START, owner="team")
    api.pause("sync", note="migration")
    api.trigger("report")
    return api


def snapshot(url: str) -> Snapshot:
    """Every key with its type, serialized value and whether it has a TTL."""
    client = redis.Redis.from_url(url)
    try:
        return {
            key: (client.type(key), client.dump(key), client.pttl(key) > 0)
            for key in client.scan_iter()
        }
    finally:
        client.close()


def redis_now(client: redis.Redis) -> datetime:
    seconds, micros = client.time()
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)


def messages(broker: redis.Redis, queue: str = "celery") -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in broker.lrange(queue, 0, -1)]


# add / get


def test_add_stores_a_runtime_entry_with_its_first_tick(api: Periodiq) -> None:
    stored = api.add("report", TASK, every=60, start_at=START, kwargs={"region": "eu"})

    assert stored.entry == build_entry(
        "report", TASK, every=60, start_at=START, kwargs={"region": "eu"}
    )
    assert stored.entry.source == "runtime"
    assert stored.next_run == START
    assert (stored.status, stored.version, stored.counters) == ("active", 1, {})


def test_add_schedules_the_first_tick_after_the_redis_clock(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    before = redis_now(redis_client)

    stored = api.add("report", TASK, every=60)

    after = redis_now(redis_client)
    assert stored.next_run is not None
    assert before < stored.next_run <= after + timedelta(seconds=60)
    assert (stored.next_run.second, stored.next_run.microsecond) == (0, 0)


def test_add_puts_the_entry_in_the_due_set_at_its_first_tick(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    api.add("report", TASK, every=60, start_at=START)

    assert redis_client.zscore(due_key("report"), "report") == to_ms(START)


def test_add_takes_default_policies_from_the_settings(make_app: AppFactory, redis_url: str) -> None:
    app = make_app(redis_url, periodiq_default_overlap="allow", periodiq_default_catchup="all")

    stored = periodiq(app).add("report", TASK, every=60, start_at=START)

    assert stored.entry is not None
    assert (stored.entry.overlap, stored.entry.catchup) == ("allow", "all")


def test_add_announces_the_entry_on_the_changes_channel(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    listener = redis_client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    listener.subscribe(KEYS.changes)
    listener.get_message(timeout=5)  # the subscribe confirmation

    api.add("report", TASK, every=60, start_at=START)

    message = listener.get_message(timeout=5)
    listener.close()
    assert message is not None
    assert message["data"] == "report"


def test_get_returns_the_stored_entry_and_its_state(api: Periodiq) -> None:
    added = api.add("report", TASK, every=60, start_at=START, owner="team")

    stored = api.get("report")

    assert stored.definition == added.definition
    assert (stored.next_run, stored.status, stored.running) == (START, "active", None)
    assert stored.entry is not None
    assert stored.entry.owner == "team"


def test_periodiq_keeps_one_client_per_app(app: Celery) -> None:
    assert periodiq(app) is periodiq(app)


def test_periodiq_refuses_an_app_with_an_invalid_setting(
    make_app: AppFactory, redis_url: str
) -> None:
    app = make_app(redis_url, periodiq_batch_size=0)

    with pytest.raises(ConfigurationError, match="periodiq_batch_size"):
        periodiq(app)


# list


def test_list_is_sorted_by_next_run_then_name_with_paused_entries_last(api: Periodiq) -> None:
    api.add("paused", TASK, every=60, start_at=minutes(0))
    api.pause("paused")
    api.add("late", TASK, every=60, start_at=minutes(3))
    api.add("mid-b", TASK, every=60, start_at=minutes(2))
    api.add("early", TASK, every=60, start_at=minutes(1))
    api.add("mid-a", TASK, every=60, start_at=minutes(2))

    listed = api.list()

    assert [item.name for item in listed] == ["early", "mid-a", "mid-b", "late", "paused"]


def test_list_with_an_owner_shows_only_that_owners_entries(populated: Periodiq) -> None:
    listed = populated.list(owner="team")

    assert [item.name for item in listed] == ["report", "sync"]


def test_list_of_an_unknown_owner_is_empty(populated: Periodiq) -> None:
    assert populated.list(owner="nobody") == []


def test_a_disabled_entry_has_no_next_run(api: Periodiq) -> None:
    stored = api.add("report", TASK, every=60, start_at=START, enabled=False)

    assert stored.status == "disabled"
    assert stored.next_run is None


# update


def test_update_recomputes_the_next_run_from_the_new_schedule(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)

    stored = api.update("report", cron="30 6 * * *")

    assert stored.next_run == datetime(2090, 1, 1, 6, 30, tzinfo=UTC)
    assert stored.entry is not None
    assert (stored.entry.schedule, stored.entry.form) == ("30 6 * * *", "cron")


def test_update_moves_the_entry_in_the_due_set(api: Periodiq, redis_client: redis.Redis) -> None:
    api.add("report", TASK, every=60, start_at=START)

    api.update("report", start_at=minutes(5))

    assert redis_client.zscore(due_key("report"), "report") == to_ms(minutes(5))


def test_update_keeps_counters_and_history(api: Periodiq, redis_client: redis.Redis) -> None:
    api.add("report", TASK, every=60, start_at=START)
    change_state(redis_client, "report", n={"enqueued": 3})  # as the beat's ack does
    task_id = api.trigger("report")

    stored = api.update("report", kwargs={"region": "us"})

    assert stored.counters == {"enqueued": 4}  # 3 from the beat, 1 from trigger()
    assert [event.task_id for event in api.history("report")] == [task_id]
    assert stored.version == 2


def test_update_moves_the_entry_to_its_new_owner(populated: Periodiq) -> None:
    populated.update("report", owner="ops")

    assert [item.name for item in populated.list(owner="ops")] == ["report"]
    assert [item.name for item in populated.list(owner="team")] == ["sync"]


def test_update_of_a_paused_entry_keeps_it_paused(populated: Periodiq) -> None:
    stored = populated.update("sync", every=1200)

    assert (stored.status, stored.next_run, stored.note) == ("paused", None, "migration")


# pause / resume


def test_pause_stops_the_ticks_and_keeps_the_note(api: Periodiq, redis_client: redis.Redis) -> None:
    api.add("report", TASK, every=60, start_at=START)

    stored = api.pause("report", note="maintenance until Monday")

    assert (stored.status, stored.paused, stored.next_run) == ("paused", True, None)
    assert stored.note == "maintenance until Monday"
    assert redis_client.zscore(due_key("report"), "report") is None


def test_resume_schedules_the_next_tick_and_clears_the_note(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    api.add("report", TASK, every=60, start_at=START)
    api.pause("report", note="maintenance")

    stored = api.resume("report")

    assert (stored.status, stored.paused, stored.note) == ("active", False, None)
    assert stored.next_run == START
    assert redis_client.zscore(due_key("report"), "report") == to_ms(START)


# delete


def test_delete_removes_the_entry_and_everything_stored_about_it(
    populated: Periodiq, redis_client: redis.Redis
) -> None:
    populated.delete("report")

    with pytest.raises(EntryNotFoundError):
        populated.get("report")
    assert not [key for key in redis_client.scan_iter() if key.endswith(":report")]
    assert redis_client.smembers(KEYS.of("sync").owner("team")) == {"sync"}
    assert redis_client.zscore(due_key("report"), "report") is None


def test_delete_leaves_the_other_entries_alone(populated: Periodiq) -> None:
    before = {item.name: item.definition for item in populated.list() if item.name != "report"}

    populated.delete("report")

    assert {item.name: item.definition for item in populated.list()} == before


def test_delete_owner_deletes_that_owners_entries_and_returns_their_names(
    populated: Periodiq,
) -> None:
    removed = populated.delete_owner("team")

    assert removed == ["report", "sync"]
    assert [item.name for item in populated.list()] == ["cleanup"]


def test_delete_owner_of_an_unknown_owner_changes_nothing(
    populated: Periodiq, redis_url: str
) -> None:
    before = snapshot(redis_url)

    removed = populated.delete_owner("nobody")

    assert removed == []
    assert snapshot(redis_url) == before


# upcoming / history / beats


def test_upcoming_lists_the_next_fires(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)

    fires = api.upcoming("report", 3)

    assert fires == [minutes(0), minutes(1), minutes(2)]


def test_upcoming_of_zero_fires_is_empty(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)

    assert api.upcoming("report", 0) == []


def test_history_is_newest_first_and_limited(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)
    task_ids = [api.trigger("report") for _ in range(3)]

    events = api.history("report", limit=2)

    assert [(event.kind, event.task_id) for event in events] == [
        ("triggered", task_ids[2]),
        ("triggered", task_ids[1]),
    ]


def test_history_with_failures_only_shows_failed_and_timeboxed_runs(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)
    for kind in ("failed", "succeeded", "timeboxed", "revoked", "succeeded"):
        end = RunEnd(task_id=f"run-{kind}", tick_ms=None, outcome=kind, error="", duration_ms=1,
                     host="h", history_length=40)  # fmt: skip
        api.store.scripts.finish("report", end)  # as the worker's guard records a run's end

    events = api.history("report", failures_only=True)

    assert [(event.kind, event.task_id) for event in events] == [
        ("timeboxed", "run-timeboxed"),
        ("failed", "run-failed"),
    ]
    assert len(api.history("report")) == 5


def test_beats_is_empty_without_a_beat(api: Periodiq) -> None:
    assert api.beats() == []


def test_beats_lists_a_live_beat(api: Periodiq) -> None:
    api.store.scripts.heartbeat("host:42:ab", "start", 60_000, {"host": "host", "pid": 42})

    (beat,) = api.beats()

    assert (beat.id, beat.host, beat.pid) == ("host:42:ab", "host", 42)


# trigger


def test_trigger_publishes_a_manual_run_to_the_broker(api: Periodiq, broker: redis.Redis) -> None:
    api.add("report", TASK, every=60, start_at=START, args=[1, "x"], kwargs={"region": "eu"})

    task_id = api.trigger("report")

    (message,) = messages(broker)
    headers = message["headers"]
    assert (headers["id"], headers["task"]) == (task_id, TASK)
    assert (headers["periodiq_entry"], headers["periodiq_manual"]) == ("report", True)
    assert "periodiq_tick" not in headers
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == ([1, "x"], {"region": "eu"})


def test_trigger_sends_to_the_entrys_queue(api: Periodiq, broker: redis.Redis) -> None:
    api.add("report", TASK, every=60, start_at=START, options={"queue": "reports"})

    task_id = api.trigger("report")

    assert [message["headers"]["id"] for message in messages(broker, "reports")] == [task_id]
    assert messages(broker) == []


def test_trigger_records_the_run_in_the_history(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)

    task_id = api.trigger("report")

    (event,) = api.history("report")
    assert (event.kind, event.task_id, event.tick) == ("triggered", task_id, None)


def test_each_trigger_is_a_new_task_id(api: Periodiq) -> None:
    api.add("report", TASK, every=60, start_at=START)

    task_ids = {api.trigger("report") for _ in range(3)}

    assert len(task_ids) == 3


def test_trigger_of_an_unknown_entry_publishes_nothing(api: Periodiq, broker: redis.Redis) -> None:
    with pytest.raises(EntryNotFoundError):
        api.trigger("missing")

    assert messages(broker) == []


# malformed input: a clear error, and Redis unchanged

Call = Callable[[Periodiq], object]
_NOT_FOUND = "no entry named 'missing'"


def _bad(call: Call, error: type[PeriodiqError], words: list[str], label: str) -> Any:
    return pytest.param(call, error, words, id=label)


MALFORMED = [
    _bad(
        lambda a: a.add("report", TASK, every=30),
        EntryExistsError,
        ["'report' already exists"],
        "add-dup",
    ),
    _bad(lambda a: a.add("", TASK, every=60), EntryError, ["entry name ''"], "add-empty"),
    _bad(lambda a: a.add(" x", TASK, every=60), EntryError, ["leading"], "add-space"),
    _bad(lambda a: a.add(5, TASK, every=60), EntryError, ["entry name 5"], "add-int-name"),  # type: ignore[arg-type]
    _bad(lambda a: a.add("new", TASK), EntryError, ["exactly one of"], "add-no-spec"),
    _bad(lambda a: a.add("new", "", every=60), EntryError, ["task=''"], "add-task"),
    _bad(lambda a: a.add("new", TASK, cron="61 * * * *"), EntryError, ["minute"], "add-cron"),
    _bad(
        lambda a: a.add("new", TASK, every=60, overlap="never"),
        EntryError,
        ["overlap='never'", "skip, allow, buffer_one"],
        "add-overlap",
    ),
    _bad(lambda a: a.add("new", TASK, every=60, owner=""), EntryError, ["owner=''"], "add-owner"),
    _bad(
        lambda a: a.add("new", TASK, every=60, timebox=120),
        EntryError,
        ["timebox=120"],
        "add-timebox",
    ),
    _bad(
        lambda a: a.add("new", TASK, every=60, overlap=""),
        EntryError,
        ["overlap=''"],
        "add-empty-overlap",
    ),
    _bad(lambda a: a.get("missing"), EntryNotFoundError, [_NOT_FOUND], "get-missing"),
    _bad(lambda a: a.get(""), EntryError, ["entry name ''"], "get-empty"),
    _bad(lambda a: a.get(None), EntryError, ["entry name None"], "get-none"),  # type: ignore[arg-type]
    _bad(lambda a: a.update("missing", every=30), EntryNotFoundError, [_NOT_FOUND], "upd-miss"),
    _bad(lambda a: a.update("", every=30), EntryError, ["entry name ''"], "update-empty"),
    _bad(
        lambda a: a.update("report", colour="red"),
        EntryError,
        ["cannot update ['colour']", "allowed"],
        "update-unknown",
    ),
    _bad(
        lambda a: a.update("report", source="code"),
        EntryError,
        ["cannot update ['source']"],
        "update-source",
    ),
    _bad(lambda a: a.update("report", every=0), EntryError, ["every=0"], "update-every"),
    _bad(
        lambda a: a.update("report", cron="* * * * *", every=5),
        EntryError,
        ["(got cron=, every=)"],
        "update-two-specs",
    ),
    _bad(lambda a: a.delete("missing"), EntryNotFoundError, [_NOT_FOUND], "delete-missing"),
    _bad(lambda a: a.delete(""), EntryError, ["entry name ''"], "delete-empty"),
    _bad(lambda a: a.delete_owner(""), EntryError, ["owner=''", "non-empty"], "owner-empty"),
    _bad(lambda a: a.delete_owner(None), EntryError, ["owner=None"], "owner-none"),  # type: ignore[arg-type]
    _bad(lambda a: a.delete_owner(5), EntryError, ["owner=5"], "owner-int"),  # type: ignore[arg-type]
    _bad(lambda a: a.pause("missing"), EntryNotFoundError, [_NOT_FOUND], "pause-missing"),
    _bad(lambda a: a.pause(""), EntryError, ["entry name ''"], "pause-empty"),
    _bad(lambda a: a.pause("report", note=5), EntryError, ["note=5", "text"], "pause-note"),  # type: ignore[arg-type]
    _bad(lambda a: a.resume("missing"), EntryNotFoundError, [_NOT_FOUND], "resume-missing"),
    _bad(lambda a: a.resume(""), EntryError, ["entry name ''"], "resume-empty"),
    _bad(lambda a: a.trigger("missing"), EntryNotFoundError, [_NOT_FOUND], "trigger-missing"),
    _bad(lambda a: a.trigger(""), EntryError, ["entry name ''"], "trigger-empty"),
    _bad(lambda a: a.history("missing"), EntryNotFoundError, [_NOT_FOUND], "history-missing"),
    _bad(lambda a: a.history(""), EntryError, ["entry name ''"], "history-empty"),
    _bad(
        lambda a: a.history("report", limit=0),
        PeriodiqError,
        ["limit=0", "a whole number >= 1"],
        "history-limit-0",
    ),
    _bad(lambda a: a.history("report", limit=-1), PeriodiqError, ["limit=-1"], "limit-neg"),
    _bad(lambda a: a.history("report", limit=True), PeriodiqError, ["limit=True"], "limit-bool"),
    _bad(lambda a: a.history("report", limit="5"), PeriodiqError, ["limit='5'"], "limit-str"),  # type: ignore[arg-type]
    _bad(lambda a: a.history("report", limit=2.5), PeriodiqError, ["limit=2.5"], "limit-float"),  # type: ignore[arg-type]
    _bad(lambda a: a.upcoming("missing"), EntryNotFoundError, [_NOT_FOUND], "upcoming-missing"),
    _bad(
        lambda a: a.upcoming("report", -1),
        PeriodiqError,
        ["n=-1", "a whole number >= 0"],
        "upcoming-neg",
    ),
    _bad(lambda a: a.upcoming("report", True), PeriodiqError, ["n=True"], "upcoming-bool"),
    _bad(lambda a: a.upcoming("report", "3"), PeriodiqError, ["n='3'"], "upcoming-str"),  # type: ignore[arg-type]
    _bad(
        lambda a: a.list(owner=""),
        EntryError,
        ["owner=''"],
        "list-owner-empty",
    ),
    _bad(
        lambda a: a.list(owner=5),  # type: ignore[arg-type]
        EntryError,
        ["owner=5"],
        "list-owner-int",
    ),
]


@pytest.mark.parametrize(("call", "error", "words"), MALFORMED)
def test_malformed_input_gets_a_clear_error_and_changes_nothing(
    populated: Periodiq,
    redis_url: str,
    call: Call,
    error: type[PeriodiqError],
    words: list[str],
) -> None:
    before = snapshot(redis_url)

    with pytest.raises(error) as caught:
        call(populated)

    message = str(caught.value)
    assert all(word in message for word in words), message
    assert snapshot(redis_url) == before


def test_an_unknown_entry_is_also_a_key_error(api: Periodiq) -> None:
    with pytest.raises(KeyError) as caught:
        api.get("missing")

    assert str(caught.value) == "no entry named 'missing'"


# Redis unreachable

API_CALLS: list[Any] = [
    pytest.param(lambda a: a.add("new", TASK, every=60), id="add"),
    pytest.param(lambda a: a.get("report"), id="get"),
    pytest.param(lambda a: a.list(), id="list"),
    pytest.param(lambda a: a.list(owner="team"), id="list-owner"),
    pytest.param(lambda a: a.update("report", every=30), id="update"),
    pytest.param(lambda a: a.delete("report"), id="delete"),
    pytest.param(lambda a: a.delete_owner("team"), id="delete_owner"),
    pytest.param(lambda a: a.pause("report"), id="pause"),
    pytest.param(lambda a: a.resume("report"), id="resume"),
    pytest.param(lambda a: a.trigger("report"), id="trigger"),
    pytest.param(lambda a: a.history("report"), id="history"),
    pytest.param(lambda a: a.upcoming("report"), id="upcoming"),
    pytest.param(lambda a: a.beats(), id="beats"),
]


@pytest.mark.parametrize("userinfo", [":secret", "alice:secret"])
@pytest.mark.parametrize("call", API_CALLS)
def test_an_unreachable_redis_is_a_store_error_that_hides_the_password(
    redis_server: LocalRedis, make_app: AppFactory, userinfo: str, call: Call
) -> None:
    api = periodiq(make_app(f"redis://{userinfo}@127.0.0.1:{redis_server.port}/0"))
    redis_server.stop()

    with pytest.raises(StoreUnavailableError) as caught:
        call(api)

    message = str(caught.value)
    assert "secret" not in message
    assert f"127.0.0.1:{redis_server.port}" in message


def test_an_unreachable_redis_hides_a_password_given_as_a_query_parameter(
    redis_server: LocalRedis, make_app: AppFactory
) -> None:
    api = periodiq(make_app(f"redis://127.0.0.1:{redis_server.port}/0?password=secret"))
    redis_server.stop()

    with pytest.raises(StoreUnavailableError) as caught:
        api.list()

    assert "secret" not in str(caught.value)


# bad data in Redis is contained


def test_an_unreadable_entry_is_listed_as_quarantined_beside_the_others(
    populated: Periodiq, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    listed = populated.list()

    assert [(item.name, item.status) for item in listed] == [
        ("report", "active"),
        ("cleanup", "active"),
        ("broken", "quarantined"),
        ("sync", "paused"),
    ]
    broken = next(item for item in listed if item.name == "broken")
    assert broken.entry is None
    assert broken.invalid is not None
    assert "not JSON" in broken.invalid


def test_an_invalid_entry_is_quarantined_with_the_reason(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    api.add("report", TASK, every=60, start_at=START)
    invalid = '{"name":"broken","task":"","schedule":"@every 1m","form":"every"}'
    redis_client.hset(KEYS.of("broken").entries, "broken", invalid)

    stored = api.get("broken")

    assert (stored.status, stored.entry, stored.next_run) == ("quarantined", None, None)
    assert stored.invalid is not None
    assert "task=''" in stored.invalid
    assert [item.name for item in api.list()] == ["report", "broken"]


def test_a_quarantined_entry_cannot_be_triggered(
    api: Periodiq, redis_client: redis.Redis, broker: redis.Redis
) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    with pytest.raises(EntryError, match="'broken' is quarantined"):
        api.trigger("broken")

    assert messages(broker) == []


def test_an_unreadable_entry_can_be_deleted(api: Periodiq, redis_client: redis.Redis) -> None:
    redis_client.hset(KEYS.of("broken").entries, "broken", "{not json")

    api.delete("broken")

    assert redis_client.hexists(KEYS.of("broken").entries, "broken") == 0


def test_garbage_in_one_entrys_state_does_not_stop_list(
    populated: Periodiq, redis_client: redis.Redis
) -> None:
    change_state(redis_client, "report", next="soon")

    listed = populated.list()

    assert {item.name for item in listed} == {"cleanup", "report", "sync"}
