"""Outside a worker, the app's task modules are imported as a worker imports them before
its tasks are listed or looked up: once per app and process, a module that fails named
in one warning, a module that lists the tasks while it is imported answered (not
deadlocked).

Real Celery apps and real modules written to a temporary directory; the Django
project's autodiscovery, through the CLI, the admin and the dashboard, is
tests/test_django_discovery.py.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import sys
from pathlib import Path

import pytest
from celery import Celery

from celery_periodiq.present.entry_form import task_choices
from celery_periodiq.worker.plain import is_plain

_numbers = itertools.count()


def module(folder: Path, code: str) -> str:
    """A new module (``folder`` is on sys.path) holding ``code``, in which ``{name}``
    is the module's name; its name."""
    name = f"periodiq_modules_{next(_numbers)}"
    (folder / f"{name}.py").write_text(code.replace("{name}", name))
    return name


def tasks_module(folder: Path) -> str:
    """A module of one task, named ``<module>.nightly`` (shared: every app has it)."""
    return module(
        folder,
        "from celery import shared_task\n\n\n"
        '@shared_task(name="{name}.nightly")\n'
        "def nightly():\n"
        '    return "report"\n',
    )


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_tasks_of_an_included_module_are_listed_and_looked_up(folder: Path) -> None:
    tasks = tasks_module(folder)
    app = Celery("modules", include=[tasks], set_as_current=False)

    listed = task_choices(app)

    assert f"{tasks}.nightly" in listed
    assert is_plain(app, f"{tasks}.nightly") is True


def test_a_module_that_fails_to_import_is_named_once_and_the_one_before_is_listed(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = tasks_module(folder)
    broken = module(folder, "raise RuntimeError('no settings here')\n")
    app = Celery("modules", include=[tasks, broken], set_as_current=False)

    with caplog.at_level(logging.WARNING, logger="celery_periodiq.api"):
        first, again = task_choices(app), task_choices(app)

    warnings = [r.getMessage() for r in caplog.records if r.name == "celery_periodiq.api"]
    assert f"{tasks}.nightly" in first
    assert again == first
    assert warnings == [
        "periodiq: app 'modules' could not import its task modules here (RuntimeError: no "
        "settings here): the tasks they define are missing from its registered tasks in "
        "this process"
    ]


def test_a_module_that_lists_the_tasks_as_it_is_imported_gets_an_answer(folder: Path) -> None:
    asking = f"periodiq_modules_{next(_numbers)}"
    holder = module(
        folder,
        "from celery import Celery\n\n"
        f'app = Celery("modules", include=["{asking}"], set_as_current=False)\n',
    )
    (folder / f"{asking}.py").write_text(
        f"from {holder} import app\n"
        "from celery_periodiq.present.entry_form import task_choices\n\n\n"
        f'@app.task(name="{asking}.nightly")\n'
        "def nightly():\n"
        '    return "report"\n\n\n'
        "ASKED = task_choices(app)\n"
    )
    app = importlib.import_module(holder).app

    listed = task_choices(app)

    assert f"{asking}.nightly" in listed
    assert f"{asking}.nightly" in sys.modules[asking].ASKED
