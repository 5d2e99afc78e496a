"""What a worker of an app that uses periodiq does as it starts.

On ``worker_init`` (before Celery builds its tasks' tracers and request classes) the
plain tasks get the duplicate check (:func:`~celery_periodiq.worker.plain.install`), and
every task's worker request ends a run the guard drops revoked, a task's own ``Request``
class kept (:func:`~celery_periodiq.worker.dropped.with_drops_revoked`). Once the worker's
logging is set up, on ``celeryd_after_setup`` (before its banner, before it takes a
task), the app's ``periodiq_*`` settings are read: an invalid one stops the worker with
one CRITICAL line and exit status 1, as it stops the beat. It would otherwise start and
fail every periodic run on it.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from celery.signals import celeryd_after_setup, worker_init

from celery_periodiq.config import Settings
from celery_periodiq.errors import ConfigurationError
from celery_periodiq.worker.dropped import with_drops_revoked
from celery_periodiq.worker.plain import install, uses_periodiq

__all__: list[str] = []

logger = logging.getLogger("celery_periodiq.task")
_plain_logger = logging.getLogger("celery_periodiq.plain")


@worker_init.connect
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if isinstance(app, Celery) and uses_periodiq(app):
        installed = install(app)
        _plain_logger.debug("periodiq: %d plain tasks get the duplicate check", installed)
        for task in list(app.tasks.values()):
            with_drops_revoked(type(task))


@celeryd_after_setup.connect
def _check_settings(instance: Any = None, **_: Any) -> None:
    app = getattr(instance, "app", None)
    if not isinstance(app, Celery) or not uses_periodiq(app):
        return
    try:
        Settings.from_app(app)
    except ConfigurationError as error:
        # One clear line and a non-zero exit (Celery's worker stops with the code of a
        # SystemExit raised while it starts), not a worker failing every run.
        logger.critical("periodiq: %s; the worker cannot start", error)
        raise SystemExit(1) from None
