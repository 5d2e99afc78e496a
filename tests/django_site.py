"""The test Django project (tests/django_project/) served by a real ``manage.py
runserver``, with its database migrated and its users made (see users.py there), on a
private schedule Redis and broker; and a signed-in HTTP session of one of its users."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis
import requests

from celery_periodiq import Periodiq
from celery_periodiq.localredis import LocalRedis
from tests.browser import answers
from tests.processes import OPENED, ROOT, api_for, wait_for
from tests.test_cli import free_port

PROJECT = ROOT / "tests" / "django_project"
LIST = "/admin/periodiq/periodicentry/"
"""The admin's list of periodic entries; an entry is at ``LIST + quote(name) + "/change/"``."""


@dataclass
class Site:
    url: str
    env: dict[str, str]
    redis_url: str
    broker_url: str
    db: Path
    log: Path
    schedule: LocalRedis
    """The schedule's Redis: ``stop()`` and ``restart()`` it for an outage."""
    sessions: list[requests.Session] = field(default_factory=list)
    clients: list[Periodiq] = field(default_factory=list)

    def api(self) -> Periodiq:
        """The runtime API of the project's Celery app (the same schedule)."""
        if not self.clients:
            self.clients.append(api_for(self.redis_url, self.broker_url))
            OPENED.remove(self.clients[0])  # the site's, for all its tests: it closes it
        return self.clients[0]

    def queued(self) -> int:
        """How many task messages wait in the broker's default queue."""
        with redis.Redis.from_url(self.broker_url) as broker:
            return int(broker.llen("celery"))

    def manage(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """``python manage.py ARGS`` of the project, in a subprocess."""
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=PROJECT, env={**self.env, **env},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    def session(self, user: str) -> requests.Session:
        """An HTTP session signed in as ``user`` through the admin's login form."""
        session = requests.Session()
        self.sessions.append(session)  # closed with the site
        session.get(f"{self.url}/admin/login/", timeout=10).raise_for_status()
        answer = session.post(
            f"{self.url}/admin/login/",
            data={"username": user, "password": f"pw-{user}", "next": "/admin/",
                  "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            timeout=10,
        )  # fmt: skip
        answer.raise_for_status()
        assert "sessionid" in session.cookies, f"{user} could not sign in"
        return session

    def post(
        self, session: requests.Session, path: str, data: dict[str, str], *, csrf: bool = True
    ) -> requests.Response:
        """POST a form as a browser would (with Django's CSRF token, unless not ``csrf``);
        redirects are not followed."""
        if csrf:
            data = {**data, "csrfmiddlewaretoken": session.cookies["csrftoken"]}
        return session.post(self.url + path, data=data, allow_redirects=False, timeout=30)


@contextmanager
def django_site(tmp: Path) -> Iterator[Site]:
    """The project migrated, its users made and ``runserver`` answering; stopped after."""
    with LocalRedis(tmp / "redis", persist=True) as schedule, LocalRedis(tmp / "broker") as broker:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT)]),
            "DJANGO_SETTINGS_MODULE": "proj.settings",
            "TEST_REDIS_URL": schedule.url,
            "TEST_BROKER_URL": broker.url,
            "TEST_DJANGO_DB": str(tmp / "db.sqlite3"),
        }
        port = free_port()
        site = Site(f"http://127.0.0.1:{port}", env, schedule.url, broker.url,
                    tmp / "db.sqlite3", tmp / "runserver.log", schedule)  # fmt: skip
        for step in (("migrate", "-v0"), ("shell", "-c", "import users")):
            done = site.manage(*step)
            assert done.returncode == 0, done.stderr
        with site.log.open("w") as log:
            server = subprocess.Popen(
                [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            wait_for(lambda: answers(f"{site.url}/admin/login/"), 30, "runserver to answer")
            yield site
        finally:
            for session in site.sessions:
                session.close()
            for client in site.clients:
                client.store.client.close()
            server.terminate()
            server.wait(timeout=20)
