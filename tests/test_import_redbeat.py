"""Import from celery-redbeat: what a REAL RedBeat 2.4 wrote (a RedBeat beat's static
entries, and dynamic ones saved with ``RedBeatSchedulerEntry(...).save()``) becomes
runtime entries field by field; a record that cannot be converted is one problem naming
its key and nothing is written; --dry-run writes nothing; options periodiq does not keep
are reported.

A RedBeat beat runs once per module (``tests/apps/redbeat_app.py``), the dynamic entries
are saved while it runs, and its Redis is captured (DUMP) while it holds its lock; each
test restores that capture into its private Redis (db 0) and imports into db 1.
"""

from __future__ import annotations

import ast
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from celery import Celery
from celery.schedules import crontab, schedule, solar
from croniter import croniter
from redbeat.schedulers import RedBeatSchedulerEntry
from redbeat.schedules import rrule

import celery_periodiq.ops.import_redbeat
from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import ConfigurationError, EntryError, StoreUnavailableError
from celery_periodiq.localredis import LocalRedis
from celery_periodiq.ops.import_redbeat import read_redbeat
from tests.processes import APPS, ROOT, wait_for
from tests.processes import Celery as CeleryProcess
from tests.test_cli import cli

BERLIN = ZoneInfo("Europe/Berlin")
STATIC = ["nightly-report", "poll-inbox"]
DYNAMIC = ["heartbeat", "paused-sync", "weekday-digest"]
Capture = dict[bytes, tuple[bytes, int]]


def redbeat_app(url: str) -> Celery:
    """An in-process app as a RedBeat user has it, to save entries the way they do."""
    app = Celery("redbeat_app", broker=url, set_as_current=False)
    app.conf.redbeat_redis_url = url
    app.conf.timezone = "Europe/Berlin"
    return app


def save(app: Celery, name: str, task: str, every: Any, **options: Any) -> None:
    RedBeatSchedulerEntry(name, task, every, app=app, **options).save()


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Capture]:
    """RedBeat's Redis after a RedBeat beat started and three dynamic entries were saved."""
    tmp = tmp_path_factory.mktemp("redbeat")
    with LocalRedis(tmp / "redis") as server:
        url = server.url
        env = {
            **os.environ, "PYTHONPATH": os.pathsep.join([str(APPS), str(ROOT)]),
            "TEST_BROKER_URL": url.removesuffix("/0") + "/1", "TEST_REDBEAT_URL": url,
        }  # fmt: skip
        beat = CeleryProcess(
            ["-A", "redbeat_app", "beat", "-S", "redbeat.RedBeatScheduler", "--loglevel=INFO",
             "-s", str(tmp / "beat-schedule")], env, tmp / "beat.log",
        ).start()  # fmt: skip
        client = redis.Redis.from_url(url)
        app = redbeat_app(url)
        try:
            wait_for(lambda: client.exists("redbeat::statics", "redbeat::lock") == 2, 30,
                     "RedBeat's beat to write its entries and take its lock")  # fmt: skip
            save(app, "weekday-digest", "proj.digest",
                 crontab(minute="0,30", hour="9-17", day_of_week="mon-fri", month_of_year="*/3"),
                 args=[1, "a"], kwargs={"to": "ops"},
                 options={"queue": "mail", "priority": 7, "expires": 120,
                          "headers": {"x": 1}, "countdown": 5})  # fmt: skip
            save(app, "heartbeat", "proj.ping", schedule(timedelta(minutes=5)))
            save(app, "paused-sync", "proj.sync", crontab(minute=15), enabled=False)
            assert beat.running, beat.output()
            yield {key: (client.dump(key), client.pttl(key)) for key in client.scan_iter()}  # type: ignore[misc]
        finally:
            beat.stop()
            app.redbeat_redis.close()  # type: ignore[attr-defined]
            client.close()
            app.close()


@pytest.fixture
def source(redis_url: str, capture: Capture) -> Iterator[redis.Redis]:
    """RedBeat's Redis (db 0 of this test's server), as the module's RedBeat left it."""
    client = redis.Redis.from_url(redis_url)
    for key, (dump, ttl) in capture.items():
        client.restore(key, max(ttl, 0), dump)
    yield client
    client.close()


