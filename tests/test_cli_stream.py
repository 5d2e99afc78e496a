"""``list --all`` and ``export`` write as they read, and ``import`` reads what ``export``
wrote in either format. Real Redis; the streaming tests run the real ``celery``
executable.

Streaming is shown by behaviour, not by time: the command's stdout is a pipe of 4 KiB
that the test does not read, so a command that prints as it reads cannot get further
than the page whose rows (a page is about 190 entries, far more than 4 KiB of text) it
is printing when the pipe fills. Once 2 KiB (more than any header) are in the pipe the
test deletes every entry, then reads the rest: a command that prints as it reads shows
only the few pages it had read; one that read everything before printing shows all.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import subprocess
import termios
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodiq
from celery_periodiq.errors import EntryError
from celery_periodiq.present.shapes import dumps
from celery_periodiq.store.checkpoint import Checkpoint
from tests.processes import APPS, CELERY, ROOT, api_for, wait_for
from tests.test_cli import cli

TASK = "proj.tasks.poll"
TENANTS = 3000


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("streaming", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    client = periodiq(app)
    yield client
    client.store.client.close()


def tenants(count: int) -> list[dict[str, object]]:
    return [
        {"name": f"tenant-{n:04d}", "task": TASK, "every": 60 + n % 7, "owner": f"o{n % 3}"}
        for n in range(count)
    ]


# streaming, through the real executable


@pytest.fixture
def shared(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    """The API of ``tests/apps/periodiq_app.py``'s schedule, with TENANTS entries."""
    api = api_for(redis_url, broker_url)
    api.add_many(tenants(TENANTS))
    yield api
    api.store.client.close()


def blocked_then_emptied(api: Periodiq, *args: str) -> str:
    """What ``celery periodiq ARGS`` prints when every entry is deleted once it has
    printed 2 KiB into a 4 KiB pipe nobody reads yet."""
    env = {
        **os.environ,
        "TEST_REDIS_URL": api.settings.redis_url,
        "TEST_BROKER_URL": str(api.app.conf.broker_url),
        "PYTHONPATH": os.pathsep.join([str(APPS), str(ROOT)]),
        "COLUMNS": "80",
        "NO_COLOR": "1",
    }
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    process = subprocess.Popen(
        [CELERY, "-A", "periodiq_app", "periodiq", *args],
        env=env, cwd=APPS, stdout=write, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(write)
    try:

        def printing() -> bool:
            buffered = bytearray(4)
            fcntl.ioctl(read, termios.FIONREAD, buffered)
            return int.from_bytes(buffered, "little") >= 2048 or process.poll() is not None

        wait_for(printing, 60, "the command to print its first entries")
        assert process.poll() is None, "the command ended before the test read its output"
        for owner in ("o0", "o1", "o2"):
            api.delete_owner(owner)
        with os.fdopen(read, "rb") as output:
            printed = output.read().decode()
        _, errors = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, errors
    return printed


@pytest.mark.slow
def test_list_all_prints_each_page_before_it_reads_the_next(shared: Periodiq) -> None:
    printed = blocked_then_emptied(shared, "list", "--all")

    rows = [line.split()[0] for line in printed.splitlines() if line.startswith("tenant-")]
    assert 0 < len(rows) < TENANTS
    assert len(set(rows)) == len(rows)
    assert f"\n{len(rows)} entries: {len(rows)} active\n" in printed  # then: no beat runs


@pytest.mark.slow
def test_list_all_json_is_an_array_of_what_was_read_when_printed(shared: Periodiq) -> None:
    printed = blocked_then_emptied(shared, "list", "--all", "--json")

    names = [item["name"] for item in json.loads(printed)]
    assert 0 < len(names) < TENANTS
    assert set(names) <= {f"tenant-{n:04d}" for n in range(TENANTS)}


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_export_prints_each_page_before_it_reads_the_next(shared: Periodiq, layout: str) -> None:
    printed = blocked_then_emptied(shared, "export", "--format", layout)

    document = shared.import_file(io.StringIO(printed), dry_run=True)
    assert 0 < len(document.created) < TENANTS  # every entry is gone: all would be created
    assert set(document.created) <= {f"tenant-{n:04d}" for n in range(TENANTS)}


# export and import


def populate(api: Periodiq, count: int = 1200) -> None:
    api.add_many(tenants(count))
    api.add("report", "proj.report", cron="0 9 * * mon-fri", tz="Europe/Berlin",
            args=[1, "a"], kwargs={"full": True}, owner="finance", timebox=600)  # fmt: skip
    api.pause("tenant-0004", note="migration ✓ <b>")
    Checkpoint(api.store, "tenant-0004").save({"cursor": 42})


def everything(api: Periodiq) -> dict[str, object]:
    return {
        item.name: (item.entry, item.paused, item.note, Checkpoint(api.store, item.name).load())
        for item in api.entries()
    }


def test_an_export_in_json_lines_imports_back_exactly(api: Periodiq) -> None:
    populate(api)
    before = everything(api)
    exported = cli(api.app, "export", "--format", "jsonl")
    for owner in ("o0", "o1", "o2", "finance"):
        api.delete_owner(owner)

    done = cli(api.app, "import", "-", input=exported.stdout)

    lines = exported.stdout.splitlines()
    assert exported.exit_code == 0
    assert len(lines) == 1 + 1201 + 1
    assert json.loads(lines[0])["format"] == "celery-periodiq"
    assert json.loads(lines[-1]) == {"count": 1201}
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("1201 were created: report, tenant-0000, tenant-0001, ")
    assert everything(api) == before


def test_the_json_export_is_laid_out_as_before_and_holds_what_the_api_exports(
    api: Periodiq,
) -> None:
    populate(api, 700)

    printed = cli(api.app, "export").stdout
    whole = api.export()

    document = json.loads(printed)
    assert printed == dumps(document)  # json.dumps(indent=2), as the export always was
    assert sorted(document) == ["entries", "exported_at", "format", "version"]
    by_name = sorted(document["entries"], key=lambda record: record["definition"]["name"])
    assert by_name == whole["entries"]  # the API's document is in name order
    empty = cli(api.app, "export", "--owner", "nobody").stdout
    assert empty == dumps(json.loads(empty))
    assert json.loads(empty)["entries"] == []


def test_export_to_writes_both_layouts_and_counts_what_it_wrote(api: Periodiq) -> None:
    populate(api, 30)
    as_json, as_lines = io.StringIO(), io.StringIO()

    written = api.export_to(as_json, owner="o1", state=False)
    lines = api.export_to(as_lines, layout="jsonl", owner="o1", state=False)

    assert written == lines == 10
    records = json.loads(as_json.getvalue())["entries"]
    assert [json.loads(line) for line in as_lines.getvalue().splitlines()[1:-1]] == records
    assert all(set(record) == {"definition"} for record in records)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"format": "celery-periodiq", "version": 1}\n{"definition": {}}\n',
         "ends after 1 entries without its closing line {\"count\": 1}: was the export "
         "cut short?"),
        ('{"format": "celery-periodiq", "version": 1}\n{not json\n{"count": 1}\n',
         "line 2 is not JSON: Expecting property name"),
        ('{"format": "celery-periodiq", "version": 1}\n{"count": 2}\n',
         "line 2 says 2 entries, but 0 came before it"),
        ('{"format": "celery-periodiq", "version": 1}\n{"count": 0}\n{"count": 0}\n',
         "line 3 comes after the closing line (line 2)"),
        ("", "is not JSON: Expecting value: line 1 column 1"),
    ],
)  # fmt: skip # table: one malformed file per row
def test_a_malformed_json_lines_file_is_refused_and_writes_nothing(
    api: Periodiq, redis_client: redis.Redis, text: str, words: str
) -> None:
    api.add("kept", TASK, every=60)
    before = sorted(redis_client.keys("*"))

    result = cli(api.app, "import", "-", input=text)
    with pytest.raises(EntryError) as caught:
        api.import_file(io.StringIO(text))

    assert result.exit_code == 2
    assert f"Error: <stdin> {words}" in result.stderr
    assert words in str(caught.value)
    assert sorted(redis_client.keys("*")) == before


