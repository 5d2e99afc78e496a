"""A Django project's tasks, found by Celery's autodiscovery, are the app's registered
tasks everywhere periodiq lists or checks them, not only on the worker.

The project is made as a reader of docs/deployment/django.md makes one: ``django-admin
startproject proj``, ``manage.py startapp core`` with a ``core/tasks.py`` of
``@shared_task``s, and the page's own ``celery.py`` (``app.autodiscover_tasks()``),
``__init__.py`` and settings, on a private Redis named by ``REDIS_URL``. Outside a
worker Celery imports ``core/tasks.py`` only when asked to; every test runs the real
commands in subprocesses: ``celery -A proj periodiq add`` and ``doctor``, the admin's
form under ``manage.py runserver``, the dashboard's under ``celery -A proj periodiq
serve``. A task module that fails to import is named in a warning, and nothing crashes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from celery_periodiq.localredis import LocalRedis
from tests.browser import answers
from tests.processes import CELERY, ROOT, wait_for
from tests.test_cli import free_port
from tests.test_docs import DOCS, blocks, rendered

pytestmark = pytest.mark.slow  # django-admin, manage.py, celery and runserver as processes

PAGE = DOCS / "deployment" / "django.md"
TASKS = """\
from celery import shared_task


@shared_task
def boom():
    raise RuntimeError("boom")