@pytest.fixture
def app(redis_url: str, broker_url: str, source: redis.Redis) -> Iterator[Celery]:
    """The app moving to periodiq: its schedule in db 1, RedBeat's setting still set."""
    app = Celery("moving", broker=broker_url, set_as_current=False)
    app.conf.timezone = "Europe/Berlin"
    app.conf.redbeat_redis_url = redis_url
    app.conf.periodiq_redis_url = redis_url.removesuffix("/0") + "/1"
    yield app
    periodiq(app).store.client.close()
    app.close()


def snapshot(redis_url: str) -> dict[tuple[int, bytes], Any]:
    """Every key of db 0 and db 1, with its type and value."""
    seen = {}
    for db in (0, 1):
        client = redis.Redis.from_url(redis_url.removesuffix("/0") + f"/{db}")
        seen.update({(db, key): (client.type(key), client.dump(key)) for key in client.scan_iter()})
        client.close()
    return seen


def next_cron(spec: str, *instants: datetime) -> set[datetime]:
    """croniter's next fire after each instant (in Berlin): the import ran between them."""
    return {croniter(spec, at.astimezone(BERLIN)).get_next(datetime) for at in instants}


def test_static_and_dynamic_entries_become_runtime_entries_field_by_field(
    api: Periodiq, source: redis.Redis
) -> None:
    before = api.now()

    report = api.import_redbeat()

    after = api.now()
    assert sorted(report.created) == sorted(STATIC + DYNAMIC)
    assert report.skipped == []
    assert not report.dry_run
    got = {item.name: item for item in api.list()}
    assert all(item.entry is not None and item.entry.source == "runtime" for item in got.values())
    nightly = got["nightly-report"].entry
    assert nightly is not None
    assert (nightly.task, nightly.schedule, nightly.form, nightly.tz) == (
        "proj.report", "30 2 * * mon-fri", "cron", "Europe/Berlin",
    )  # fmt: skip
    assert (nightly.args, nightly.kwargs, nightly.options, nightly.enabled) == (
        [], {"full": True}, {}, True,
    )  # fmt: skip
    assert got["nightly-report"].next_run in next_cron("30 2 * * mon-fri", before, after)
    poll = got["poll-inbox"].entry
    assert poll is not None
    assert (poll.task, poll.schedule, poll.form, poll.args, poll.options) == (
        "proj.poll", "@every 45s", "every", ["inbox"], {"queue": "io"},
    )  # fmt: skip
    due = got["poll-inbox"].next_run
    assert due is not None
    assert before < due <= after + timedelta(seconds=45)
    digest = got["weekday-digest"].entry
    assert digest is not None
    assert (digest.schedule, digest.tz, digest.args, digest.kwargs) == (
        "0,30 9-17 * */3 mon-fri", "Europe/Berlin", [1, "a"], {"to": "ops"},
    )  # fmt: skip
    assert digest.options == {"queue": "mail", "priority": 7}
    assert digest.expires == 120.0
    assert got["weekday-digest"].next_run in next_cron("0,30 9-17 * */3 mon-fri", before, after)
    heartbeat = got["heartbeat"].entry
    assert heartbeat is not None
    assert (heartbeat.schedule, heartbeat.expires) == ("@every 5m", "auto")
    paused_sync = got["paused-sync"].entry
    assert paused_sync is not None
    assert (paused_sync.schedule, paused_sync.enabled) == ("15 * * * *", False)


def test_last_run_is_carried_as_redbeat_itself_reads_it(api: Periodiq, app: Celery) -> None:
    read = read_redbeat(app)

    last_runs = {record["definition"]["name"]: record["state"]["last_run"]
                 for record in read.document["entries"]}  # fmt: skip
    reader = redbeat_app(app.conf.redbeat_redis_url)
    for name, last_run in last_runs.items():
        stored = RedBeatSchedulerEntry.from_key(f"redbeat:{name}", app=reader).last_run_at
        assert last_run == stored.isoformat(), name
    reader.redbeat_redis.close()  # type: ignore[attr-defined]
    reader.close()
    assert set(last_runs) == set(STATIC + DYNAMIC)