def test_a_json_lines_file_with_a_bad_entry_names_it_and_writes_nothing(api: Periodiq) -> None:
    populate(api, 10)
    exported = cli(api.app, "export", "--format", "jsonl").stdout
    bad = exported.replace('"schedule": "@every 1m"', '"schedule": "@every sometimes"', 1)
    api.delete_owner("o0")

    result = cli(api.app, "import", "-", "--replace", input=bad)

    assert result.exit_code == 2
    assert "Error: 1 problems, nothing imported: #" in result.stderr
    assert "sometimes" in result.stderr
    assert api.count() == 7


def test_bad_export_options_are_refused_before_anything_is_written(api: Periodiq) -> None:
    api.add("kept", TASK, every=60)
    out = io.StringIO()

    bad_format = cli(api.app, "export", "--format", "xml")
    with pytest.raises(EntryError, match=r"layout='xml' is invalid \(allowed: json, jsonl\)"):
        api.export_to(out, layout="xml")
    with pytest.raises(EntryError, match="owner='' is invalid"):
        api.export_to(out, owner="")
    with pytest.raises(EntryError, match="source='elsewhere' is invalid"):
        api.export_to(out, source="elsewhere")
    with pytest.raises(EntryError, match="owner='' is invalid"):
        next(api.pages(owner=""))

    assert bad_format.exit_code == 2
    assert "Invalid value for '--format': 'xml' is not one of 'json', 'jsonl'" in bad_format.stderr
    assert out.getvalue() == ""


# list --owner --all


def test_list_all_of_an_owner_walks_only_its_entries(api: Periodiq) -> None:
    api.add_many(tenants(1200))

    text = cli(api.app, "list", "--all", "--owner", "o2").stdout
    shapes = json.loads(cli(api.app, "list", "--all", "--owner", "o2", "--json").stdout)

    rows = [line.split()[0] for line in text.splitlines() if line.startswith("tenant-")]
    assert sorted(rows) == [f"tenant-{n:04d}" for n in range(2, 1200, 3)]
    assert text.count("NAME ") == 1
    assert "\n400 entries: 400 active\nNo beat is running: " in text
    assert sorted(item["name"] for item in shapes) == sorted(rows)
    assert api.count(owner="o2") == 400
