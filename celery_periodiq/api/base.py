"""What every part of the runtime API works on: :class:`Client`, the state of one
:class:`~celery_periodiq.api.Periodiq` (the app, its settings, its Runtime and Store).

The parts (:mod:`~celery_periodiq.api.entries`, :mod:`~celery_periodiq.api.reading`,
:mod:`~celery_periodiq.api.operations`) are protocols over :class:`Client`, not base
classes: ``Periodiq`` takes each of their methods by name, so its bases stay ``object``
and ``help(Periodiq)`` lists every method as its own.
"""

from __future__ import annotations

from typing import Protocol

from celery import Celery

from celery_periodiq.config import Settings
from celery_periodiq.ops import steer
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.store import Store

__all__ = ["Client", "audit_of"]


class Client(Protocol):
    """One app's client: its app, the app's settings, Runtime (whose guard turns Redis
    errors into ours) and Store, the task names it has warned about already, and how its
    writes come."""

    app: Celery
    settings: Settings
    store: Store
    runtime: Runtime
    _unknown_tasks_seen: set[str]
    _via: str
    """How this client's writes come, as the audit trail records them: ``"api"``, or the
    CLI's, the dashboard's, the admin's own client (:func:`celery_periodiq.api.acting`)."""
    _actor: str | None
    """Who writes when a call names no ``actor=`` (None: this process's ``user@host``)."""


def audit_of(client: Client, actor: object, note: str = "") -> Audit:
    """The audit context of a write through ``client`` by ``actor`` (None: the client's).

    Raises:
        EntryError: ``actor`` is not non-empty text (nothing is written).
    """
    return steer.audit_of(client._actor if actor is None else actor, client._via, note)
