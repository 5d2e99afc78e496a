"""@periodic: misuse fails at decoration time; each form ends up guarded and declared."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery, shared_task

from celery_periodiq import ConfigurationError, EntryError, PeriodicTask, periodic
from celery_periodiq.declare import registry
from tests.processes import APPS, CELERY, cluster


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    saved = list(registry._DECLARED)
    yield
    registry._DECLARED[:] = saved


@pytest.fixture
def app() -> Celery:
    return Celery("decorated", broker="memory://", set_as_current=False)


def task_body() -> None:
    """A task body."""


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({}, ["exactly one of cron=, every=, calendar=", "got none"]),
        ({"cron": "* * * * *", "every": 60}, ["exactly one of", "cron=, every="]),
        ({"every": 60, "calendar": "daily"}, ["exactly one of", "every=, calendar="]),
        ({"every": 60, "tolerance": -1}, ["tolerance=-1", "seconds >= 0"]),
        ({"every": 60, "tolerance": 60}, ["tolerance=60", "less than the interval"]),
        ({"every": 60, "tolerance": "lots"}, ["tolerance='lots'"]),
        ({"every": 60, "timebox": 61}, ["timebox=61", "at most the interval"]),
        ({"every": 60, "timebox": 0}, ["timebox=0", "seconds > 0"]),
        ({"every": 60, "overlap": "queue"}, ["overlap='queue'", "skip, allow, buffer_one"]),
        ({"every": 60, "catchup": "some"}, ["catchup='some'", "last, skip, all"]),
        ({"every": 60, "args": [object()]}, ["args=", "JSON values only"]),
        ({"every": 60, "kwargs": {"when": timedelta(1)}}, ["kwargs=", "JSON values only"]),
        ({"every": 0}, ["every=0", "longer than zero"]),
        ({"cron": "61 * * * *"}, ["minute field", "61"]),
        ({"cron": "H * * * *", "name": ""}, ["entry name"]),
        ({"calendar": "Funday 10:00"}, ["weekday", "funday"]),
        ({"every": 60, "tz": "Mars/Base"}, ["Mars/Base"]),
        ({"every": 60, "priority": 300}, ["options['priority']=300", "0-255"]),
        ({"every": 60, "jitter": -1}, ["jitter=-1"]),
    ],
)
def test_misuse_raises_at_decoration_time_with_a_clear_message(
    options: dict[str, Any], words: list[str]
) -> None:
    declared_before = len(registry._DECLARED)
    with pytest.raises(EntryError) as caught:
        periodic(**options)(task_body)
    for word in words:
        assert word in str(caught.value)
    assert len(registry._DECLARED) == declared_before


def test_an_error_names_the_task_it_decorates(app: Celery) -> None:
    # It named a placeholder, 'periodic-declaration', instead.
    with pytest.raises(EntryError) as plain:
        periodic(cron="0 25 * * *")(task_body)
    with pytest.raises(EntryError) as over_app_task:
        periodic(cron="0 25 * * *")(app.task(name="proj.nightly")(task_body))
    with pytest.raises(EntryError) as over_shared_task:
        periodic(cron="0 25 * * *")(shared_task(name="proj.shared")(task_body))
    with pytest.raises(EntryError) as named:
        periodic(cron="0 25 * * *", task_name="proj.custom")(task_body)

    assert str(plain.value).startswith(f"entry '{__name__}.task_body': cron '0 25 * * *'")
    assert str(over_app_task.value).startswith("entry 'proj.nightly': cron '0 25 * * *'")
    assert str(over_shared_task.value).startswith("entry 'proj.shared': cron '0 25 * * *'")
    assert str(named.value).startswith("entry 'proj.custom': ")
    assert "periodic-declaration" not in str(plain.value)


def test_task_options_over_an_existing_task_are_refused(app: Celery) -> None:
    existing = app.task(name="existing")(task_body)
    with pytest.raises(EntryError, match="takes no task options"):
        periodic(every=60, acks_late=True)(existing)


def test_a_base_that_is_not_a_periodic_task_is_refused() -> None:
    from celery import Task

    with pytest.raises(EntryError, match="must be PeriodicTask"):
        periodic(every=60, base=Task)(task_body)


def test_on_a_plain_function_it_creates_a_guarded_task(app: Celery) -> None:
    task = periodic(every=30, app=app, name="tidy", queue="maintenance")(task_body)
    app.finalize()
    created = app.tasks[f"{__name__}.task_body"]
    assert isinstance(created, PeriodicTask)
    assert created.periodiq_entry == "tidy"
    assert task.name == created.name
    (entry,) = [e for e in registry.declared() if e.name == "tidy"]
    assert (entry.task, entry.schedule, entry.source) == (created.name, "@every 30s", "code")
    assert entry.options == {"queue": "maintenance"}


def test_over_an_app_task_it_keeps_the_task_and_adds_the_guards(app: Celery) -> None:
    existing = periodic(every=60, overlap="allow")(app.task(name="keep-me")(task_body))
    app.finalize()
    guarded = app.tasks["keep-me"]
    assert (
        guarded is existing._get_current_object()
        if hasattr(existing, "_get_current_object")
        else existing
    )
    assert isinstance(guarded, PeriodicTask)
    assert guarded.periodiq_entry == "keep-me"
    assert guarded.periodiq_overlap == "allow"
    assert guarded.run is not None
    (entry,) = [e for e in registry.declared() if e.name == "keep-me"]
    assert entry.overlap == "allow"


def test_over_a_shared_task_every_app_gets_the_guards() -> None:
    first = Celery("first", broker="memory://", set_as_current=False)
    periodic(cron="@daily", name="nightly")(shared_task(name="shared-nightly")(task_body))
    first.finalize()
    second = Celery("second", broker="memory://", set_as_current=False)
    second.finalize()
    assert isinstance(first.tasks["shared-nightly"], PeriodicTask)
    assert isinstance(second.tasks["shared-nightly"], PeriodicTask)
    assert [e.task for e in registry.declared() if e.name == "nightly"] == ["shared-nightly"]


def test_two_declarations_of_one_name_for_different_tasks_are_an_error(app: Celery) -> None:
    periodic(every=60, name="twice")(app.task(name="one")(task_body))
    periodic(every=60, name="twice")(app.task(name="two")(task_body))
    app.finalize()
    with pytest.raises(
        ConfigurationError, match="declared twice with @periodic, by tasks 'one' and 'two'"
    ):
        registry.declared()


def test_app_defaults_fill_policies_left_unset(app: Celery) -> None:
    from celery_periodiq.config import Settings

    app.conf.periodiq_default_overlap = "allow"
    app.conf.periodiq_default_catchup = "all"
    periodic(every=60, name="defaults")(app.task(name="d")(task_body))
    periodic(every=60, name="explicit", overlap="skip")(app.task(name="e")(task_body))
    app.finalize()
    entries = {e.name: e for e in registry.declared(Settings.from_app(app))}
    assert (entries["defaults"].overlap, entries["defaults"].catchup) == ("allow", "all")
    assert entries["explicit"].overlap == "skip"


@pytest.mark.slow
def test_a_beat_with_a_duplicate_declaration_stops_with_one_line_and_writes_nothing(
    tmp_path: Path, redis_url: str, broker_url: str, redis_client: redis.Redis
) -> None:
    # It used to die inside reconciliation with about 850 lines of tracebacks.
    with cluster(tmp_path, redis_url, broker_url, app="duplicate_app") as running:
        beat = running.beat()
        assert beat.process is not None
        beat.process.wait(timeout=60)

    output = beat.output()
    assert beat.process.returncode != 0
    assert "Traceback" not in output
    assert len(output.splitlines()) < 30, output
    (line,) = [line for line in output.splitlines() if "declared twice" in line]
    assert line.endswith(
        "periodiq: entry 'nightly-report' is declared twice with @periodic, by tasks "
        "'duplicate_app.build_report' and 'duplicate_app.send_report' (allowed: one "
        "declaration per entry name; give one of them name=); the beat cannot start"
    )
    assert redis_client.keys("*") == []


HOUR_25 = "entry 'nightly-report': cron '0 25 * * *': hour field: 25 is out of range"
MISTAKES = {  # TEST_MISTAKE: (the module declaring it, the error)
    "cron": ("mistaken_app", f"{HOUR_25} (allowed: 0-23)"),
    "every": ("mistaken_app", "entry 'nightly-report': every=0: the interval must be longer "
              "than zero"),
    "included": ("mistaken_tasks", f"{HOUR_25} (allowed: 0-23)"),
}  # fmt: skip


def declared_at(module: str) -> str:
    """``mistaken_app.py:25``: where the module's @periodic is."""
    lines = (APPS / f"{module}.py").read_text().splitlines()
    number = next(n for n, line in enumerate(lines, 1) if line.strip().startswith("@periodic("))
    return f"{module}.py:{number}"


