"""How a run the guard drops ends for Celery: revoked, with the reason.

When the guard drops a run (too soon, overlap, expired, a deleted or damaged entry, a
begin Redis could not take), Celery has already sent ``task-started``; the guard raises
:class:`RunDropped`, an ``Ignore``, so the run does not run, is not retried, and its
message is acknowledged once, as before. Celery ends an ``Ignore`` silently: monitors
(Flower, ``celery events``) would show the run STARTED for ever and the result backend
would hold nothing final. So the worker's request for the task (Celery's ``Task.Request``
extension point) ends a dropped run as Celery ends one it revokes or finds expired
(``celery.worker.request.Request._announce_revoked``): a ``task-revoked`` event
(``terminated=False``, ``signum=None``, ``expired`` for an expired tick, plus the
``reason``) and, where results are stored, ``REVOKED`` in the result backend with a
``TaskRevokedError(reason)``, both from the worker's main process (so the event follows
``task-started`` on the same connection, and the worker's ``-E`` and its remote
``enable_events``/``disable_events`` decide, as for every task event).

Two differences from a revocation, on purpose: the ``task_revoked`` signal is not sent
(the guard already recorded the drop in the entry's counters and history; periodiq's
own handler of that signal would record it twice), and a final state the result backend
already holds for the task id (a copy of a tick that ran) is kept. A duplicate (a copy
of a tick whose run began: the same task id) reports nothing at all: the task id's
state is that run's, which may still be going on.
"""

from __future__ import annotations

import logging
from typing import Any

from billiard.einfo import ExceptionWithTraceback  # type: ignore[attr-defined]  # not in its stubs
from celery import states
from celery.exceptions import Ignore
from celery.utils.imports import symbol_by_name
from celery.worker.request import Request as CeleryRequest

__all__ = ["DropsEndRevoked", "Request", "RunDropped", "with_drops_revoked"]

logger = logging.getLogger("celery_periodiq.task")


class RunDropped(Ignore):
    """The guard dropped this run: Celery ignores it, and the worker reports it revoked."""

    def __init__(self, reason: str, expired: bool = False, began: bool = False) -> None:
        # every attribute is in args: the exception crosses from a prefork child
        # to the worker's main process pickled
        super().__init__(reason, expired, began)
        self.reason = reason
        self.expired = expired
        self.began = began
        """A duplicate: the task id belongs to a run that began; nothing is reported."""

    def __str__(self) -> str:
        return self.reason


def dropped(outcome: str, note: str = "") -> RunDropped:
    """The exception that drops a run for begin.lua's ``outcome`` (and its ``note``)."""
    return RunDropped(
        f"periodiq {outcome}" + (f": {note}" if note else ""),
        expired=outcome == "expired",
        began=outcome == "duplicate",
    )


class DropsEndRevoked:
    """A mixin of Celery's worker ``Request``: a run dropped by the guard ends revoked."""

    def on_failure(
        self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False
    ) -> Any:
        exc = getattr(exc_info, "exception", None)
        if isinstance(exc, ExceptionWithTraceback):  # as Celery's own on_failure unwraps it
            exc = exc.exc
        if isinstance(exc, RunDropped) and not exc.began:
            _announce_dropped(self, exc)
        # Celery's own handling of an Ignore: the message is acknowledged (once)
        return super().on_failure(exc_info, send_failed_event, return_ok)  # type: ignore[misc]


def _announce_dropped(request: Any, dropped: RunDropped) -> None:
    request.send_event(
        "task-revoked",
        terminated=False,
        signum=None,
        expired=dropped.expired,
        reason=dropped.reason,
    )
    if not request.store_errors:  # task_ignore_result, without store_errors_even_if_ignored
        return
    backend = request.task.backend
    try:
        if _final_already(backend, request.id):
            return
        backend.mark_as_revoked(request.id, dropped.reason, request=request._context)
    except Exception as failure:  # the message is acknowledged whatever the backend does
        logger.error(
            "periodiq: run %s: could not store its REVOKED state in the result backend: %s",
            request.id,
            failure,
        )


def _final_already(backend: Any, task_id: str) -> bool:
    try:
        return backend.get_state(task_id) in states.READY_STATES
    except NotImplementedError:  # no result backend: nothing to keep, nothing stored
        return False


class Request(DropsEndRevoked, CeleryRequest):
    """Celery's worker request, whose dropped runs end revoked: ``PeriodicTask.Request``."""


def with_drops_revoked(task_class: type[Any]) -> None:
    """Make ``task_class``'s worker requests end a dropped run revoked, keeping the
    request class it has (a custom ``Request`` of its own, or Celery's)."""
    try:
        base = symbol_by_name(task_class.Request)
    except (ImportError, AttributeError, ValueError):  # Celery says so as it builds the task
        return
    if not isinstance(base, type) or issubclass(base, DropsEndRevoked):
        return
    task_class.Request = type(
        f"Periodiq{base.__name__}",
        (DropsEndRevoked, base),
        {"__module__": __name__, "__doc__": base.__doc__},
    )
