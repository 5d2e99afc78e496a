"""The app's task modules imported as a worker imports them when it starts, before the
app's tasks are listed or looked up outside a worker or a beat.

Outside the worker Celery imports task modules lazily: ``app.autodiscover_tasks()``
only connects a callback to the ``import_modules`` signal, and ``imports``/``include``
wait as well, until something calls ``app.loader.import_default_modules()`` (the worker
and the beat do, as they start). Until then ``app.tasks`` holds only the tasks of the
modules something happened to import, and the dashboard, the Django admin, the CLI and
the API would call a task that every worker runs "not registered".
:func:`import_task_modules` makes that call, once per app and process.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery

__all__ = ["import_task_modules"]

# The API's logger: the CLI prints its warnings, the dashboard and Django log them.
logger = logging.getLogger("celery_periodiq.api")

_ATTRIBUTE = "_periodiq_task_modules"  # kept on the app: the outcome lives and dies with it
_IMPORTING = "importing"
_lock = threading.RLock()  # re-entered by a task module that lists tasks as it is imported


def import_task_modules(app: Celery) -> bool:
    """Import the task modules ``app`` declares (``autodiscover_tasks()``, ``imports``,
    ``include``) as its workers do, the first time this is asked for ``app`` in this
    process (a worker or a beat has imported them already); later calls return the
    first outcome.

    A module that fails to import (or a Django project that cannot be set up) raises
    nothing: a warning names the error, once, and ``app.tasks`` keeps what was
    imported before it.

    Returns:
        False when a module failed to import, else True.
    """
    done = vars(app).get(_ATTRIBUTE)
    if isinstance(done, bool):
        return done
    with _lock:
        done = vars(app).get(_ATTRIBUTE)
        if done is _IMPORTING:  # asked again by the modules being imported, on this thread
            return True
        if done is None:
            vars(app)[_ATTRIBUTE] = _IMPORTING
            try:
                done = bool(getattr(app.loader, "worker_initialized", False)) or _import(app)
            finally:
                vars(app)[_ATTRIBUTE] = done  # None again if interrupted: asked again later
        return bool(done)


def _import(app: Celery) -> bool:
    try:
        with _script_prefix_kept():
            app.loader.import_default_modules()
    except Exception as error:  # the user's code: whatever it raises is said, not raised
        logger.warning(
            "periodiq: app %r could not import its task modules here (%s: %s): the tasks "
            "they define are missing from its registered tasks in this process",
            app.main,
            type(error).__name__,
            error,
        )
        return False
    return True


@contextmanager
def _script_prefix_kept() -> Iterator[None]:
    """Inside a Django site, keep the current request's URL prefix: Celery's Django
    fixup calls ``django.setup()`` on ``import_modules``, which resets it."""
    urls = sys.modules.get("django.urls")
    if urls is None:
        yield
        return
    prefix = urls.get_script_prefix()
    try:
        yield
    finally:
        urls.set_script_prefix(prefix)
