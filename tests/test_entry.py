"""Entries validate themselves, survive a JSON round trip, and settings and keys are checked.

Every rejected option gets an :class:`EntryError` (or, for settings, a
:class:`ConfigurationError`) whose message names the option and what is allowed.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery

from celery_periodiq.config import DEFAULTS, Settings
from celery_periodiq.errors import ConfigurationError, EntryError, PeriodiqError
from celery_periodiq.model.build import build_entry, changed_entry
from celery_periodiq.model.entry import Entry

EVERY: dict[str, Any] = {"every": 60}
TASK = "proj.tasks.job"
NAN = float("nan")


def rejection(name: Any, task: Any = TASK, **options: Any) -> str:
    """The message of the EntryError that ``build_entry`` raises for these options."""
    with pytest.raises(EntryError) as caught:
        build_entry(name, task, **options)
    return str(caught.value)


def full_entry() -> Entry:
    """An entry with every field set away from its default."""
    berlin = ZoneInfo("Europe/Berlin")
    return build_entry(
        "report",
        "proj.tasks.report",
        cron="0 9 * * *",
        args=[1, "two", None],
        kwargs={"region": "eu", "depth": [1, 2]},
        options={"queue": "reports", "priority": 5},
        tz="Europe/Berlin",
        owner="team-a",
        tolerance=30,
        timebox=600.5,
        grace=5,
        overlap="buffer_one",
        catchup="all",
        catchup_window=3600,
        jitter=10.0,
        start_at=datetime(2024, 1, 1, 8, tzinfo=berlin),
        end_at=datetime(2030, 1, 1, tzinfo=berlin),
        enabled=False,
        source="code",
        alert_after=7200,
        failure_threshold=4,
        pause_on_failure=True,
    )


# build_entry: one EntryError per invalid option


@pytest.mark.parametrize(
    ("name", "options", "words"),
    [
        pytest.param("", EVERY, ["entry name ''", "1-200 characters"], id="empty-name"),
        pytest.param("   ", EVERY, ["entry name '   '", "not blank"], id="blank-name"),
        pytest.param("x" * 201, EVERY, ["entry name", "1-200 characters"], id="long-name"),
        pytest.param(" lead", EVERY, ["' lead'", "no leading/trailing space"], id="space-name"),
        pytest.param("a\nb", EVERY, ["'a\\nb'", "printable"], id="newline-name"),
        pytest.param(5, EVERY, ["entry name 5", "1-200 characters"], id="int-name"),
        pytest.param(
            "n", {**EVERY, "args": "abc"}, ["args='abc'", "a list of JSON values"], id="args-str"
        ),
        pytest.param(
            "n", {**EVERY, "args": [object()]}, ["args=", "JSON values only"], id="args-object"
        ),
        pytest.param("n", {**EVERY, "args": [NAN]}, ["args=[nan]", "JSON values"], id="args-nan"),
        pytest.param(
            "n",
            {**EVERY, "kwargs": {1: 2}},
            ["kwargs={1: 2}", "a dict with string keys"],
            id="kwargs-int-key",
        ),
        pytest.param(
            "n",
            {**EVERY, "kwargs": {"a": {1, 2}}},
            ["kwargs=", "JSON values only"],
            id="kwargs-set-value",
        ),
        pytest.param(
            "n",
            {**EVERY, "options": {"colour": "red"}},
            ["options['colour']='red'", "queue: str", "priority: int", "compression: str"],
            id="unknown-option-key",
        ),
        pytest.param(
            "n",
            {**EVERY, "options": {"queue": 5}},
            ["options['queue']=5", "queue: str"],
            id="option-wrong-type",
        ),
        pytest.param(
            "n",
            {**EVERY, "options": {"priority": True}},
            ["options['priority']=True", "priority: int"],
            id="priority-bool",
        ),
        pytest.param(
            "n",
            {**EVERY, "options": {"priority": 256}},
            ["options['priority']=256", "0-255"],
            id="prio-256",
        ),
        pytest.param(
            "n",
            {**EVERY, "options": {"priority": -1}},
            ["options['priority']=-1", "0-255"],
            id="prio-neg",
        ),
        pytest.param(
            "n", {**EVERY, "owner": ""}, ["owner=''", "a non-empty printable tag"], id="owner-empty"
        ),
        pytest.param(
            "n", {**EVERY, "owner": 5}, ["owner=5", "a non-empty printable tag"], id="owner-int"
        ),
        pytest.param(
            "n", {**EVERY, "owner": "a\tb"}, ["owner='a\\tb'", "printable"], id="owner-tab"
        ),
        pytest.param(
            "n", {**EVERY, "group": " "}, ["group=' '", "a non-empty printable tag"], id="group"
        ),
        pytest.param(
            "n", {**EVERY, "enabled": "yes"}, ["enabled='yes'", "True or False"], id="enabled-str"
        ),
        pytest.param(
            "n", {**EVERY, "enabled": 1}, ["enabled=1", "True or False"], id="enabled-int"
        ),
        pytest.param(
            "n", {**EVERY, "tolerance": -1}, ["tolerance=-1", "seconds >= 0"], id="tolerance-neg"
        ),
        pytest.param(
            "n", {**EVERY, "tolerance": NAN}, ["tolerance=nan", "seconds >= 0"], id="tolerance-nan"
        ),
        pytest.param(
            "n",
            {**EVERY, "timebox": 0},
            ["timebox=0", "seconds > 0, 'auto' or None"],
            id="timebox-zero",
        ),
        pytest.param("n", {**EVERY, "grace": -1}, ["grace=-1", "seconds >= 0"], id="grace-neg"),
        pytest.param("n", {**EVERY, "grace": NAN}, ["grace=nan", "seconds >= 0"], id="grace-nan"),
        pytest.param("n", {**EVERY, "jitter": -1}, ["jitter=-1", "seconds >= 0"], id="jitter-neg"),
        pytest.param(
            "n", {**EVERY, "jitter": NAN}, ["jitter=nan", "seconds >= 0"], id="jitter-nan"
        ),
        pytest.param(
            "n",
            {**EVERY, "jitter": float("inf")},
            ["jitter=inf", "seconds >= 0"],
            id="jitter-inf",
        ),
        pytest.param(
            "n",
            {**EVERY, "overlap": "never"},
            ["overlap='never'", "skip, allow, buffer_one"],
            id="overlap-unknown",
        ),
        pytest.param(
            "n",
            {**EVERY, "catchup": "some"},
            ["catchup='some'", "last, skip, all"],
            id="catchup-unknown",
        ),
        pytest.param(
            "n",
            {**EVERY, "catchup_window": 0},
            ["catchup_window=0", "seconds > 0 or None"],
            id="catchup-window-zero",
        ),
        pytest.param(
            "n",
            {**EVERY, "timebox": 61},
            ["timebox=61", "at most the interval, 60 s"],
            id="timebox-over-interval",
        ),
        pytest.param(
            "n",
            {**EVERY, "tolerance": 60, "timebox": 30},
            ["tolerance=60", "less than the interval, 60 s"],
            id="tolerance-equals-interval",
        ),
        pytest.param(
            "n",
            {**EVERY, "tz": "Mars/Olympus"},
            ["entry 'n'", "time zone", "'Mars/Olympus'", "IANA name"],
            id="tz-unknown",
        ),
        pytest.param(
            "n",
            {**EVERY, "start_at": datetime(2024, 1, 1)},
            ["entry 'n'", "start_at", "no time zone", "aware datetime"],
            id="start-at-naive",
        ),
        pytest.param(
            "n",
            {
                **EVERY,
                "start_at": datetime(2024, 1, 2, tzinfo=UTC),
                "end_at": datetime(2024, 1, 1, tzinfo=UTC),
            },
            ["entry 'n'", "end_at", "before start_at"],
            id="end-before-start",
        ),
        pytest.param(
            "n", {}, ["give exactly one of cron=, every=, calendar=", "(got none)"], id="no-spec"
        ),
        pytest.param(
            "n",
            {"cron": "* * * * *", "every": 60},
            ["exactly one of cron=, every=, calendar=", "(got cron=, every=)"],
            id="cron-and-every",
        ),
        pytest.param(
            "n",
            {"cron": "* * * * *", "calendar": "daily"},
            ["(got cron=, calendar=)"],
            id="cron-and-calendar",
        ),
        pytest.param(
            "n",
            {"cron": "61 * * * *"},
            ["entry 'n'", "minute field", "61", "0-59"],
            id="bad-cron",
        ),
        pytest.param(
            "n",
            {"calendar": "Funday 10:00"},
            ["entry 'n'", "weekday", "'funday'", "Mon..Sun"],
            id="bad-calendar",
        ),
        pytest.param(
            "n",
            {"every": "soon"},
            ["entry 'n'", "'soon' is not a duration", "30s, 1h30m"],
            id="bad-every-text",
        ),
        pytest.param("n", {"every": 0}, ["every=0", "longer than zero"], id="every-zero"),
        pytest.param(
            "n", {"every": True}, ["every=True", "seconds or a timedelta"], id="every-bool"
        ),
        pytest.param(
            "n", {"every": 0.0001}, ["every=0.0001", "unit is a millisecond"], id="every-us"
        ),
        pytest.param("n", {"cron": 5}, ["cron=5", "not a string"], id="cron-int"),
    ],
)
def test_build_entry_rejects_an_invalid_option_naming_it_and_what_is_allowed(
    name: Any, options: dict[str, Any], words: list[str]
) -> None:
    message = rejection(name, **options)

    missing = [word for word in words if word not in message]
    assert not missing, f"{missing} not in {message!r}"


@pytest.mark.parametrize(
    ("task", "words"),
    [
        ("", ["task=''", "a task name such as 'proj.tasks.report'"]),
        ("   ", ["task='   '", "a task name"]),
        (5, ["task 5", "neither a task name nor a Celery task"]),
        (None, ["task None", "neither a task name nor a Celery task"]),
    ],
)
def test_build_entry_rejects_something_that_is_not_a_task(task: Any, words: list[str]) -> None:
    message = rejection("n", task, **EVERY)

    assert all(word in message for word in words), message


@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({"timebox": -1}, ["timebox=-1", "seconds > 0"], id="timebox-neg"),
        pytest.param({"timebox": NAN}, ["timebox=nan", "seconds > 0"], id="timebox-nan"),
        pytest.param({"timebox": "soon"}, ["timebox='soon'", "'auto'"], id="timebox-str"),
        pytest.param({"catchup_window": -5}, ["catchup_window=-5", "seconds > 0"], id="window-neg"),
        pytest.param(
            {"catchup_window": NAN}, ["catchup_window=nan", "seconds > 0"], id="window-nan"
        ),
    ],
)
def test_a_refused_timebox_or_window_message_states_what_is_really_allowed(
    options: dict[str, Any], words: list[str]
) -> None:
    message = rejection("n", **EVERY, **options)

    missing = [word for word in words if word not in message]
    assert not missing, f"{missing} not in {message!r}"


def test_build_entry_refuses_a_tolerance_as_long_as_the_interval() -> None:
    message = rejection("n", **EVERY, tolerance=60)

    assert "tolerance=60" in message


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("kwargs", [1]),
        ("kwargs", "abc"),
        ("kwargs", 5),
        ("options", "q"),
        ("options", 5),
    ],
)
def test_build_entry_refuses_kwargs_or_options_that_are_not_a_dict(
    option: str, value: object
) -> None:
    message = rejection("n", **EVERY, **{option: value})

    assert f"{option}=" in message


def test_an_entry_error_is_a_periodiq_error_and_a_value_error() -> None:
    with pytest.raises(EntryError) as caught:
        build_entry("n", TASK, every=0)

    assert isinstance(caught.value, PeriodiqError)
    assert isinstance(caught.value, ValueError)


# Entry: the checks build_entry cannot reach


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("form", "weird", ["form='weird'", "cron, calendar, every"]),
        ("source", "cli", ["source='cli'", "code, config, runtime"]),
        ("args", "abc", ["args='abc'", "a list of JSON values"]),
        ("kwargs", "abc", ["kwargs='abc'", "a dict with string keys"]),
        ("options", "q", ["options='q'", "queue, routing_key, exchange, priority"]),
        ("task", None, ["task=None", "a task name"]),
        ("name", None, ["entry name None", "1-200 characters"]),
        ("schedule", "@every 1m", ["cron='@every 1m'", "not a cron expression"]),
    ],
)
def test_entry_rejects_an_invalid_field_naming_it_and_what_is_allowed(
    field: str, value: object, words: list[str]
) -> None:
    values: dict[str, Any] = {"name": "n", "task": TASK, "schedule": "* * * * *", field: value}

    with pytest.raises(EntryError) as caught:
        Entry(**values)

    assert all(word in str(caught.value) for word in words), str(caught.value)


def test_entry_evolve_validates_the_copy() -> None:
    entry = build_entry("n", TASK, **EVERY)

    with pytest.raises(EntryError, match="overlap='sometimes'"):
        entry.evolve(overlap="sometimes")


# build_entry: what it accepts


@pytest.mark.parametrize(
    ("every", "spec"),
    [
        (60, "@every 1m"),
        (1.5, "@every 1s500ms"),
        (timedelta(hours=1, minutes=30), "@every 1h30m"),
        ("1h30m", "@every 1h30m"),
        ("@every 5m", "@every 5m"),
    ],
)
def test_every_is_stored_as_an_at_every_spec(every: float | timedelta | str, spec: str) -> None:
    entry = build_entry("n", TASK, every=every)

    assert (entry.schedule, entry.form) == (spec, "every")


def test_build_entry_takes_the_name_of_a_task_object() -> None:
    class FakeTask:
        name = "proj.tasks.cleanup"

    entry = build_entry("n", FakeTask(), cron="@daily")

    assert (entry.task, entry.schedule, entry.form) == ("proj.tasks.cleanup", "@daily", "cron")


def test_build_entry_defaults() -> None:
    entry = build_entry("n", TASK, calendar="Mon..Fri 09:00")

    assert entry.form == "calendar"
    assert (entry.args, entry.kwargs, entry.options) == ([], {}, {})
    assert (entry.tz, entry.owner, entry.enabled, entry.source) == ("UTC", None, True, "runtime")
    assert (entry.tolerance, entry.timebox, entry.grace) == ("auto", "auto", None)
    assert (entry.overlap, entry.catchup, entry.catchup_window, entry.jitter) == (
        "skip",
        "last",
        None,
        0.0,
    )


# changed_entry


def test_changed_entry_keeps_the_schedule_when_no_schedule_option_is_given() -> None:
    entry = build_entry("n", TASK, every=60, owner="team", kwargs={"x": 1})

    changed = changed_entry(entry, {"kwargs": {"x": 2}})

    assert (changed.schedule, changed.form) == ("@every 1m", "every")
    assert (changed.kwargs, changed.owner) == ({"x": 2}, "team")


def test_changed_entry_replaces_the_schedule_with_a_new_form() -> None:
    entry = build_entry("n", TASK, every=60)

    changed = changed_entry(entry, {"cron": "*/5 * * * *"})

    assert (changed.schedule, changed.form) == ("*/5 * * * *", "cron")


def test_changed_entry_keeps_name_and_source() -> None:
    entry = build_entry("n", TASK, every=60, source="config")

    changed = changed_entry(entry, {"task": "proj.tasks.other", "owner": None})

    assert (changed.name, changed.source, changed.task, changed.owner) == (
        "n",
        "config",
        "proj.tasks.other",
        None,
    )


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        pytest.param(
            {"colour": "red", "name": "m"},
            ["cannot update ['colour', 'name']", "allowed:", "'cron'", "'tolerance'"],
            id="unknown",
        ),
        pytest.param({"source": "code"}, ["cannot update ['source']"], id="source"),
        pytest.param({"cron": None}, ["exactly one of cron=, every=, calendar="], id="no-spec"),
        pytest.param({"cron": "* * * * *", "every": 5}, ["(got cron=, every=)"], id="two-specs"),
        pytest.param({"overlap": "x"}, ["overlap='x'", "skip, allow, buffer_one"], id="overlap"),
        pytest.param({"timebox": 120}, ["timebox=120", "at most the interval"], id="timebox"),
        pytest.param({"every": "soon"}, ["'soon' is not a duration"], id="bad-spec"),
    ],
)
def test_changed_entry_rejects_unknown_or_invalid_changes(
    changes: dict[str, Any], words: list[str]
) -> None:
    entry = build_entry("n", TASK, every=60)

    with pytest.raises(EntryError) as caught:
        changed_entry(entry, changes)

    assert all(word in str(caught.value) for word in words), str(caught.value)


# JSON


def test_an_entry_survives_a_json_round_trip() -> None:
    entry = full_entry()

    restored = Entry.from_json(entry.to_json())

    assert restored == entry
    assert restored.to_json() == entry.to_json()


def test_json_is_canonical_with_instants_in_utc() -> None:
    entry = build_entry(
        "n", TASK, every=60, start_at=datetime(2024, 1, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    )

    text = entry.to_json()

    assert text.startswith('{"catchup":"last","expires":"auto","form":"every",')
    assert '"start_at":"2024-01-01T00:00:00+00:00"' in text
    assert ", " not in text


def test_stored_json_leaves_out_fields_that_hold_nothing_and_reads_back_the_same() -> None:
    bare = build_entry("n", TASK, cron="@daily")
    full = full_entry()

    assert json.loads(bare.to_json()) == {
        "name": "n", "task": TASK, "schedule": "@daily", "catchup": "last", "overlap": "skip",
        "expires": "auto", "timebox": "auto", "tolerance": "auto",
    }  # fmt: skip
    assert Entry.from_json(bare.to_json()) == bare
    assert Entry.from_json(full.to_json()) == full


def test_from_json_accepts_bytes() -> None:
    entry = full_entry()

    assert Entry.from_json(entry.to_json().encode()) == entry


def test_the_digest_is_stable_for_equal_definitions() -> None:
    digests = {full_entry().digest for _ in range(3)}

    assert len(digests) == 1
    assert len(digests.pop()) == 16


_CHANGES: dict[str, dict[str, Any]] = {
    "name": {"name": "report-2"},
    "task": {"task": "proj.tasks.other"},
    "schedule": {"schedule": "0 10 * * *"},
    # No spec is valid in two forms, so the form changes together with the spec.
    "form": {"form": "calendar", "schedule": "*-*-* 09:00"},
    "tz": {"tz": "UTC"},
    "args": {"args": [1, "two"]},
    "kwargs": {"kwargs": {"region": "us", "depth": [1, 2]}},
    "options": {"options": {"queue": "reports", "priority": 6}},
    "owner": {"owner": "team-b"},
    "group": {"group": "reports"},
    "enabled": {"enabled": True},
    "start_at": {"start_at": datetime(2024, 1, 1, 7, 0, 0, 1000, tzinfo=UTC)},
    "end_at": {"end_at": None},
    "tolerance": {"tolerance": "auto"},
    "timebox": {"timebox": None},
    "grace": {"grace": 6},
    "overlap": {"overlap": "allow"},
    "catchup": {"catchup": "last"},
    "catchup_window": {"catchup_window": 3601},
    "expires": {"expires": 90},
    "jitter": {"jitter": 10.5},
    "source": {"source": "runtime"},
    "alert_after": {"alert_after": 300},
    "failure_threshold": {"failure_threshold": 5},
    "pause_on_failure": {"pause_on_failure": False},
    "max_runs": {"max_runs": 12},
    "exclude": {"exclude": ["2026-12-25"]},
}


@pytest.mark.parametrize("field", [f.name for f in fields(Entry)])
def test_the_digest_changes_with_every_field(field: str) -> None:
    entry = full_entry()

    changed = entry.evolve(**_CHANGES[field])

    assert changed.digest != entry.digest


def test_equal_entries_have_equal_digests() -> None:
    as_int = build_entry("n", TASK, every=60, jitter=10, tolerance=5, grace=2)
    as_float = build_entry("n", TASK, every=60, jitter=10.0, tolerance=5.0, grace=2.0)

    assert as_int == as_float
    assert as_int.digest == as_float.digest


_VALID = '"name":"n","task":"t","schedule":"@every 1m","form":"every"'


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("", ["not JSON"], id="empty"),
        pytest.param("{", ["not JSON"], id="truncated"),
        pytest.param(b"\xff\xfe", ["not JSON"], id="binary"),
        pytest.param("[1, 2]", ["[1, 2] is not a JSON object"], id="list"),
        pytest.param("null", ["None is not a JSON object"], id="null"),
        pytest.param('"text"', ["is not a JSON object"], id="string"),
        pytest.param("{" + _VALID + ',"colour":"red"}', ["unknown fields ['colour']"], id="extra"),
        pytest.param('{"name":"n","task":"t"}', ["missing fields ['schedule']"], id="missing"),
        pytest.param(
            "{" + _VALID + ',"start_at":"yesterday"}',
            ["start_at='yesterday'", "ISO 8601 instant with offset"],
            id="bad-iso",
        ),
        pytest.param(
            "{" + _VALID + ',"end_at":5}', ["end_at=5", "ISO 8601 instant"], id="number-instant"
        ),
        pytest.param(
            "{" + _VALID + ',"start_at":"2024-01-01T00:00:00"}',
            ["start_at='2024-01-01T00:00:00'", "with offset"],
            id="naive-start",
        ),
        pytest.param(
            "{" + _VALID + ',"end_at":"2024-01-01T00:00:00"}',
            ["end_at='2024-01-01T00:00:00'", "with offset"],
            id="naive-end",
        ),
        pytest.param(
            '{"name":"n","task":"","schedule":"@every 1m","form":"every"}',
            ["task=''"],
            id="invalid-entry",
        ),
        pytest.param(
            '{"name":"n","task":"t","schedule":"@every 1m"}',
            ["not a cron expression"],
            id="form-mismatch",
        ),
        pytest.param("{" + _VALID + ',"tolerance":NaN}', ["tolerance=nan"], id="nan-tolerance"),
    ],
)
def test_from_json_rejects_what_is_not_a_valid_entry(text: str | bytes, words: list[str]) -> None:
    with pytest.raises(EntryError) as caught:
        Entry.from_json(text)

    assert all(word in str(caught.value) for word in words), str(caught.value)


# Settings


def app_with(broker: str | None = None, **conf: Any) -> Celery:
    app = Celery("t", broker=broker, set_as_current=False)
    app.conf.update(conf)
    return app


def test_settings_default_to_documented_values() -> None:
    settings = Settings.from_app(app_with("redis://127.0.0.1:6390/3"))

    assert settings.redis_url == "redis://127.0.0.1:6390/3"
    assert settings.redis_options == {}
    assert (settings.key_prefix, settings.claim_lease, settings.batch_size) == (
        "periodiq:t",
        10.0,
        500,
    )
    assert (settings.history_length, settings.catchup_cap, settings.default_grace) == (
        40,
        100,
        10.0,
    )
    assert (settings.default_catchup, settings.default_overlap) == ("last", "skip")


@pytest.mark.parametrize(
    ("broker", "redis_url"),
    [
        ("redis://:pw@broker.example:6379/2", "redis://:pw@broker.example:6379/2"),
        ("rediss://broker.example:6380/0", "rediss://broker.example:6380/0"),
        ("amqp://guest@localhost//", "redis://localhost:6379/0"),
        (None, "redis://localhost:6379/0"),
    ],
)
def test_the_redis_url_comes_from_a_redis_broker_else_localhost(
    broker: str | None, redis_url: str
) -> None:
    settings = Settings.from_app(app_with(broker))

    assert settings.redis_url == redis_url


def test_an_explicit_redis_url_wins_over_the_broker() -> None:
    app = app_with("redis://broker.example/0", periodiq_redis_url="unix:///run/redis.sock")

    assert Settings.from_app(app).redis_url == "unix:///run/redis.sock"


def test_settings_read_every_periodiq_setting() -> None:
    app = app_with(
        "amqp://localhost//",
        periodiq_redis_url="rediss://schedule.example:6380/1",
        periodiq_redis_options={"ssl_ca_certs": "/etc/ca.pem"},
        periodiq_key_prefix="prod",
        periodiq_claim_lease=2.5,
        periodiq_batch_size=50,
        periodiq_history_length=7,
        periodiq_catchup_cap=3,
        periodiq_default_catchup="all",
        periodiq_default_overlap="allow",
        periodiq_default_grace=0,
    )

    settings = Settings.from_app(app)

    assert settings == Settings(
        redis_url="rediss://schedule.example:6380/1",
        redis_options={"ssl_ca_certs": "/etc/ca.pem"},
        key_prefix="prod",
        claim_lease=2.5,
        batch_size=50,
        history_length=7,
        catchup_cap=3,
        default_catchup="all",
        default_overlap="allow",
        default_grace=0.0,
        namespace="t",
        url_origin="periodiq_redis_url",
    )


@pytest.mark.parametrize(
    ("main", "prefix"),
    [
        ("proj", "periodiq:proj"),
        ("example_project.main", "periodiq:example_project.main"),
        ("my app {v2}", "periodiq:my_app__v2_"),
        (None, "periodiq:default"),
    ],
)
def test_each_app_gets_its_own_prefix_from_its_main_name(main: str | None, prefix: str) -> None:
    app = Celery(main, broker="redis://127.0.0.1:6390/0", set_as_current=False)

    settings = Settings.from_app(app)

    assert settings.key_prefix == prefix
    assert settings.keys.beats == "{" + prefix + "}:beats"
    assert settings.keys.part(3).entries == "{" + prefix + ":3}:entries"


def test_an_explicit_prefix_is_shared_by_apps_that_set_it() -> None:
    first = app_with("redis://127.0.0.1:6390/0", periodiq_key_prefix="shared")
    second = Celery("other", broker="redis://127.0.0.1:6390/0", set_as_current=False)
    second.conf.periodiq_key_prefix = "shared"

    assert Settings.from_app(first).keys.tag == Settings.from_app(second).keys.tag == "{shared}"


@pytest.mark.parametrize(
    ("broker", "conf", "origin"),
    [
        ("redis://broker.example/0", {}, "broker_url"),
        ("amqp://localhost//", {}, "default"),
        ("amqp://localhost//", {"periodiq_redis_url": "redis://s/0"}, "periodiq_redis_url"),
    ],
)
def test_settings_say_where_the_redis_url_came_from(
    broker: str, conf: dict[str, Any], origin: str
) -> None:
    assert Settings.from_app(app_with(broker, **conf)).url_origin == origin


def test_every_default_is_a_periodiq_setting() -> None:
    assert all(name.startswith("periodiq_") for name in DEFAULTS)


@pytest.mark.parametrize(
    ("setting", "value", "allowed"),
    [
        (
            "periodiq_redis_url",
            "http://cache:6379",
            "a redis://, rediss:// or unix:// URL, or sentinel://host:port;sentinel://...",
        ),
        ("periodiq_key_prefix", "", "a non-empty name without braces or spaces"),
        ("periodiq_key_prefix", "a{b}", "a non-empty name without braces or spaces"),
        ("periodiq_key_prefix", "my app", "a non-empty name without braces or spaces"),
        ("periodiq_key_prefix", "a\nb", "a non-empty name without braces or spaces"),
        ("periodiq_claim_lease", 0.1, "0.5 to 3600 seconds"),
        ("periodiq_claim_lease", 3601, "0.5 to 3600 seconds"),
        ("periodiq_claim_lease", NAN, "0.5 to 3600 seconds"),
        ("periodiq_batch_size", 0, "1 to 10000"),
        ("periodiq_batch_size", 10_001, "1 to 10000"),
        ("periodiq_history_length", 0, "1 to 100000"),
        ("periodiq_history_length", 100_001, "1 to 100000"),
        ("periodiq_catchup_cap", 0, "1 to 100000"),
        ("periodiq_catchup_cap", 100_001, "1 to 100000"),
        ("periodiq_default_catchup", "sometimes", "last, skip, all"),
        ("periodiq_default_overlap", "never", "skip, allow, buffer_one"),
        ("periodiq_default_grace", -1, "0 to 86400 seconds"),
        ("periodiq_default_grace", 86_401, "0 to 86400 seconds"),
        ("periodiq_default_grace", NAN, "0 to 86400 seconds"),
        ("periodiq_partitions", 0, "1 to 1024"),
        ("periodiq_partitions", 1025, "1 to 1024"),
        ("periodiq_audit_length", -1, "0 to 1000 records"),
        ("periodiq_audit_length", 1001, "0 to 1000 records"),
        ("periodiq_audit_length", "20", "a whole number"),
        ("periodiq_audit_window", 60, "3600 seconds to 10 years"),
        ("periodiq_audit_window", NAN, "3600 seconds to 10 years"),
    ],
)
def test_an_invalid_setting_raises_a_configuration_error_naming_it(
    setting: str, value: object, allowed: str
) -> None:
    app = app_with("redis://127.0.0.1:6390/0", **{setting: value})

    with pytest.raises(ConfigurationError) as caught:
        Settings.from_app(app)

    assert f"setting {setting}=" in str(caught.value)
    assert f"(allowed: {allowed})" in str(caught.value)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("periodiq_claim_lease", "soon"),
        ("periodiq_partitions", "16"),
        ("periodiq_partitions", True),
        ("periodiq_redis_cluster", "yes"),
        ("periodiq_batch_size", "many"),
        ("periodiq_batch_size", 2.5),
        ("periodiq_redis_options", "ssl"),
        ("periodiq_key_prefix", 5),
        ("periodiq_redis_url", 5),
    ],
)
def test_a_setting_of_the_wrong_type_raises_a_configuration_error_naming_it(
    setting: str, value: object
) -> None:
    app = app_with("redis://127.0.0.1:6390/0", **{setting: value})

    with pytest.raises(ConfigurationError, match=f"setting {setting}="):
        Settings.from_app(app)


@pytest.mark.parametrize(
    "entry",
    [
        build_entry("bare", TASK, cron="@daily"),
        full_entry(),
        build_entry("ints", TASK, every=60, tolerance=5, timebox=30, grace=2, expires=45),
        build_entry("off", TASK, every=60, enabled=False, jitter=0, owner="t-1", tz="UTC"),
        build_entry("nested", TASK, every=60, kwargs={"b": {"z": 1, "a": [2, {"y": None}]}}),
        build_entry("args", TASK, every=60, args=(1, "x", [3]), options={"queue": "q"}),
    ],
    ids=lambda entry: entry.name,
)
def test_stored_json_is_to_dict_sorted_without_the_fields_that_hold_nothing(entry: Entry) -> None:
    nothing = {"args": [], "kwargs": {}, "options": {}, "owner": None, "group": None,
               "start_at": None,
               "end_at": None, "grace": None, "catchup_window": None, "jitter": 0.0,
               "enabled": True, "tz": "UTC", "form": "cron", "source": "runtime",
               "alert_after": "auto", "failure_threshold": 3,
               "pause_on_failure": False, "max_runs": None, "exclude": []}  # fmt: skip
    expected = {key: value for key, value in entry.to_dict().items()
                if key not in nothing or nothing[key] != value}  # fmt: skip

    assert entry.to_json() == json.dumps(expected, sort_keys=True, separators=(",", ":"))
