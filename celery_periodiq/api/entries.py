"""The part of the runtime API that writes entries: create one or many, change, delete,
pause, resume and trigger them (each through :mod:`celery_periodiq.ops.steer` or
:mod:`celery_periodiq.ops.bulk`, inside the Runtime's guard).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from celery_periodiq.api.base import Client, audit_of
from celery_periodiq.errors import EntryError, shown
from celery_periodiq.model.entry import AUTO
from celery_periodiq.ops import bulk, many, pauses, steer
from celery_periodiq.ops.many import BulkResult
from celery_periodiq.store.views import StoredEntry

__all__ = ["Entries"]

_NOT_OPTIONS = frozenset({"self", "name", "task", "actor"})


class Entries(Client, Protocol):
    """Create, change, pause, trigger and delete entries."""

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
        tz: str | None = None,
        owner: str | None = None,
        group: str | None = None,
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
        exclude: list[Any] | tuple[Any, ...] = (),
        schedule: Any = None,
        actor: str | None = None,
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
            tz: the IANA zone the schedule is read in (default: the app's
                ``timezone``, as Celery reads a ``crontab``; UTC when the app sets none).
            group: the group whose ``periodiq_group_limits`` limit applies to its runs
                (default: its ``owner``); while the setting names groups, one it does
                not name is refused.
            alert_after: seconds without a successful run before the entry is overdue
                (``"auto"``: two intervals plus the timebox; None: never).
            failure_threshold: consecutive failed or timeboxed runs before it is failing.
            pause_on_failure: pause the entry when it becomes failing.
            max_runs: the most ticks the beat publishes for the entry (1 to 10**9;
                None: no limit). A run that stands for missed ticks counts once, a
                :meth:`trigger` not at all; after the last one the entry has ended.
            exclude: dates none of its ticks runs on (holidays): ``"2026-12-25"`` or
                ``date`` values, read in the entry's zone; each tick skipped on one is
                recorded as ``excluded``.
            schedule: instead of ``cron=``/``every=``/``calendar=``, a Celery schedule
                object (``crontab``, ``solar``, ``schedule``), a ``timedelta``, an aware
                ``datetime`` (as ``at=``) or a celery_periodiq ``Schedule``.
            actor: who makes the change, as the entry's audit trail records it (every
                write method takes it; default: this process's ``user@host``).

        Returns:
            The stored entry with its first tick.

        Raises:
            EntryError: an option is invalid (nothing is written).
            EntryExistsError: the name is taken.
            StoreUnavailableError: Redis failed.
        """
        # the options as given, forwarded whole: the signature above names each once
        given = {key: value for key, value in locals().items() if key not in _NOT_OPTIONS}
        audit = audit_of(self, actor)
        entry = steer.build(self.runtime, name, task, given)
        with self.runtime.guard():
            stored = steer.add(self.store, entry, audit)
        steer.warn_unknown_task(self.app, entry.task, self._unknown_tasks_seen)
        return stored

    def get(self, name: str) -> StoredEntry:
        """One entry with its state.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self.runtime.guard():
            return steer.stored(self.store, name)

    def update(
        self, name: str, /, *, force: bool = False, actor: str | None = None, **changes: Any
    ) -> StoredEntry:
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
        audit = audit_of(self, actor)
        with self.runtime.guard():
            return steer.update(self.runtime, name, force, changes, audit)

    def delete(self, name: str, *, force: bool = False, actor: str | None = None) -> None:
        """Delete an entry and its state and history.

        Works on a damaged entry too (keys of the wrong type, an unreadable or
        missing definition): everything stored under its name is removed.

        Raises:
            EntryNotFoundError: no entry has that name.
            DeclaredEntryError: the entry is declared in code or beat_schedule and
                ``force`` is not set (the next deploy would restore it).
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            steer.delete(self.store, name, force, audit)

    def delete_owner(self, owner: str, *, actor: str | None = None) -> list[str]:
        """Delete every entry tagged with ``owner``; returns their names."""
        steer.check_owner(owner)
        audit = audit_of(self, actor)
        with self.runtime.guard():
            return self.store.remove(self.store.owned_by(owner), audit=audit)

    def pause(
        self,
        name: str,
        note: str | None = None,
        *,
        until: datetime | timedelta | float | str | None = None,
        actor: str | None = None,
    ) -> StoredEntry:
        """Stop an entry's ticks until :meth:`resume`, or until ``until``; ``note`` says why.

        Args:
            until: when the pause ends by itself: an aware datetime (or ISO 8601 text with
                an offset), a duration (a timedelta, ``"2h"``, ``"1h30m"``) or seconds from
                now. A beat resumes the entry then, from its next tick after that instant;
                when no beat runs then, the first beat after it does, and the ticks missed
                since follow the entry's catch-up policy. Ticks due during the pause are
                skipped, as with any pause.

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: ``until`` is not an instant or a duration, or not after now.
        """
        _check_note(note)
        audit = audit_of(self, actor)
        with self.runtime.guard():
            end = pauses.until_ms(until, self.store.now_ms())
            return steer.pause(self.store, name, note, end, audit)

    def resume(self, name: str, *, actor: str | None = None) -> StoredEntry:
        """Restart a paused entry from its next tick after now."""
        audit = audit_of(self, actor)
        with self.runtime.guard():
            return steer.resume(self.store, name, audit)

    def pause_many(
        self,
        *,
        names: Iterable[str] | None = None,
        owner: str | None = None,
        match: str | None = None,
        all: bool = False,
        note: str | None = None,
        until: datetime | timedelta | float | str | None = None,
        actor: str | None = None,
    ) -> BulkResult:
        """Pause the entries ``names``, or every entry of ``owner``, or whose name matches
        the glob ``match`` (``"report-*"``), or with ``all=True`` every entry; exactly one
        of them. An entry paused already keeps its own pause. ``note``, ``until`` and
        ``actor`` as in :meth:`pause`.

        Returns:
            The names of the entries paused (a list), and in its ``skipped`` the others
            selected, each with why (``"paused already"``).

        Raises:
            EntryError: not exactly one selector, an empty or malformed ``names``, a bad
                ``note`` or ``until`` (nothing changes).
            EntryNotFoundError: the selector names no entry, or ``names`` one that does
                not exist (nothing changes).
        """
        _check_note(note)
        audit = audit_of(self, actor)
        with self.runtime.guard():
            end = pauses.until_ms(until, self.store.now_ms())
            chosen = pauses.select(
                self.store, names=names, match=match, owner=owner, everything=all
            )
            return pauses.pause_many(self.store, chosen, note or "", end, audit)

    def resume_many(
        self,
        *,
        names: Iterable[str] | None = None,
        owner: str | None = None,
        match: str | None = None,
        all: bool = False,
        actor: str | None = None,
    ) -> BulkResult:
        """Resume the paused entries among ``names``, or of ``owner``, or whose name
        matches the glob ``match``, or with ``all=True`` every paused entry, each from its
        next tick after now; exactly one selector.

        Returns:
            The names of the entries resumed (a list), and in its ``skipped`` the others
            selected, each with why (``"not paused"``).

        Raises:
            EntryError: not exactly one selector, or an empty or malformed ``names``
                (nothing changes).
            EntryNotFoundError: the selector names no entry, or ``names`` one that does
                not exist (nothing changes).
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            chosen = pauses.select(
                self.store, names=names, match=match, owner=owner, everything=all
            )
            return pauses.resume_many(self.store, chosen, audit)

    def delete_many(
        self,
        *,
        names: Iterable[str] | None = None,
        owner: str | None = None,
        match: str | None = None,
        all: bool = False,
        force: bool = False,
        actor: str | None = None,
    ) -> BulkResult:
        """Delete the entries ``names``, or of ``owner``, or whose name matches the glob
        ``match``, or with ``all=True`` every entry (exactly one selector), with their
        state and history: one script call per partition per ``periodiq_batch_size``.
        Each is recorded in its audit trail as deleted by ``actor``.

        When one of the errors below is raised, nothing is deleted.

        Returns:
            The names deleted (a list; ``skipped``: those deleted meanwhile by another).

        Raises:
            EntryError: not exactly one selector, or an empty or malformed ``names``.
            EntryNotFoundError: the selector names no entry, or ``names`` one that does
                not exist.
            DeclaredEntryError: one of them is declared in code or beat_schedule and
                ``force`` is not set (the next deploy would restore it).
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            chosen = pauses.select(
                self.store, names=names, match=match, owner=owner, everything=all
            )
            return many.delete_many(self.store, chosen, force, audit)

    def trigger_many(
        self,
        *,
        names: Iterable[str] | None = None,
        owner: str | None = None,
        match: str | None = None,
        all: bool = False,
        actor: str | None = None,
    ) -> BulkResult:
        """Run the entries ``names``, or of ``owner``, or whose name matches the glob
        ``match``, or with ``all=True`` every entry, now (exactly one selector), as
        :meth:`trigger` runs one: over one broker connection, their runs recorded in
        pipelines (and in each entry's audit trail, by ``actor``).

        Returns:
            The names run (a list), with each run's task id in its ``task_ids``; in its
            ``skipped`` the quarantined entries and those whose message cannot be encoded.

        Raises:
            EntryError: not exactly one selector, or an empty or malformed ``names``.
            EntryNotFoundError: the selector names no entry, or ``names`` one that does
                not exist (nothing is sent).
            BrokerUnavailableError: the broker failed; the message says how many runs
                were sent before it did (those are recorded).
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            chosen = pauses.select(
                self.store, names=names, match=match, owner=owner, everything=all
            )
            return many.trigger_many(self.runtime, chosen, audit)

    def trigger(self, name: str, *, actor: str | None = None) -> str:
        """Run an entry now, outside its schedule; the worker's overlap guard still applies.

        Returns:
            The task id of the run.

        Raises:
            EntryNotFoundError: no entry has that name.
            BrokerUnavailableError: the broker could not be reached, or refused the run.
            MessageError: the run's message cannot be encoded here (its serializer or
                compression is not installed, or it refused the arguments).
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            return steer.trigger(self.runtime, name, audit)

    def add_many(self, entries: Iterable[dict[str, Any]], *, actor: str | None = None) -> list[str]:
        """Create many runtime entries at once, in pipelined batches (one Lua call per
        partition per ``periodiq_batch_size``); beats pick them up within a second.

        Args:
            entries: one dict per entry: ``name``, ``task`` and the keyword options of
                :meth:`add` (``schedule=`` too).

        Returns:
            The names created, in order.

        Raises:
            EntryError: any entry is invalid (an unknown option is named), a name is
                given twice, or a one-off entry's instant has passed; the message lists
                every bad one (up to ten) by position, and nothing is written.
            EntryExistsError: an entry of that name exists already (nothing is written).
        """
        audit = audit_of(self, actor)
        built = bulk.build_many(self.runtime, entries)
        with self.runtime.guard():
            created = bulk.add_many(self.store, built, audit)
        for task in sorted({entry.task for entry in built}):
            steer.warn_unknown_task(self.app, task, self._unknown_tasks_seen)
        return created


NOTE_MOST = 1000
"""The longest note a pause keeps (characters): it is stored with each entry paused."""


def _check_note(note: object) -> None:
    if note is not None and not isinstance(note, str):
        raise EntryError(f"note={shown(note)} is invalid (allowed: text)")
    if note is not None and len(note) > NOTE_MOST:
        raise EntryError(
            f"note={shown(note)} is too long (allowed: at most {NOTE_MOST:,} characters)"
        )