def test_dropped_options_and_static_entries_are_noted(api: Periodiq) -> None:
    report = api.import_redbeat()

    dropped = [note for note in report.notes if "options" in note]
    assert dropped == [
        "'redbeat:weekday-digest': options ['countdown', 'headers'] are not carried over "
        "(periodiq keeps queue, routing_key, exchange, priority, serializer, compression, "
        "expires; expires as seconds)"
    ]
    static = sorted(note.split("':")[0].removeprefix("'redbeat:")
                    for note in report.notes if "static entry" in note)  # fmt: skip
    assert static == STATIC


def test_an_entry_the_app_declares_is_left_out_for_its_beat_to_write(
    app: Celery, api: Periodiq
) -> None:
    app.conf.beat_schedule = {
        "nightly-report": {"task": "proj.report", "schedule": crontab(minute=30, hour=2)}
    }

    report = api.import_redbeat()

    assert "nightly-report" not in report.created
    assert api.count() == len(STATIC + DYNAMIC) - 1
    assert (
        "'redbeat:nightly-report': left out, declared in beat_schedule: it moves over when "
        "a periodiq beat starts"
    ) in report.notes


def break_records(source: redis.Redis) -> list[str]:
    """Four records that cannot be converted, each in RedBeat's schedule as RedBeat's beat
    would find them; returns their keys."""
    source.hset("redbeat:garbled", mapping={"definition": "{not json", "meta": "{}"})
    source.hset("redbeat:no-definition", "meta", '{"last_run_at": null}')
    source.set("redbeat:wrong-type", "a string")
    reader = redbeat_app(_url(source))
    save(reader, "rrule-entry", "proj.t", rrule("MINUTELY", interval=5))
    reader.redbeat_redis.close()  # type: ignore[attr-defined]
    reader.close()
    keys = ["redbeat:garbled", "redbeat:no-definition", "redbeat:wrong-type"]
    source.zadd("redbeat::schedule", dict.fromkeys(keys, 1.0))
    return sorted([*keys, "redbeat:rrule-entry"])


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"


def test_each_record_that_cannot_be_converted_is_one_problem_and_nothing_is_written(
    api: Periodiq, source: redis.Redis, redis_url: str
) -> None:
    broken = break_records(source)
    before = snapshot(redis_url)

    with pytest.raises(EntryError) as raised:
        api.import_redbeat()

    message = str(raised.value)
    assert message.startswith("4 records cannot be imported, nothing imported: ")
    where = [message.index(f"{key!r}: ") for key in broken]
    assert where == sorted(where)
    assert message.count("'redbeat:") == 4
    assert "'redbeat:garbled': definition is not JSON" in message
    assert "'redbeat:no-definition': the hash has no 'definition' field" in message
    assert "'redbeat:rrule-entry': rrule schedules are not supported" in message
    assert "'redbeat:wrong-type': is a Redis string, not a hash" in message
    assert snapshot(redis_url) == before


def test_skip_invalid_imports_the_rest_and_lists_what_it_skipped(
    api: Periodiq, source: redis.Redis
) -> None:
    broken = break_records(source)

    report = api.import_redbeat(skip_invalid=True)

    assert sorted(report.created) == sorted(STATIC + DYNAMIC)
    assert [why.split("':")[0].strip("'") for why in report.skipped] == broken


def test_a_crontab_on_both_day_fields_is_refused_since_cron_would_widen_it(
    app: Celery, source: redis.Redis
) -> None:
    reader = redbeat_app(_url(source))
    save(reader, "first-monday", "proj.t", crontab(minute=0, hour=8, day_of_month="1-7",
                                                   day_of_week="mon"))  # fmt: skip
    reader.redbeat_redis.close()  # type: ignore[attr-defined]
    reader.close()

    read = read_redbeat(app)

    assert len(read.problems) == 1
    assert read.problems[0].startswith(
        "'redbeat:first-monday': crontab(minute=0, hour=8, day_of_week='mon', "
        "day_of_month='1-7', month_of_year='*') restricts both day_of_month and day_of_week"
    )


