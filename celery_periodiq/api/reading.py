"""The part of the runtime API that reads: entries one at a time or page by page, their
history, failures and upcoming ticks, the live beats and the Redis clock (through
:mod:`celery_periodiq.ops.steer`, :mod:`celery_periodiq.ops.listing` and the Store,
inside the Runtime's guard).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Protocol

from celery_periodiq.api.base import Client
from celery_periodiq.model.plan import from_ms
from celery_periodiq.model.window_plan import upcoming_runs
from celery_periodiq.ops import audit, listing, steer
from celery_periodiq.ops.windows import list_windows, windows_of
from celery_periodiq.protocol.audit import AuditRecord
from celery_periodiq.schedules.base import require_aware
from celery_periodiq.store import pages as paging
from celery_periodiq.store import walk
from celery_periodiq.store.checkpoint import Checkpoint
from celery_periodiq.store.pages import EntryPage
from celery_periodiq.store.views import BeatInfo, Event, StoredEntry

__all__ = ["Reading"]


class Reading(Client, Protocol):
    """Read entries, their history and failures, the beats and the clock."""

    def declared_in(self, name: str) -> str | None:
        """Where the entry is declared (``"code"``, ``"beat_schedule"``), or None for a
        runtime entry: a declared entry's definition belongs to the deploy, which
        restores it when a beat starts.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self.runtime.guard():
            return steer.declared_in(self.store, name, steer.stored(self.store, name).entry)

    def audit(
        self,
        name: str | None = None,
        *,
        since: datetime | timedelta | float | str | None = None,
        actor: str | None = None,
        limit: int | None = 100,
    ) -> list[AuditRecord]:
        """Who changed what: the audit records of an entry (None: of every entry), newest
        first. Each change to an entry (add, update with what changed, delete, pause and
        resume with their note, trigger, backfill, reconcile, import, a quarantine) is
        recorded by the script that makes it, with who, when (the Redis clock) and why.
        A deleted entry's records stay until ``periodiq_audit_window`` has passed.

        Args:
            name: the entry (deleted ones too); None: every entry.
            since: only records at or after this: an aware datetime (or ISO 8601 text with
                an offset), a duration back from now (a timedelta, ``"2h"``, ``"7d"``) or
                seconds back from now.
            actor: only records whose actor contains this text.
            limit: the most records returned (None: all).

        Raises:
            EntryError: ``name``, ``since``, ``actor`` or ``limit`` is invalid.
        """
        with self.runtime.guard():
            return audit.audit_records(self.store, name, since=since, actor=actor, limit=limit)

    def history(self, name: str, *, limit: int = 20, failures_only: bool = False) -> list[Event]:
        """An entry's newest events, newest first (only failures with ``failures_only``)."""
        steer.check_count("limit", limit)
        with self.runtime.guard():
            steer.stored(self.store, name)
            return self.store.history(name, limit, failures=failures_only)

    def upcoming(self, name: str, n: int = 10, *, after: datetime | None = None) -> list[datetime]:
        """The next ``n`` fire instants of an entry (in its time zone), its maintenance
        windows and excluded dates honoured: a tick a ``skip`` window or an excluded date
        holds is left out, the ticks a ``defer`` window holds make one run at its end.

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
            held = windows_of(list_windows(self.store), entry)
            return upcoming_runs(entry, held, require_aware(start, "after"), n)

    def now(self) -> datetime:
        """The Redis server clock (UTC), which every scheduling decision uses."""
        with self.runtime.guard():
            return from_ms(self.store.now_ms())

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

    def beats(self) -> list[BeatInfo]:
        """The live beat instances."""
        with self.runtime.guard():
            return self.store.beats()

    def count(self, *, owner: str | None = None) -> int:
        """How many entries there are (with the ``owner`` tag, when given)."""
        with self.runtime.guard():
            if owner is None:
                return self.store.count()
            return walk.owned_count(self.store, steer.check_owner(owner))

    def pages(self, *, batch: int = 500, owner: str | None = None) -> Iterator[list[StoredEntry]]:
        """Every entry (or those of ``owner``), in pages of about ``batch``, in no
        particular order (the order Redis scans them): a walk through a large schedule
        that never holds all of it in memory."""
        steer.check_count("batch", batch)
        if owner is not None:
            steer.check_owner(owner)
        with self.runtime.guard():
            yield from listing.pages(self.store, owner, batch)

    def page(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        q: str | None = None,
        state: str | None = None,
        alert: str | None = None,
        owner: str | None = None,
        sort: str | None = None,
    ) -> EntryPage:
        """One page of the entries, by name or by next run, searched and filtered over
        the whole schedule; each page costs about ``limit`` entries read, whatever the
        schedule's size. Go on with the page's ``next`` (or back with ``previous``) as
        ``cursor``.

        Args:
            limit: how many entries at most, 1 to 1000.
            cursor: the ``next`` or ``previous`` of a page; without it, the first page.
            q: names that contain this text (any case); ``text*``: names that start
                with ``text``. A search answers whole when at most 20,000 names
                match; a broader one looks at up to 100,000 names, or for 0.2 s, per
                page: when it stops before the page is full, ``searched`` says how
                far it went, and ``next`` goes on from there.
            state: ``active``, ``running``, ``paused``, ``disabled``, ``ended`` or
                ``quarantined``.
            alert: ``overdue`` or ``failing``.
            owner: only the entries with this owner tag.
            sort: ``name``, or ``next`` (soonest next run first, then the entries with
                no next run by name); default the cursor's order, or ``name``.

        Returns:
            The page: its entries, the ``next`` and ``previous`` cursors (None at an
            end), the schedule's ``total``, and how many entries ``matched`` when that
            is known.

        Raises:
            PageError: a value is invalid (a cursor that is not one of a page's, a
                limit out of range, an unknown state, alert or sort).
        """
        with self.runtime.guard():
            return paging.page(
                self.store,
                limit=limit,
                cursor=cursor,
                q=q,
                state=state,
                alert=alert,
                owner=owner,
                sort=sort,
            )

    def entries(self, *, batch: int = 500, owner: str | None = None) -> Iterator[StoredEntry]:
        """Every entry (or those of ``owner``), one at a time, read a page of ``batch`` at
        a time (:meth:`pages`)."""
        for page in self.pages(batch=batch, owner=owner):
            yield from page

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
