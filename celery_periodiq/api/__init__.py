"""The runtime API: ``periodiq(app)`` gives :class:`Periodiq`, which creates, changes,
pauses, triggers, inspects and deletes entries while everything runs.

Owns the public facade: each method checks what it is given, takes the guard of the app's
:class:`~celery_periodiq.runtime.Runtime` (Redis errors as ours) and hands the work to
:mod:`celery_periodiq.ops`. Open first: this module (``Periodiq``), then its four parts,
written over ``base``: ``entries`` (writing entries), ``reading`` (reading them),
``operations`` (the schedule as a whole) and ``windows`` (maintenance windows).
May import: ``ops`` and every layer below it (``runtime``, ``store``, ``model``, ...);
never ``present``, ``web``, ``contrib`` or ``cli``, which are built on it.
"""

from __future__ import annotations

import copy

from celery import Celery

from celery_periodiq.api.entries import Entries
from celery_periodiq.api.operations import Operations
from celery_periodiq.api.reading import Reading
from celery_periodiq.api.windows import Windows
from celery_periodiq.config import Settings
from celery_periodiq.ops.doctor import Check
from celery_periodiq.ops.listing import FAILURE_KINDS
from celery_periodiq.runtime import Runtime, runtime_of
from celery_periodiq.store.store import Store

__all__ = ["FAILURE_KINDS", "Check", "Periodiq", "acting", "periodiq"]

_CLIENT_ATTRIBUTE = "_periodiq_client"


def periodiq(app: Celery) -> Periodiq:
    """The runtime API for ``app``'s schedule (one client per app).

    Raises:
        ConfigurationError: a ``periodiq_*`` setting is invalid.
    """
    # Kept on the app itself, so the client lives and dies with it.
    client: Periodiq | None = vars(app).get(_CLIENT_ATTRIBUTE)
    if client is None:
        client = Periodiq(app)
        vars(app)[_CLIENT_ATTRIBUTE] = client
    return client


def acting(client: Periodiq, via: str, actor: str | None = None) -> Periodiq:
    """``client`` for the CLI, the dashboard or the admin: the same app, Runtime and Store,
    its writes recorded in the audit trail as come ``via`` (``"cli"``, ...), by ``actor``
    when a call names none (None: this process's ``user@host``)."""
    other = copy.copy(client)
    other._via, other._actor = via, actor
    return other


class Periodiq:
    """Create, change and inspect the entries of one Celery app's schedule."""

    def __init__(self, app: Celery, store: Store | None = None) -> None:
        # The app's one Runtime, its Store shared with the worker and the operations; a
        # client made after the app's settings changed reads them afresh, as it always did.
        fresh = Settings.from_app(app)
        self.runtime = runtime_of(app, fresh) if store is None else Runtime(app, store, fresh)
        self.app, self.settings, self.store = app, self.runtime.settings, self.runtime.store
        self._unknown_tasks_seen: set[str] = set()
        self._via: str = "api"
        self._actor: str | None = None

    # The methods are written in three parts by topic, each a protocol over base.Client
    # that this class satisfies, and taken here by name: the bases stay ``object`` and
    # help(Periodiq) shows every method, with its full docstring, as its own.

    # writing entries
    add = Entries.add
    add_many = Entries.add_many
    get = Entries.get
    update = Entries.update
    delete = Entries.delete
    delete_owner = Entries.delete_owner
    pause = Entries.pause
    resume = Entries.resume
    pause_many = Entries.pause_many
    resume_many = Entries.resume_many
    delete_many = Entries.delete_many
    trigger = Entries.trigger
    trigger_many = Entries.trigger_many

    # maintenance windows
    add_window = Windows.add_window
    windows = Windows.windows
    remove_window = Windows.remove_window

    # the schedule as a whole
    backfill = Operations.backfill
    simulate = Operations.simulate
    diagnose = Operations.diagnose
    reindex = Operations.reindex
    export = Operations.export
    export_to = Operations.export_to
    import_schedule = Operations.import_schedule
    import_file = Operations.import_file
    import_redbeat = Operations.import_redbeat
    import_django_celery_beat = Operations.import_django_celery_beat

    # reading
    audit = Reading.audit
    declared_in = Reading.declared_in
    history = Reading.history
    upcoming = Reading.upcoming
    now = Reading.now
    has_checkpoint = Reading.has_checkpoint
    failures = Reading.failures
    beats = Reading.beats
    count = Reading.count
    pages = Reading.pages
    page = Reading.page
    entries = Reading.entries
    list = Reading.list  # last: below it ``list`` names the method