def test_a_relative_interval_and_a_key_gone_from_the_schedule_are_noted_not_refused(
    app: Celery, source: redis.Redis
) -> None:
    reader = redbeat_app(_url(source))
    save(reader, "rounded", "proj.t", schedule(timedelta(minutes=1), relative=True))
    reader.redbeat_redis.close()  # type: ignore[attr-defined]
    reader.close()
    source.zadd("redbeat::schedule", {"redbeat:deleted": 1.0})

    read = read_redbeat(app)

    assert read.problems == []
    assert "rounded" in [record["definition"]["name"] for record in read.document["entries"]]
    assert (
        "'redbeat:rounded': interval relative=True (first run rounded to the interval) is "
        "not kept: periodiq anchors intervals to the entry's creation" in read.notes
    )
    assert (
        "'redbeat:deleted': in RedBeat's schedule but the key is gone (RedBeat drops it)"
        in read.notes
    )


def test_redbeat_cannot_store_a_solar_schedule_so_there_is_none_to_read(
    source: redis.Redis,
) -> None:
    reader = redbeat_app(_url(source))
    try:
        with pytest.raises(TypeError, match="Object of type solar is not JSON serializable"):
            save(reader, "dawn", "proj.t", solar("sunrise", 52.5, 13.4))
    finally:
        reader.redbeat_redis.close()  # type: ignore[attr-defined]
        reader.close()
    assert not source.exists("redbeat:dawn")


def test_dry_run_writes_nothing_and_says_what_would_be_created(
    api: Periodiq, redis_url: str
) -> None:
    before = snapshot(redis_url)

    report = api.import_redbeat(dry_run=True)

    assert report.dry_run
    assert sorted(report.created) == sorted(STATIC + DYNAMIC)
    assert snapshot(redis_url) == before


def test_a_second_import_finds_everything_unchanged(api: Periodiq) -> None:
    api.import_redbeat()

    again = api.import_redbeat()

    assert again.created == []
    assert sorted(again.unchanged) == sorted(STATIC + DYNAMIC)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_or_invalid_redbeat_url_is_a_clear_error_and_writes_nothing(
    api: Periodiq, redis_url: str
) -> None:
    before = snapshot(redis_url)
    gone = f"redis://:secret@127.0.0.1:{free_port()}/0"

    with pytest.raises(
        StoreUnavailableError, match=r"RedBeat's Redis at redis://\*\*\*@127.* is unreachable"
    ):
        api.import_redbeat(url=gone)
    with pytest.raises(ConfigurationError, match="RedBeat's Redis URL amqp://h is invalid"):
        api.import_redbeat(url="amqp://h")

    assert snapshot(redis_url) == before


def test_the_cli_imports_from_redbeat_after_a_dry_run(app: Celery, redis_url: str) -> None:
    before = snapshot(redis_url)
    names = ", ".join(sorted(STATIC + DYNAMIC))

    dry = cli(app, "import", "--from-redbeat", "--redbeat-url", redis_url, "--dry-run")
    unchanged = snapshot(redis_url)
    done = cli(app, "import", "--from-redbeat")

    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines()[0] == f"5 would be created: {names}"
    assert unchanged == before
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == f"5 were created: {names}"
    assert all(line.startswith("note: 'redbeat:") for line in lines[1:])
    assert len(lines) == 4
    assert periodiq(app).count() == 5


def test_the_cli_skips_invalid_records_only_when_told(app: Celery, source: redis.Redis) -> None:
    break_records(source)

    refused = cli(app, "import", "--from-redbeat")
    skipped = cli(app, "import", "--from-redbeat", "--skip-invalid")

    assert refused.exit_code == 2
    assert "4 records cannot be imported, nothing imported" in refused.stderr
    assert skipped.exit_code == 0, skipped.output
    assert "4 were skipped:\n  'redbeat:garbled': definition is not JSON" in skipped.stdout


def test_the_importer_does_not_import_redbeat() -> None:
    tree = ast.parse(Path(celery_periodiq.ops.import_redbeat.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]  # fmt: skip
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imported
    assert not [name for name in imported if name.split(".")[0] == "redbeat"]
