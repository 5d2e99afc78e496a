"""Export and import: a round trip is exact; a bad document changes nothing and names
every bad record by position; --dry-run writes nothing; --replace replaces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import EntryError
from celery_periodiq.store.checkpoint import Checkpoint
from tests.test_cli import cli


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("moving", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    api = periodiq(app)
    yield api
    api.store.client.close()


def populate(api: Periodiq) -> None:
    api.add("report", "proj.report", cron="0 9 * * mon-fri", tz="Europe/Berlin",
            args=[1, "a"], kwargs={"full": True}, owner="finance", timebox=600,
            start_at=datetime(2026, 1, 1, tzinfo=UTC), failure_threshold=5)  # fmt: skip
    api.add("poll", "proj.poll", every=30, owner="mail", options={"queue": "io"})
    api.pause("poll", note="migration <b>")
    Checkpoint(api.store, "poll").save({"cursor": 42})


def snapshot(client: redis.Redis) -> dict[str, object]:
    return {key: client.type(key) for key in client.keys("*")}


def test_a_round_trip_is_exact(api: Periodiq, redis_client: redis.Redis) -> None:
    populate(api)
    document = json.loads(json.dumps(api.export()))
    before = {item.name: item.entry for item in api.list()}
    api.delete_owner("finance")
    api.delete_owner("mail")

    report = api.import_schedule(document)

    assert sorted(report.created) == ["poll", "report"]
    assert {item.name: item.entry for item in api.list()} == before
    assert api.get("poll").paused
    assert api.get("poll").note == "migration <b>"
    assert Checkpoint(api.store, "poll").load() == {"cursor": 42}
    assert api.import_schedule(document).unchanged == ["poll", "report"]


def test_a_timed_pause_keeps_its_end_and_one_that_ended_meanwhile_is_not_imported(
    api: Periodiq,
) -> None:
    api.add("soon", "proj.t", every=60)
    api.add("later", "proj.t", every=60)
    api.pause("soon", note="deploy", until="2h")
    api.pause("later", note="freeze", until="3h")
    end = api.get("soon").paused_until
    document = json.loads(json.dumps(api.export()))
    by_name = {record["definition"]["name"]: record for record in document["entries"]}
    assert end is not None
    assert by_name["soon"]["state"]["until"] == end.isoformat()
    by_name["later"]["state"]["until"] = "2020-01-01T00:00:00+00:00"  # its end has passed
    api.delete("soon")
    api.delete("later")

    api.import_schedule(document)

    assert api.get("soon").paused_until == end
    assert api.get("soon").note == "deploy"
    assert not api.get("later").paused


@pytest.mark.parametrize("until", ["tomorrow", "2026-12-01T00:00:00", 42])
def test_a_bad_pause_end_in_a_document_is_refused_and_nothing_written(
    api: Periodiq, redis_client: redis.Redis, until: object
) -> None:
    populate(api)
    document = json.loads(json.dumps(api.export()))
    document["entries"][0]["state"]["until"] = until
    before = snapshot(redis_client)

    with pytest.raises(EntryError) as caught:
        api.import_schedule(document, replace=True)

    assert "#0: entry 'poll': until=" in str(caught.value)
    assert snapshot(redis_client) == before


def test_export_filters_by_owner_and_source_and_can_leave_state_out(api: Periodiq) -> None:
    populate(api)

    mail = api.export(owner="mail", state=False)
    code = api.export(source="code")

    assert [record["definition"]["name"] for record in mail["entries"]] == ["poll"]
    assert "state" not in mail["entries"][0]
    assert code["entries"] == []
    assert (mail["format"], mail["version"]) == ("celery-periodiq", 1)


def test_a_bad_document_names_every_bad_record_and_writes_nothing(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    populate(api)
    document = api.export()
    document["entries"][0]["definition"]["every"] = "sometimes"
    document["entries"].append({"definition": {"name": "x", "task": "t", "schedule": "61 * * * *"}})
    document["entries"].append({"definition": {"name": "y"}, "extra": 1})
    before = snapshot(redis_client)

    with pytest.raises(EntryError) as caught:
        api.import_schedule(document, replace=True)

    text = str(caught.value)
    assert text.startswith("3 problems, nothing imported:")
    assert "#0:" in text
    assert "#2:" in text
    assert "#3:" in text
    assert snapshot(redis_client) == before


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ([], "is not a JSON object"),
        ({"format": "redbeat", "version": 1, "entries": []}, "format 'redbeat'"),
        ({"format": "celery-periodiq", "version": 2, "entries": []}, "version 2"),
        ({"format": "celery-periodiq", "version": 1, "entries": {}}, "entries={} is invalid"),
    ],
)
def test_a_document_of_another_kind_is_refused(api: Periodiq, document: object, words: str) -> None:
    with pytest.raises(EntryError) as caught:
        api.import_schedule(document)

    assert words in str(caught.value)
    assert api.count() == 0


def test_an_existing_entry_needs_replace_and_dry_run_writes_nothing(
    api: Periodiq, redis_client: redis.Redis
) -> None:
    populate(api)
    document = api.export()
    api.update("report", cron="0 10 * * *")
    before = snapshot(redis_client)

    with pytest.raises(EntryError, match="exists with another definition"):
        api.import_schedule(document)
    dry = api.import_schedule(document, replace=True, dry_run=True)
    unchanged = snapshot(redis_client) == before
    done = api.import_schedule(document, replace=True)

    assert (dry.replaced, dry.unchanged, dry.dry_run) == (["report"], ["poll"], True)
    assert unchanged
    assert done.replaced == ["report"]
    entry = api.get("report").entry
    assert entry is not None
    assert entry.schedule == "0 9 * * mon-fri"


def test_the_cli_exports_and_imports(api: Periodiq, tmp_path: object) -> None:
    populate(api)
    exported = cli(api.app, "export")
    api.delete_owner("finance")
    api.delete_owner("mail")

    dry = cli(api.app, "import", "-", "--dry-run", input=exported.stdout)
    done = cli(api.app, "import", "-", input=exported.stdout)
    bad = cli(api.app, "import", "-", input="{not json")

    assert exported.exit_code == 0
    assert dry.stdout == "2 would be created: poll, report\n"
    assert done.stdout == "2 were created: poll, report\n"
    assert api.count() == 2
    assert bad.exit_code == 2
    assert "is not JSON" in bad.output