"""
BROKEN = "import periodiq_no_such_module  # a dependency missing from this host\n" + TASKS
DJANGO_ADMIN = str(Path(sys.executable).with_name("django-admin"))
ADD_FORM = "/admin/periodiq/periodicentry/add/"
PASSWORD = "Discovery-7-pass"  # passes startproject's password validators
OFFERED = '<option value="core.tasks.boom">'
"""How both forms offer a task in their picker."""


def page_files(name: str) -> list[str]:
    """The code blocks of docs/deployment/django.md that are the file ``name``."""
    found = [
        code
        for tag, code in blocks(rendered(PAGE))
        if tag == "python" and code.startswith(f"# {name}\n")
    ]
    assert found, f"{PAGE.name} shows no {name}"
    return found


@dataclass
class Project:
    folder: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A command in the project's folder, with its environment."""
        return subprocess.run(
            list(args),
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def periodiq(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``celery -A proj periodiq ARGS``."""
        return self.run(CELERY, "-A", "proj", "periodiq", *args)

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(sys.executable, "manage.py", *args)
        assert done.returncode == 0, done.stderr
        return done


@contextmanager
def django_project(folder: Path, tasks: str = TASKS) -> Iterator[Project]:
    """A project made by ``django-admin startproject`` and ``startapp core``, with the
    page's celery.py, __init__.py and settings and ``tasks`` as core/tasks.py, migrated,
    with a superuser ``admin`` (password :data:`PASSWORD`), on a private Redis."""
    with LocalRedis(folder / "redis") as server:
        site = folder / "site"
        site.mkdir()
        env = {
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "REDIS_URL": server.url,
            "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        }
        project = Project(site, env)
        started = project.run(DJANGO_ADMIN, "startproject", "proj", ".")
        assert started.returncode == 0, started.stderr
        project.manage("startapp", "core")
        (site / "proj" / "celery.py").write_text(page_files("celery.py")[0])
        (site / "proj" / "__init__.py").write_text(page_files("__init__.py")[0])
        settings = site / "proj" / "settings.py"
        added = "\n".join([*page_files("settings.py"), 'INSTALLED_APPS += ["core"]\n'])
        settings.write_text(settings.read_text() + "\n" + added)
        (site / "core" / "tasks.py").write_text(tasks)
        project.manage("migrate", "-v0")
        project.manage(
            "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com"
        )
        yield project


@contextmanager
def served(project: Project, probe: str, *command: str) -> Iterator[str]:
    """``command`` (with ``{port}`` in it) run in the project until ``probe``, a path,
    answers on a free port: its base URL; stopped on leaving."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = project.folder / "served.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [part.format(port=port) for part in command],
            cwd=project.folder,
            env=project.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: answers(base + probe), 60, f"the server to answer (its log: {log})")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    with django_project(tmp_path_factory.mktemp("discovery")) as made:
        yield made


def test_add_warns_of_a_misspelt_task_only_and_doctor_agrees(project: Project) -> None:
    known = project.periodiq("add", "boom-hourly", "core.tasks.boom", "--every", "3600")
    typo = project.periodiq("add", "bom-hourly", "core.tasks.bom", "--every", "3600")
    doctor = project.periodiq("doctor", "--json")

    assert known.returncode == 0, known.stderr
    assert "not registered" not in known.stderr
    assert typo.returncode == 0, typo.stderr
    assert "Warning: task 'core.tasks.bom' is not registered in app 'proj'" in typo.stderr
    (tasks,) = [check for check in json.loads(doctor.stdout)["checks"] if check["name"] == "tasks"]
    assert tasks["status"] == "warn"
    assert "bom-hourly (core.tasks.bom)" in tasks["detail"]
    assert "core.tasks.boom" not in tasks["detail"]


def test_the_admins_form_offers_the_discovered_task(project: Project) -> None:
    runserver = (sys.executable, "manage.py", "runserver", "127.0.0.1:{port}", "--noreload")
    with served(project, "/admin/login/", *runserver) as base, requests.Session() as browser:
        browser.get(f"{base}/admin/login/", timeout=10).raise_for_status()
        login = {"username": "admin", "password": PASSWORD, "next": "/admin/"}
        login["csrfmiddlewaretoken"] = browser.cookies["csrftoken"]
        browser.post(f"{base}/admin/login/", data=login, timeout=10).raise_for_status()
        form = browser.get(base + ADD_FORM, timeout=30)

    assert form.status_code == 200, form.text
    assert OFFERED in form.text
    assert "One of the app's 1 registered tasks" in form.text


def test_the_dashboards_form_offers_the_discovered_task(project: Project) -> None:
    serve = (CELERY, "-A", "proj", "periodiq", "serve", "--port", "{port}", "--token", "t0k3n-8ch")
    with served(project, "/login", *serve) as base, requests.Session() as browser:
        browser.post(f"{base}/login", data={"token": "t0k3n-8ch"}, timeout=10).raise_for_status()
        form = browser.get(f"{base}/entries/new", timeout=30)

    assert form.status_code == 200, form.text
    assert OFFERED in form.text
    assert "One of the app's 1 registered tasks" in form.text


def test_listing_the_tasks_in_a_django_process_keeps_the_requests_url_prefix(
    project: Project,
) -> None:
    """Celery's Django fixup runs ``django.setup()`` as the modules are imported, which
    sets the URL prefix to "/": a site served under /sub/ keeps its own."""
    shown = project.manage(
        "shell",
        "-c",
        "from django.urls import get_script_prefix, set_script_prefix\n"
        "from celery_periodiq.contrib.django.celery_app import celery_app\n"
        "from celery_periodiq.present.entry_form import task_choices\n"
        "set_script_prefix('/sub/')\n"
        "print(task_choices(celery_app()), get_script_prefix())\n",
    )

    assert shown.stdout.splitlines()[-1] == "['core.tasks.boom'] /sub/"


def test_a_task_module_that_fails_to_import_is_named_and_nothing_crashes(
    tmp_path: Path,
) -> None:
    with django_project(tmp_path, BROKEN) as broken:
        added = broken.periodiq("add", "boom-hourly", "core.tasks.boom", "--every", "3600")
        listed = broken.periodiq("list", "--json")

    assert added.returncode == 0, added.stderr
    assert (
        "Warning: app 'proj' could not import its task modules here (ModuleNotFoundError: "
        "No module named 'periodiq_no_such_module')"
    ) in added.stderr
    assert [entry["name"] for entry in json.loads(listed.stdout)] == ["boom-hourly"]
