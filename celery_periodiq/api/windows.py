"""The part of the runtime API for maintenance windows: add, list and remove windows in
which the ticks of the whole schedule, an owner's entries or one entry are skipped or
deferred (:mod:`celery_periodiq.ops.windows`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from celery_periodiq.api.base import Client, audit_of
from celery_periodiq.model.windows import Window
from celery_periodiq.ops import windows

__all__ = ["Windows"]


class Windows(Client, Protocol):
    """Maintenance windows."""

    def add_window(
        self,
        window_id: str,
        *,
        scope: str = "all",
        policy: str = "skip",
        schedule: str | float | timedelta | None = None,
        duration: float | timedelta | str | None = None,
        start: datetime | str | None = None,
        end: datetime | str | None = None,
        tz: str = "UTC",
        note: str | None = None,
        replace: bool = False,
        actor: str | None = None,
    ) -> Window:
        """Add a maintenance window: recurring (``schedule`` and ``duration``) or one-off
        (``start`` and ``end``). Every beat applies it within a second.

        Args:
            window_id: its name (letters, digits, ``_.:@/-``).
            scope: ``"all"`` (every entry), ``"owner:TAG"`` or ``"entry:NAME"``.
            policy: ``"skip"``: a tick inside is not run (recorded as
                ``skipped_window``); ``"defer"``: ticks inside are recorded as
                ``deferred`` and one catch-up run goes at the window's end, standing for
                them (as ``catchup="last"`` does), unless the entry's next tick comes
                less than half an interval later, which then stands for them.
            schedule: when a recurring window opens: any schedule form (a cron
                expression, a calendar event, a macro, ``"@every 6h"``, seconds), read
                in ``tz`` (DST as for entries).
            duration: how long each opening lasts (real time): a timedelta, seconds,
                ``"2h"``.
            start: a one-off window's start (aware datetime or ISO 8601 with an
                offset); for a recurring one, no opening before it.
            end: a one-off window's end; for a recurring one, no opening after it.
            tz: the IANA zone ``schedule`` is read in.
            note: why (shown by ``window list``).
            replace: change the window of that id if there is one.
            actor: who makes the change, as the windows' audit trail records it (the
                entries' trail: see :meth:`audit`); None: this client's.

        Raises:
            WindowError: a part is invalid (the message names it), the end is past, or
                the id is taken: nothing is written.
            EntryNotFoundError: ``scope`` names an entry that does not exist.
            EntryError: ``actor`` is invalid: nothing is written.
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            return windows.add_window(
                self.store,
                window_id,
                replace=replace,
                audit=audit,
                scope=scope,
                policy=policy,
                schedule=schedule,
                duration=duration,
                start=start,
                end=end,
                tz=tz,
                note=note,
            )

    def windows(self) -> list[Window]:
        """Every maintenance window, by id."""
        with self.runtime.guard():
            return windows.list_windows(self.store)

    def remove_window(self, window_id: str, *, actor: str | None = None) -> None:
        """Remove a maintenance window; every beat stops applying it within a second
        (ticks it deferred then follow the entry's catch-up policy). ``actor``: as for
        :meth:`add_window`.

        Raises:
            WindowError: no window has that id.
            EntryError: ``actor`` is invalid: nothing is removed.
        """
        audit = audit_of(self, actor)
        with self.runtime.guard():
            windows.remove_window(self.store, window_id, audit)