COMMANDS = {"beat": ["beat"], "worker": ["worker", "-P", "solo"], "cli": ["periodiq", "list"]}
CASES = [  # the CLI imports the app module, not the modules of its include (it reads Redis)
    (command, mistake)
    for command in COMMANDS
    for mistake in MISTAKES
    if (command, mistake) != ("cli", "included")
]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "mistake"), CASES)
def test_a_mistaken_periodic_is_the_first_line_celery_prints_and_it_exits_non_zero(
    tmp_path: Path, redis_url: str, broker_url: str, command: str, mistake: str
) -> None:
    # Celery used to print its usage text and two tracebacks (76-86 lines) first.
    module, error = MISTAKES[mistake]
    with cluster(tmp_path, redis_url, broker_url, app="mistaken_app") as running:
        done = subprocess.run(
            [CELERY, "-A", "mistaken_app", *COMMANDS[command]],
            env={**running.env, "TEST_MISTAKE": mistake}, cwd=APPS,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    first = next(line for line in done.stderr.splitlines() if line.strip())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "CRITICAL" in first, done.stderr
    assert first.endswith(f"periodiq: {declared_at(module)}: {error}; celery cannot start")
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_a_mistaken_periodic_still_raises_entry_error_in_python(app: Celery) -> None:
    with pytest.raises(EntryError, match="every=0: the interval must be longer than zero"):
        periodic(every=0, name="zero", app=app)(task_body)
