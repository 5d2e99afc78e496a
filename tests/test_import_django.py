"""Import from django-celery-beat: a real ``dumpdata django_celery_beat`` dump (made by
tests/django_dump/make_dump.py in a subprocess, each session) converts every kind of
schedule to the exact entry; converted crontabs fire when Celery's crontab does; every
bad record is one problem and nothing is written; skip_invalid imports the rest;
dry_run writes nothing."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from celery import Celery
from celery.schedules import crontab

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import EntryError
from celery_periodiq.model.entry import Entry
from celery_periodiq.ops.import_django import django_document

MAKE_DUMP = Path(__file__).parent / "django_dump" / "make_dump.py"
NAIVE_ZONE = "America/New_York"  # the TIME_ZONE of make_dump.py --naive


def make_dump(directory: Path, *flags: str) -> list[dict[str, Any]]:
    out = directory / "dump.json"
    # A subprocess: Django's settings are process-wide and would leak into other tests.
    subprocess.run([sys.executable, str(MAKE_DUMP), str(out), *flags], check=True, timeout=60)
    records: list[dict[str, Any]] = json.loads(out.read_text())
    return records


@pytest.fixture(scope="session")
def dump(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return make_dump(tmp_path_factory.mktemp("aware"))


@pytest.fixture(scope="session")
def naive_dump(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return make_dump(tmp_path_factory.mktemp("naive"), "--naive")


@pytest.fixture
def api(redis_url: str) -> Iterator[Periodiq]:
    app = Celery("moving", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    api.list()  # anything written on first use is there before a snapshot
    yield api
    api.store.client.close()


def snapshot(client: redis.Redis) -> dict[bytes, bytes | None]:
    return {key: client.dump(key) for key in client.keys("*")}


def task(dump: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(
        r for r in dump if r["model"].endswith(".periodictask") and r["fields"]["name"] == name
    )


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


EXPECTED = {
    "paris-report": Entry(
        name="paris-report", task="proj.report", schedule="30 8 * * mon-fri", tz="Europe/Paris",
        args=[1, "two"], kwargs={"verbose": True}, options={"queue": "reports", "priority": 7},
        expires=600,
    ),
    # both day fields: Celery wants both, so a calendar event (weekday AND date)
    "first-monday": Entry(
        name="first-monday", task="proj.monthly", schedule="Mon *-*-01..07 12:00:00",
        form="calendar", tz="America/New_York",
        options={"exchange": "reports", "routing_key": "monthly"},
        start_at=utc("2030-01-01T00:00:00+00:00"), end_at=utc("2032-01-01T00:00:00+00:00"),
    ),
    # Celery's 22-2 wraps past midnight; cron's would not, so the hours are listed
    "night-watch": Entry(name="night-watch", task="proj.watch", schedule="*/20 0-2,22,23 * * *"),
    "poll": Entry(name="poll", task="proj.poll", schedule="@every 10s", form="every"),
    "sunrise": Entry(
        name="sunrise", task="proj.lights", schedule="@solar sunrise 52.520000 13.405000",
        enabled=False,
    ),
    "celery.backend_cleanup": Entry(
        name="celery.backend_cleanup", task="celery.backend_cleanup", schedule="0 4 * * *",
        expires=43200,
    ),
    # clocked: a one-off entry at its instant
    "launch": Entry(
        name="launch", task="proj.launch", schedule="2031-05-04T10:00:00+00:00", form="at",
        kwargs={"go": 1},
    ),
    # one_off with an interval: one run, anchored at its start_time
    "cleanup-once": Entry(
        name="cleanup-once", task="proj.cleanup", schedule="@every 2d", form="every",
        start_at=utc("2030-06-01T06:00:00+00:00"), max_runs=1,
    ),
}  # fmt: skip


def test_every_kind_of_schedule_converts_to_the_exact_entry(
    api: Periodiq, dump: list[dict[str, Any]]
) -> None:
    report = api.import_django_celery_beat(dump)
    assert sorted(report.created) == sorted(EXPECTED)
    for name, expected in EXPECTED.items():
        assert api.get(name).entry == expected, name
    assert report.skipped == []


def test_the_last_run_is_carried_as_state_and_naive_datetimes_are_read_in_naive_tz(
    dump: list[dict[str, Any]], naive_dump: list[dict[str, Any]]
) -> None:
    app = Celery("moving", set_as_current=False)
    aware, _, _ = django_document(dump, app)
    naive, _, _ = django_document(naive_dump, app, naive_tz=NAIVE_ZONE)
    by_name = {record["definition"]["name"]: record for record in aware["entries"]}
    assert by_name["poll"]["state"]["last_run"] == "2030-03-01T12:00:05.250000+00:00"
    assert naive["entries"] == aware["entries"]
    # read in the app's zone (UTC here) instead, the same wall times are 5 hours off
    shifted, _, _ = django_document(naive_dump, app)
    start = {r["definition"]["name"]: r["definition"]["start_at"] for r in shifted["entries"]}
    assert start["first-monday"] == "2029-12-31T19:00:00+00:00"


def test_what_is_dropped_or_read_differently_is_noted(
    api: Periodiq, dump: list[dict[str, Any]]
) -> None:
    report = api.import_django_celery_beat(dump, dry_run=True)
    notes = "\n".join(report.notes)
    assert "periodictask 1 ('paris-report'): description 'the morning report' dropped" in notes
    assert "('poll'): headers '{\"x-trace\": \"on\"}' dropped" in notes
    assert "both day_of_month '1-7' and day_of_week '1'" in notes
    assert "('celery.backend_cleanup'): Celery's result cleanup" in notes
    assert len(report.notes) == 4


def test_a_clocked_time_already_past_is_imported_and_noted(dump: list[dict[str, Any]]) -> None:
    app = Celery("moving", set_as_current=False)
    later = datetime(2031, 5, 4, 10, 0, 1, tzinfo=UTC)
    document, _, notes = django_document(dump, app, now=later)
    launch = next(r for r in document["entries"] if r["definition"]["name"] == "launch")
    assert launch["definition"]["schedule"] == "2031-05-04T10:00:00+00:00"
    assert Entry.from_dict(launch["definition"]).parsed_schedule().next_after(later) is None
    assert [note for note in notes if "is past" in note] == [
        "periodictask 7 ('launch'): clockedschedule 1: clocked_time 2031-05-04T10:00:00+00:00 "
        "is past: django-celery-beat would still run it once (unless it ran), the imported "
        "one-off entry will not (trigger it to run it now)"
    ]


def test_a_one_off_task_that_already_ran_is_imported_disabled(
    dump: list[dict[str, Any]],
) -> None:
    ran = copy.deepcopy(dump)
    task(ran, "launch")["fields"]["total_run_count"] = 1
    task(ran, "cleanup-once")["fields"]["total_run_count"] = 3
    document, _, notes = django_document(ran, Celery("moving", set_as_current=False))
    by_name = {record["definition"]["name"]: record["definition"] for record in document["entries"]}
    assert by_name["launch"]["enabled"] is False
    assert by_name["cleanup-once"]["enabled"] is False
    assert by_name["cleanup-once"]["max_runs"] == 1
    assert (
        "periodictask 5 ('cleanup-once'): one_off and already run (total_run_count 3): "
        "imported disabled" in notes
    )
    assert (
        "periodictask 7 ('launch'): one_off and already run (total_run_count 1): imported disabled"
        in notes
    )


DST_FREE = [
    datetime(2030, 1, 4, 9, 0, tzinfo=UTC),
    datetime(2030, 2, 28, 23, 59, tzinfo=UTC),
    datetime(2030, 6, 1, 0, 0, tzinfo=UTC),
    datetime(2030, 7, 7, 12, 0, 1, tzinfo=UTC),
    datetime(2031, 12, 31, 22, 30, tzinfo=UTC),
]


def celery_next(fields: dict[str, str], after: datetime) -> datetime:
    app = Celery(set_as_current=False)
    app.conf.timezone = fields["timezone"]
    schedule = crontab(
        minute=fields["minute"], hour=fields["hour"], day_of_week=fields["day_of_week"],
        day_of_month=fields["day_of_month"], month_of_year=fields["month_of_year"], app=app,
    )  # fmt: skip
    start, delta, _ = schedule.remaining_delta(after.astimezone(ZoneInfo(fields["timezone"])))
    return (start + delta).astimezone(UTC)  # type: ignore[no-any-return]


EXTRA_CRONTABS = [
    {"minute": "15", "hour": "3", "day_of_week": "fri-mon", "day_of_month": "*"},
    {"minute": "0", "hour": "*/6", "day_of_month": "10-20", "day_of_week": "sat,sun"},
    {"minute": "5", "hour": "9", "day_of_month": "28-3", "month_of_year": "2,3"},
    {"minute": "0,30", "hour": "8-18/2", "month_of_year": "jan-mar"},
]


def test_converted_crontabs_fire_when_celerys_crontab_in_the_same_zone_does(
    dump: list[dict[str, Any]],
) -> None:
    crontabs = [r["fields"] for r in dump if r["model"].endswith(".crontabschedule")]
    for extra in EXTRA_CRONTABS:
        crontabs.append({
            "day_of_month": "*", "month_of_year": "*", "day_of_week": "*",
            "timezone": "Asia/Kolkata", **extra,
        })  # fmt: skip
    records: list[dict[str, Any]] = []
    for pk, fields in enumerate(crontabs, start=100):
        records.append({"model": "django_celery_beat.crontabschedule", "pk": pk, "fields": fields})
        records.append({
            "model": "django_celery_beat.periodictask", "pk": pk,
            "fields": {"name": f"c{pk}", "task": "t", "crontab": pk},
        })  # fmt: skip
    document, problems, _ = django_document(records, Celery(set_as_current=False))
    assert problems == []
    for fields, record in zip(crontabs, document["entries"], strict=True):
        schedule = Entry.from_dict(record["definition"]).parsed_schedule()
        for after in DST_FREE:
            ours = schedule.next_after(after)
            assert ours is not None
            where = (fields, record["definition"]["schedule"], after)
            assert ours.astimezone(UTC) == celery_next(fields, after), where


def bad_dump(dump: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    """The real dump with one bad record of each kind, and what each problem says."""
    records = copy.deepcopy(dump)

    def add_task(pk: int, name: str, **fields: Any) -> None:
        base = {"name": name, "task": "proj.t", "args": "[]", "kwargs": "{}", "crontab": 1}
        records.append(
            {"model": "django_celery_beat.periodictask", "pk": pk, "fields": {**base, **fields}}
        )

    records.append("not a record")
    records.append({"model": "django_celery_beat.crontab", "pk": 9, "fields": {}})
    records.append({"model": "auth.user", "pk": 1, "fields": {"username": "x"}})
    add_task(50, "missing-fk", crontab=77)
    add_task(51, "two-schedules", interval=1)
    add_task(52, "no-schedule", crontab=None)
    add_task(53, "args-not-json", args="[1, 2")
    add_task(54, "kwargs-a-list", kwargs="[1]")
    records.append({
        "model": "django_celery_beat.crontabschedule", "pk": 60,
        "fields": {"minute": "61", "hour": "*", "day_of_month": "*", "month_of_year": "*",
                   "day_of_week": "*", "timezone": "UTC"},
    })  # fmt: skip
    add_task(55, "bad-minute", crontab=60)
    records.append({
        "model": "django_celery_beat.crontabschedule", "pk": 61,
        "fields": {"minute": "0", "hour": "0", "day_of_month": "*", "month_of_year": "*",
                   "day_of_week": "7", "timezone": "Mars/Olympus"},
    })  # fmt: skip
    add_task(56, "sunday-seven", crontab=61)
    records.append({"model": "django_celery_beat.intervalschedule", "pk": [1], "fields": {}})
    records.append({
        "model": "django_celery_beat.intervalschedule", "pk": 70,
        "fields": {"every": 3, "period": "weeks"},
    })  # fmt: skip
    add_task(57, "in-weeks", crontab=None, interval=70)
    add_task(58, "last-run-yesterday", last_run_at="yesterday")
    expected = [
        "'not a record' is not a dumpdata record",
        "model 'django_celery_beat.crontab' is not a django-celery-beat model",
        "model 'auth.user' is not a django-celery-beat model",
        "(django_celery_beat.intervalschedule): pk=[1] is not a key",
        "periodictask 50 ('missing-fk'): crontabschedule 77 is not in the dump",
        "periodictask 51 ('two-schedules'): has 2 schedules (crontab, interval)",
        "periodictask 52 ('no-schedule'): has 0 schedules (none)",
        "periodictask 53 ('args-not-json'): args='[1, 2' is invalid (allowed: a JSON list",
        "periodictask 54 ('kwargs-a-list'): kwargs='[1]' is invalid (allowed: a JSON object",
        "periodictask 55 ('bad-minute'): crontabschedule 60: minute='61' is not accepted by "
        "Celery's crontab",
        "periodictask 56 ('sunday-seven'): crontabschedule 61: day_of_week='7' is not accepted",
        "periodictask 57 ('in-weeks'): intervalschedule 70: period='weeks' is invalid (allowed: "
        "days, hours, minutes, seconds, microseconds)",
        "periodictask 58 ('last-run-yesterday'): last_run_at='yesterday' is invalid",
    ]
    return records, expected


def test_each_bad_record_is_one_problem_and_nothing_is_written(
    api: Periodiq, redis_client: redis.Redis, dump: list[dict[str, Any]]
) -> None:
    records, expected = bad_dump(dump)
    _, problems, _ = django_document(records, api.app)
    assert len(problems) == len(expected)
    for problem, words in zip(problems, expected, strict=True):
        assert words in problem
    before = snapshot(redis_client)
    with pytest.raises(EntryError) as raised:
        api.import_django_celery_beat(records)
    assert all(words in str(raised.value) for words in expected)
    assert snapshot(redis_client) == before
    assert api.list() == []


@pytest.mark.parametrize("dump", [{"model": "x"}, "[]", None])
def test_a_dump_that_is_not_a_list_is_refused(api: Periodiq, dump: object) -> None:
    with pytest.raises(EntryError, match="is not a JSON list"):
        api.import_django_celery_beat(dump, skip_invalid=True)


def test_a_naive_tz_that_is_not_a_zone_is_refused(
    api: Periodiq, naive_dump: list[dict[str, Any]]
) -> None:
    with pytest.raises(EntryError, match="naive_tz: time zone: 'Nowhere/Else'"):
        api.import_django_celery_beat(naive_dump, naive_tz="Nowhere/Else")


def test_skip_invalid_imports_the_rest_and_names_what_it_skipped(
    api: Periodiq, dump: list[dict[str, Any]]
) -> None:
    records, expected = bad_dump(dump)
    report = api.import_django_celery_beat(records, skip_invalid=True)
    assert sorted(report.created) == sorted(EXPECTED)
    assert sorted(item.name for item in api.list()) == sorted(EXPECTED)
    assert len(report.skipped) == len(expected)
    assert all(words in skipped for skipped, words in zip(report.skipped, expected, strict=True))


def test_dry_run_writes_nothing_and_a_second_import_changes_nothing(
    api: Periodiq, redis_client: redis.Redis, dump: list[dict[str, Any]]
) -> None:
    before = snapshot(redis_client)
    dry = api.import_django_celery_beat(dump, dry_run=True)
    assert dry.dry_run
    assert sorted(dry.created) == sorted(EXPECTED)
    assert snapshot(redis_client) == before
    api.import_django_celery_beat(dump)
    again = api.import_django_celery_beat(dump)
    assert again.created == []
    assert sorted(again.unchanged) == sorted(EXPECTED)


def test_an_entry_changed_since_needs_replace(api: Periodiq, dump: list[dict[str, Any]]) -> None:
    api.import_django_celery_beat(dump)
    changed = copy.deepcopy(dump)
    task(changed, "poll")["fields"]["queue"] = "fast"
    with pytest.raises(EntryError, match="'poll' exists with another definition"):
        api.import_django_celery_beat(changed)
    report = api.import_django_celery_beat(changed, replace=True)
    assert report.replaced == ["poll"]
    entry = api.get("poll").entry
    assert entry is not None
    assert entry.options == {"queue": "fast"}


def test_the_cli_imports_a_dump_file_and_prints_what_it_did(
    api: Periodiq, dump: list[dict[str, Any]], tmp_path: Path
) -> None:
    from tests.test_cli import cli

    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))

    dry = cli(api.app, "import", "--from-django-celery-beat", str(path), "--dry-run")
    done = cli(api.app, "import", "--from-django-celery-beat", str(path))
    again = cli(api.app, "import", "--from-django-celery-beat", str(path))

    assert dry.exit_code == 0, dry.output
    assert f"{len(EXPECTED)} would be created: " in dry.output
    assert "note: " in dry.output
    assert done.exit_code == 0, done.output
    assert f"{len(EXPECTED)} were created: " in done.output
    assert sorted(item.name for item in api.list()) == sorted(EXPECTED)
    assert f"{len(EXPECTED)} were unchanged: " in again.output
