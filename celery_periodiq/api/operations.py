"""The part of the runtime API that works on the schedule as a whole: backfill an
entry's past ticks, simulate what the beats would publish, check the setup, export,
import, and bring a schedule over from celery-redbeat or django-celery-beat (each an
operation of :mod:`celery_periodiq.ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TextIO

from celery_periodiq.api.base import Client, audit_of
from celery_periodiq.model.simulation import DEFAULT_LIMIT, Simulation
from celery_periodiq.ops import backfill as backfills
from celery_periodiq.ops import doctor, export_file, migrate, simulation, steer, transfer
from celery_periodiq.ops.doctor import Check
from celery_periodiq.ops.import_redbeat import DEFAULT_PREFIX as REDBEAT_PREFIX
from celery_periodiq.store import summary

__all__ = ["Operations"]


class Operations(Client, Protocol):
    """Backfill, simulate, diagnose, export and import."""

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
        actor: str | None = None,
    ) -> backfills.BackfillReport:
        """Run the entry's past ticks in ``[start, end)`` now, each with its nominal instant.

        A tick whose run began before is skipped (and reported as ``already ran``); the
        others run guarded like scheduled runs, except for the tolerance drop.

        Args:
            name: the entry.
            start: the first instant of the range (aware).
            end: the end of the range, itself excluded (aware; not after now).
            overlap: ``"buffer_all"`` runs the ticks one after another, waiting for each
                run to end (this call returns when the last one ended);
                ``"allow"`` publishes them all at once and returns.
            dry_run: publish nothing; the report says what would run.
            timeout: ``buffer_all``: seconds to wait for a worker to begin each run
                before stopping (``report.stalled`` says why; the same call again goes
                on from there).
            progress: called with each tick as it is settled.
            actor: who runs the backfill, as the entry's audit trail records it (before
                the first tick is sent; a dry run records nothing).

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: a bad range, overlap or timeout, or more than
                ``BACKFILL_MOST`` ticks in the range (nothing is published).
            MessageError: the entry's message cannot be built or encoded here (a
                serializer or compression not installed, arguments its encoder refuses;
                nothing is published).
            BrokerUnavailableError: the broker could not be reached.
        """
        audit = audit_of(self, actor)
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
                audit=audit,
            )

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

        Args:
            start: an aware datetime; None: now (the Redis clock), continuing from each
                entry's stored next tick (an entry already overdue, because no beat
                runs, is claimed at once). Given, each entry starts from its
                definition: its first tick due at or after ``start``.
            end: an aware datetime after ``start`` (at most 366 days); default
                ``start`` + 24 hours. A tick is in the span when a beat claims it at
                or after ``start`` and before ``end``.
            down: ``(from, to)``: the beats are down from ``from`` until ``to``, both
                inside the span (``to`` may be ``end``: the catch-up at ``to`` is shown).
                With ``start`` None, a window that began in the past counts from now:
                the stored state already holds what the beats missed until now.
            owner: only entries with this owner tag.
            names: only these entries.
            limit: fires listed per entry (0-100000); the others are counted.

        Raises:
            SimulationError: the span, window or limit is invalid.
            EntryNotFoundError: a name in ``names`` is no entry.
        """
        return simulation.simulate(
            self.runtime, start=start, end=end, down=down, owner=owner, names=names, limit=limit
        )

    def diagnose(self, *, sample: int | None = doctor.DEFAULT_SAMPLE) -> list[Check]:
        """Check what periodiq needs; every problem is a :class:`Check` (see
        :func:`celery_periodiq.ops.doctor.diagnose` for what is checked).

        Args:
            sample: read every entry when the schedule holds at most this many, else
                every one a beat quarantined and about this many others drawn at random
                (the checks of the entries say so); None reads every entry.

        Raises:
            PeriodiqError: ``sample`` is not a whole number >= 1 (nothing else raises).
        """
        if sample is not None:
            steer.check_count("sample", sample)
        return doctor.diagnose(self.runtime, sample)

    def reindex(self) -> int:
        """Build the read side's indexes afresh from every entry (what a scrape, the
        dashboard and :meth:`page` read; the scripts keep them, so this is a repair:
        ``doctor`` says when one is needed), the audit trails' index (what :meth:`audit`
        without a name reads; trails written by 0.1.0 lack it) and the timed pauses'
        index (what the beats end pauses from). Atomic per partition; it blocks the
        partition's Redis while it reads the partition's entries. Returns how many
        entries were indexed."""
        with self.runtime.guard():
            return summary.reindex(self.store)

    def export(
        self, *, owner: str | None = None, source: str | None = None, state: bool = True
    ) -> dict[str, Any]:
        """The entries (of ``owner``, from ``source``: runtime, code or config) as one
        versioned JSON document, with their pause state, last run and checkpoint unless
        ``state`` is False (see :mod:`celery_periodiq.ops.transfer`)."""
        with self.runtime.guard():
            return transfer.export_schedule(self.store, owner=owner, source=source, state=state)

    def export_to(
        self,
        out: TextIO,
        *,
        layout: str = "json",
        owner: str | None = None,
        source: str | None = None,
        state: bool = True,
    ) -> int:
        """Write what :meth:`export` returns to ``out`` as it is read, a page of entries
        at a time, so that memory stays flat at any size; entries come in the order Redis
        scans them, not by name. ``layout``: ``json`` (the document, laid out as
        ``json.dumps(indent=2)`` would) or ``jsonl`` (JSON Lines: a header line, one
        entry a line, a closing line ``{"count": N}``); :meth:`import_file` reads both.

        Returns:
            How many entries were written.

        Raises:
            EntryError: ``layout``, ``owner`` or ``source`` is invalid (nothing written).
        """
        with self.runtime.guard():
            records = transfer.export_records(self.store, owner=owner, source=source, state=state)
            whole = owner is None and source is None  # the windows belong to the whole
            header = transfer.export_header(self.store if whole else None)
            return export_file.write_export(out, header, records, layout)

    def import_file(
        self,
        file: TextIO,
        *,
        replace: bool = False,
        dry_run: bool = False,
        actor: str | None = None,
    ) -> transfer.ImportReport:
        """:meth:`import_schedule` of a file :meth:`export_to` wrote (either layout) or
        ``celery periodiq export`` printed.

        Raises:
            EntryError: the file is not an export (not JSON, a JSON Lines file cut short:
                the message says what and where), or as :meth:`import_schedule`.
        """
        note = f"imported from {getattr(file, 'name', None) or 'a file'}"
        audit = audit_of(self, actor, note)
        document = export_file.read_export(file)
        with self.runtime.guard():
            return transfer.import_schedule(
                self.store, document, replace=replace, dry_run=dry_run, audit=audit
            )

    def import_schedule(
        self,
        document: Any,
        *,
        replace: bool = False,
        dry_run: bool = False,
        actor: str | None = None,
    ) -> transfer.ImportReport:
        """Create the entries of an :meth:`export` document (``replace``: also replace
        entries that exist with another definition); ``dry_run`` writes nothing. Each
        entry written is recorded in its audit trail by ``actor``, noted as imported.

        Raises:
            EntryError: any record is bad (each is named by position), or ``actor`` is not
                text: nothing is written.
        """
        audit = audit_of(self, actor, "imported")
        with self.runtime.guard():
            return transfer.import_schedule(
                self.store, document, replace=replace, dry_run=dry_run, audit=audit
            )

    def import_redbeat(
        self,
        *,
        url: str | None = None,
        key_prefix: str = REDBEAT_PREFIX,
        replace: bool = False,
        dry_run: bool = False,
        skip_invalid: bool = False,
        actor: str | None = None,
    ) -> transfer.ImportReport:
        """Bring celery-redbeat's entries over, read straight from its Redis: each becomes
        a runtime entry of the same name (see :mod:`celery_periodiq.ops.import_redbeat`).

        Args:
            url: RedBeat's Redis; default the app's ``redbeat_redis_url``, else its broker.
            key_prefix: RedBeat's ``redbeat_key_prefix``.
            replace: also replace entries that exist with another definition.
            dry_run: say what would change; write nothing.
            skip_invalid: import what converts; the records that do not are listed in
                the report's ``skipped``. Options dropped and entries left out (declared
                in this app's ``beat_schedule``) are listed in its ``notes``.

        Raises:
            EntryError: records cannot be converted (each named by its Redis key, unless
                ``skip_invalid``), or an entry exists with another definition; nothing
                is written.
            ConfigurationError: no URL for RedBeat's Redis, or an invalid one.
            StoreUnavailableError: RedBeat's Redis (or ours) is unreachable.
        """
        audit = audit_of(self, actor, "imported from celery-redbeat")
        return migrate.import_from_redbeat(
            self.runtime,
            url=url,
            key_prefix=key_prefix,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            audit=audit,
        )

    def import_django_celery_beat(
        self,
        dump: Any,
        *,
        replace: bool = False,
        dry_run: bool = False,
        skip_invalid: bool = False,
        naive_tz: str | None = None,
        actor: str | None = None,
    ) -> transfer.ImportReport:
        """Create an entry for every ``PeriodicTask`` of a django-celery-beat dump (the
        parsed JSON of ``manage.py dumpdata django_celery_beat``); see
        :mod:`celery_periodiq.ops.import_django` for what each field becomes.

        Args:
            dump: the parsed JSON of the dump.
            replace: also replace entries that exist with another definition.
            dry_run: check and convert everything, write nothing.
            skip_invalid: import the tasks that convert, and list the others in the
                report's ``skipped`` instead of refusing the whole dump.
            naive_tz: the zone of naive datetimes (a dump made with ``USE_TZ=False``:
                Django's ``TIME_ZONE``); default the app's ``timezone``.

        Returns:
            What was (with ``dry_run``: would be) created, replaced, left unchanged or
            skipped, and ``notes`` on what the converted tasks lost or how they were read.

        Raises:
            EntryError: the dump is not a list, or any record cannot be converted and
                ``skip_invalid`` is not set (each is named, nothing is written), or an
                entry exists with another definition and ``replace`` is not set.
        """
        audit = audit_of(self, actor, "imported from django-celery-beat")
        return migrate.import_from_django(
            self.runtime,
            dump,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            naive_tz=naive_tz,
            audit=audit,
        )
