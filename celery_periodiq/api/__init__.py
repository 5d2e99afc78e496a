"""The runtime API: ``periodiq(app)`` creates, changes, pauses, triggers, inspects
and deletes entries while everything runs. The CLI is a thin layer over it.

:class:`Periodiq` is a facade: each method checks what it is given, takes the guard of
the app's :class:`~celery_periodiq.runtime.Runtime` (Redis errors as ours) and hands
the work to the operations in :mod:`celery_periodiq.ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from celery import Celery

from celery_periodiq.config import Settings
from celery_periodiq.errors import EntryError, shown
from celery_periodiq.model.entry import AUTO
from celery_periodiq.model.plan import from_ms
from celery_periodiq.model.simulation import DEFAULT_LIMIT, Simulation
from celery_periodiq.ops import backfill as backfills
from celery_periodiq.ops import bulk, doctor, listing, migrate, simulation, steer, transfer
from celery_periodiq.ops.doctor import Check
from celery_periodiq.ops.import_redbeat import DEFAULT_PREFIX as REDBEAT_PREFIX
from celery_periodiq.ops.listing import FAILURE_KINDS
from celery_periodiq.runtime import Runtime, runtime_of
from celery_periodiq.store.checkpoint import Checkpoint
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import BeatInfo, Event, StoredEntry

__all__ = ["FAILURE_KINDS", "Check", "Periodiq", "periodiq"]

_CLIENT_ATTRIBUTE = "_periodiq_client"
_NOT_OPTIONS = frozenset({"self", "name", "task"})


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


class Periodiq:
    """Create, change and inspect the entries of one Celery app's schedule."""

    def __init__(self, app: Celery, store: Store | None = None) -> None:
        # The app's one Runtime, its Store shared with the worker and the operations; a
        # client made after the app's settings changed reads them afresh, as it always did.
        fresh = Settings.from_app(app)
        self.runtime = runtime_of(app, fresh) if store is None else Runtime(app, store, fresh)
        self.app, self.settings, self.store = app, self.runtime.settings, self.runtime.store
        self._unknown_tasks_seen: set[str] = set()

    def declared_in(self, name: str) -> str | None:
        """Where the entry is declared (``"code"``, ``"beat_schedule"``), or None for a
        runtime entry: a declared entry's definition belongs to the deploy, which
        restores it when a beat starts.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self.runtime.guard():
            return steer.declared_in(self.store, name, steer.stored(self.store, name).entry)

    def add(
        self,
        name: str,
        task: Any,
        *,
        cron: str | None = None,
        every: float | timedelta | str | None = None,
        calendar: str | None = None,
        at: datetime | str | None = None,
        args: list[Any] | tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        tz: str = "UTC",
        owner: str | None = None,
        tolerance: float | str = AUTO,
        timebox: float | str | None = AUTO,
        grace: float | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window: float | None = None,
        expires: float | str | None = AUTO,
        jitter: float = 0.0,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        enabled: bool = True,
        alert_after: float | str | None = AUTO,
        failure_threshold: int = 3,
        pause_on_failure: bool = False,
        max_runs: int | None = None,
        schedule: Any = None,
    ) -> StoredEntry:
        """Create a runtime entry; beats pick it up within a second.

        Args:
            name: unique entry name (also the key of Jenkins ``H``).
            task: the task name, or the task object.
            cron: a cron expression or macro (``@daily``, ``@reboot``).
            every: an interval: seconds, a ``timedelta`` or ``"@every 1h30m"``.
            calendar: a systemd calendar event (``"Mon..Fri 09:00"``).
            at: run once, at this instant (an aware datetime, or ISO 8601 with an
                offset); it must be in the future. After it the entry has ended.
            alert_after: seconds without a successful run before the entry is overdue
                (``"auto"``: two intervals plus the timebox; None: never).
            failure_threshold: consecutive failed or timeboxed runs before it is failing.
            pause_on_failure: pause the entry when it becomes failing.
            max_runs: the most ticks the beat publishes for the entry (1 to 10**9;
                None: no limit). A run that stands for missed ticks counts once, a
                :meth:`trigger` not at all; after the last one the entry has ended.
            schedule: instead of ``cron=``/``every=``/``calendar=``, a Celery schedule
                object (``crontab``, ``solar``, ``schedule``), a ``timedelta``, an aware
                ``datetime`` (as ``at=``) or a celery_periodiq ``Schedule``.

        Returns:
            The stored entry with its first tick.

        Raises:
            EntryError: an option is invalid (nothing is written).
            EntryExistsError: the name is taken.
            StoreUnavailableError: Redis failed.
        """
        # the options as given, forwarded whole: the signature above names each once
        given = {key: value for key, value in locals().items() if key not in _NOT_OPTIONS}
        entry = steer.build(self.runtime, name, task, given)
        with self.runtime.guard():
            stored = steer.add(self.store, entry)
        steer.warn_unknown_task(self.app, entry.task, self._unknown_tasks_seen)
        return stored

    def get(self, name: str) -> StoredEntry:
        """One entry with its state.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self.runtime.guard():
            return steer.stored(self.store, name)

    def update(self, name: str, /, *, force: bool = False, **changes: Any) -> StoredEntry:
        """Change an entry's options; its next tick is computed afresh, its state kept.

        Accepts the keyword options of :meth:`add` (a schedule option replaces
        the schedule). Writing an entry repairs it: keys of the wrong type are
        replaced and its quarantine is lifted. A ``max_runs`` above the runs sent
        makes an ended entry tick again; one at or below them ends it. A new
        ``at=`` must be in the future.

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: an option is unknown or invalid (nothing is written).
            DeclaredEntryError: the entry is declared in code or beat_schedule and
                ``force`` is not set (the next deploy would undo the change).
        """
        with self.runtime.guard():
            return steer.update(self.runtime, name, force, changes)

    def delete(self, name: str, *, force: bool = False) -> None:
        """Delete an entry and its state and history.

        Works on a damaged entry too (keys of the wrong type, an unreadable or
        missing definition): everything stored under its name is removed.

        Raises:
            EntryNotFoundError: no entry has that name.
            DeclaredEntryError: the entry is declared in code or beat_schedule and
                ``force`` is not set (the next deploy would restore it).
        """
        with self.runtime.guard():
            steer.delete(self.store, name, force)

    def delete_owner(self, owner: str) -> list[str]:
        """Delete every entry tagged with ``owner``; returns their names."""
        steer.check_owner(owner)
        with self.runtime.guard():
            return self.store.remove(self.store.owned_by(owner))

    def pause(self, name: str, note: str | None = None) -> StoredEntry:
        """Stop an entry's ticks until :meth:`resume`; ``note`` says why."""
        if note is not None and not isinstance(note, str):
            raise EntryError(f"note={shown(note)} is invalid (allowed: text)")
        with self.runtime.guard():
            return steer.pause(self.store, name, note)

    def resume(self, name: str) -> StoredEntry:
        """Restart a paused entry from its next tick after now."""
        with self.runtime.guard():
            return steer.resume(self.store, name)

    def trigger(self, name: str) -> str:
        """Run an entry now, outside its schedule; the worker's overlap guard still applies.

        Returns:
            The task id of the run.

        Raises:
            EntryNotFoundError: no entry has that name.
            BrokerUnavailableError: the broker could not be reached, or refused the run.
            MessageError: the run's message cannot be encoded here (its serializer or
                compression is not installed, or it refused the arguments).
        """
        with self.runtime.guard():
            return steer.trigger(self.runtime, name)

    def backfill(
        self,
        name: str,
        start: datetime,
        end: datetime,
        *,
        overlap: str = "buffer_all",
        dry_run: bool = False,
        timeout: float = 300.0,
        progress: Callable[[backfills.BackfillTick], None] | None = None,
    ) -> backfills.BackfillReport:
        """Run the entry's past ticks in ``[start, end)`` now, each with its nominal instant.

        A tick whose run began before is skipped (and reported as ``already ran``); the
        others run guarded like scheduled runs, except for the tolerance drop.

        Args and errors: :func:`celery_periodiq.ops.backfill.backfill`.
        """
        with self.runtime.guard():
            return backfills.backfill(
                self.runtime,
                name,
                start,
                end,
                overlap=overlap,
                dry_run=dry_run,
                timeout=timeout,
                progress=progress,
            )

    def history(self, name: str, *, limit: int = 20, failures_only: bool = False) -> list[Event]:
        """An entry's newest events, newest first (only failures with ``failures_only``)."""
        steer.check_count("limit", limit)
        with self.runtime.guard():
            steer.stored(self.store, name)
            return self.store.history(name, limit, failures=failures_only)

    def upcoming(self, name: str, n: int = 10, *, after: datetime | None = None) -> list[datetime]:
        """The next ``n`` fire instants of an entry (in its time zone).

        Args:
            name: the entry.
            n: how many.
            after: an aware datetime to count from; default the Redis clock.

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: the entry is quarantined.
            ScheduleError: ``after`` is naive.
        """
        steer.check_count("n", n, low=0)
        with self.runtime.guard():
            entry = steer.readable(self.store, name)
            start = from_ms(self.store.now_ms()) if after is None else after
            return entry.parsed_schedule().upcoming(start, n)

    def now(self) -> datetime:
        """The Redis server clock (UTC), which every scheduling decision uses."""
        with self.runtime.guard():
            return from_ms(self.store.now_ms())

    def simulate(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        down: tuple[datetime, datetime] | None = None,
        owner: str | None = None,
        names: list[str] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> Simulation:
        """What the beats would publish from ``start`` to ``end``; writes nothing.

        Computed with the beat's own planning code (:mod:`celery_periodiq.model.simulate`):
        each tick is claimed when due (jitter applied) and decided as the beat
        decides it. Ticks due while the beats are ``down`` are claimed when they come
        back, so each entry's catch-up policy says what is published then and what is
        dropped as missed. No run is known ahead: the simulation assumes no run is
        unfinished when a tick is claimed. Paused, disabled and quarantined entries
        are listed with why nothing fires; so are ended ones.

        Args and errors: :func:`celery_periodiq.ops.simulation.simulate`.
        """
        return simulation.simulate(
            self.runtime, start=start, end=end, down=down, owner=owner, names=names, limit=limit
        )

    def has_checkpoint(self, name: str) -> bool:
        """Whether a run of the entry saved a checkpoint that the next run will resume from.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self.runtime.guard():
            steer.stored(self.store, name)
            return Checkpoint(self.store, name).exists()

    def failures(self, *, limit: int = 20) -> list[tuple[str, Event]]:
        """The newest failed or timeboxed runs across all entries, newest first.

        Returns:
            ``(entry name, event)`` pairs; the event's ``fields["error"]`` holds
            ``"Type: message"`` (empty for a timeboxed run).
        """
        steer.check_count("limit", limit)
        with self.runtime.guard():
            return listing.failures(self.store, limit)

    def diagnose(self) -> list[Check]:
        """Check what periodiq needs; never raises, every problem is a :class:`Check`
        (see :func:`celery_periodiq.ops.doctor.diagnose` for what is checked)."""
        return doctor.diagnose(self.runtime)

    def beats(self) -> list[BeatInfo]:
        """The live beat instances."""
        with self.runtime.guard():
            return self.store.beats()

    def count(self, *, owner: str | None = None) -> int:
        """How many entries there are (with the ``owner`` tag, when given)."""
        with self.runtime.guard():
            if owner is None:
                return self.store.count()
            return len(self.store.owned_by(steer.check_owner(owner)))

    def pages(self, *, batch: int = 500) -> Iterator[list[StoredEntry]]:
        """Every entry, in pages of about ``batch``, in no particular order: a walk through
        a large schedule that never holds all of it in memory."""
        steer.check_count("batch", batch)
        with self.runtime.guard():
            for names in self.store.scan(batch):
                yield self.store.load(names)

    def entries(self, *, batch: int = 500) -> Iterator[StoredEntry]:
        """Every entry, one at a time, read a page of ``batch`` at a time (:meth:`pages`)."""
        for page in self.pages(batch=batch):
            yield from page

    def export(
        self, *, owner: str | None = None, source: str | None = None, state: bool = True
    ) -> dict[str, Any]:
        """The entries (of ``owner``, from ``source``: runtime, code or config) as one
        versioned JSON document, with their pause state, last run and checkpoint unless
        ``state`` is False (see :mod:`celery_periodiq.ops.transfer`)."""
        with self.runtime.guard():
            return transfer.export_schedule(self.store, owner=owner, source=source, state=state)

    def import_schedule(
        self, document: Any, *, replace: bool = False, dry_run: bool = False
    ) -> transfer.ImportReport:
        """Create the entries of an :meth:`export` document (``replace``: also replace
        entries that exist with another definition); ``dry_run`` writes nothing.

        Raises:
            EntryError: any record is bad (each is named by position): nothing is written.
        """
        with self.runtime.guard():
            return transfer.import_schedule(self.store, document, replace=replace, dry_run=dry_run)

    def import_redbeat(
        self,
        *,
        url: str | None = None,
        key_prefix: str = REDBEAT_PREFIX,
        replace: bool = False,
        dry_run: bool = False,
        skip_invalid: bool = False,
    ) -> transfer.ImportReport:
        """Bring celery-redbeat's entries over, read straight from its Redis: each becomes
        a runtime entry of the same name (see :mod:`celery_periodiq.ops.import_redbeat`).

        Args and errors: :func:`celery_periodiq.ops.migrate.import_from_redbeat`.
        """
        return migrate.import_from_redbeat(
            self.runtime,
            url=url,
            key_prefix=key_prefix,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
        )

    def import_django_celery_beat(
        self,
        dump: Any,
        *,
        replace: bool = False,
        dry_run: bool = False,
        skip_invalid: bool = False,
        naive_tz: str | None = None,
    ) -> transfer.ImportReport:
        """Create an entry for every ``PeriodicTask`` of a django-celery-beat dump (the
        parsed JSON of ``manage.py dumpdata django_celery_beat``); see
        :mod:`celery_periodiq.ops.import_django` for what each field becomes.

        Args and errors: :func:`celery_periodiq.ops.migrate.import_from_django`.
        """
        return migrate.import_from_django(
            self.runtime,
            dump,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            naive_tz=naive_tz,
        )

    def add_many(self, entries: Iterable[dict[str, Any]]) -> list[str]:
        """Create many runtime entries at once, in pipelined batches (one Lua call per
        partition per ``periodiq_batch_size``); beats pick them up within a second.

        Args and errors: :func:`celery_periodiq.ops.bulk.build_many` (``entries``) and
        :func:`~celery_periodiq.ops.bulk.add_many` (what is returned).
        """
        built = bulk.build_many(self.runtime, entries)
        with self.runtime.guard():
            created = bulk.add_many(self.store, built)
        for task in sorted({entry.task for entry in built}):
            steer.warn_unknown_task(self.app, task, self._unknown_tasks_seen)
        return created

    # Last in the class: below this line ``list`` names the method, not the builtin.
    def list(self, *, owner: str | None = None, limit: int | None = None) -> list[StoredEntry]:
        """Every entry (or those of ``owner``), soonest next run first.

        With ``limit``, only that many are read from Redis: those due soonest, then
        (when fewer are due) others in no particular order; :meth:`count` says how many
        there are in all, :meth:`entries` walks through all of them page by page.
        """
        if limit is not None:
            steer.check_count("limit", limit)
        with self.runtime.guard():
            return listing.listed(self.store, owner, limit)
