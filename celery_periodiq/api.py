"""The runtime API: ``periodiq(app)`` creates, changes, pauses, triggers, inspects
and deletes entries while everything runs. The CLI is a thin layer over it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from kombu.exceptions import KombuError

from celery_periodiq.beat.publish import send
from celery_periodiq.config import Settings
from celery_periodiq.declare import registry
from celery_periodiq.errors import (
    BrokerUnavailableError,
    DeclaredEntryError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PeriodiqError,
    SimulationError,
    shown,
)
from celery_periodiq.model import policy
from celery_periodiq.model.build import (
    EntryBuilder,
    build_entry,
    changed_entry,
    refuse_past,
    task_name,
)
from celery_periodiq.model.entry import AUTO, Entry
from celery_periodiq.model.plan import from_ms, next_tick, to_ms
from celery_periodiq.model.policy import Defaults
from celery_periodiq.model.simulate import (
    DEFAULT_LIMIT,
    MOST_LIMIT,
    MOST_LISTED,
    EntrySimulation,
    Simulation,
    check_range,
    simulate_entry,
)
from celery_periodiq.model.simulate import Settings as PlanSettings
from celery_periodiq.ops import backfill as backfills
from celery_periodiq.ops import doctor, import_redbeat, transfer
from celery_periodiq.ops.doctor import Check
from celery_periodiq.runtime import Runtime, runtime_of
from celery_periodiq.store.checkpoint import Checkpoint
from celery_periodiq.store.store import BeatInfo, Event, Store, StoredEntry

__all__ = ["FAILURE_KINDS", "Check", "Periodiq", "periodiq"]

FAILURE_KINDS = frozenset({"failed", "timeboxed"})
_CLIENT_ATTRIBUTE = "_periodiq_client"

logger = logging.getLogger("celery_periodiq.api")


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


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise EntryError(f"entry name {shown(name)} is invalid (allowed: a non-empty string)")
    return name


def _check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        raise EntryError(f"owner={shown(owner)} is invalid (allowed: a non-empty string)")
    return owner


def _steered(name: str, status: str) -> None:
    """Raise for what pause.lua answered instead of "ok"."""
    if status == "missing":
        raise EntryNotFoundError(f"no entry named {shown(name)}")
    if status != "ok":
        raise EntryError(
            f"entry {shown(name)} is {status.replace(': ', ' (', 1)}); update or delete repairs it"
        )


def _some_names(names: list[str], shown_at_most: int = 5) -> str:
    more = len(names) - shown_at_most
    return ", ".join(map(shown, names[:shown_at_most])) + (f" and {more} more" if more > 0 else "")


def _check_count(what: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PeriodiqError(f"{what}={shown(value)} is invalid (allowed: a whole number >= {low})")
    return value


def _with_schedule(options: dict[str, Any], app: Celery) -> dict[str, Any]:
    """``options`` with a ``schedule=`` object turned into the options that mean the same
    (``cron=``/``every=``/``calendar=``/``at=``, and its zone and bounds where it has them)."""
    value = options.pop("schedule", None)
    if value is None:
        return options
    if any(options.get(key) is not None for key in ("cron", "every", "calendar", "at")):
        raise EntryError("give schedule= or one of cron=, every=, calendar=, at=, not both")
    converted = {key: item for key, item in registry.schedule_options(value, app).items()
                 if item is not None}  # fmt: skip
    if options.get("tz") not in (None, "UTC"):
        converted.pop("tz", None)  # a zone given with it wins
    return {**options, **converted}


def _simulated(
    item: StoredEntry,
    start: datetime,
    end: datetime,
    down: tuple[datetime, datetime] | None,
    settings: PlanSettings,
    from_stored: bool,
    limit: int,
) -> EntrySimulation:
    """One stored entry's simulation, or why nothing of it fires."""
    entry, state = item.entry, item.status
    if entry is None or item.invalid:
        tz = "UTC" if entry is None else entry.tz
        schedule = None if entry is None else entry.schedule
        return EntrySimulation(item.name, state, tz, schedule, "none",
                               f"quarantined: {item.invalid}")  # fmt: skip
    idle = None
    if item.paused:
        note = f" (note: {item.note})" if item.note else ""
        idle = f"paused until resumed{note}"
    elif not entry.enabled:
        idle = "disabled: it never fires"
    elif from_stored and state == "ended":
        idle = "ended: it has no next tick"
    if idle is not None:
        return EntrySimulation(item.name, state, entry.tz, entry.schedule, "none", idle)
    first = None
    stored_next = item.state.get("next", "")
    if from_stored and stored_next.isdigit():
        nominal = from_ms(int(stored_next))
        first = (nominal, item.due or nominal)
    return simulate_entry(
        entry, state=state, start=start, end=end, down=down, settings=settings, first=first,
        limit=limit, runs=item.runs,
    )  # fmt: skip


class Periodiq:
    """Create, change and inspect the entries of one Celery app's schedule."""

    def __init__(self, app: Celery, store: Store | None = None) -> None:
        # The app's one Runtime, its Store shared with the worker and the operations; a
        # client made after the app's settings changed reads them afresh, as it always did.
        fresh = Settings.from_app(app)
        self.runtime = runtime_of(app, fresh) if store is None else Runtime(app, store, fresh)
        self.app, self.settings, self.store = app, self.runtime.settings, self.runtime.store
        self._unknown_tasks_seen: set[str] = set()

    def _guard(self) -> contextlib.AbstractContextManager[None]:
        """Redis errors as our errors; the schedule's layout checked on first use."""
        return self.runtime.guard()

    def _stored(self, name: str) -> StoredEntry:
        found = self.store.load([_check_name(name)])
        if not found:
            raise EntryNotFoundError(f"no entry named {shown(name)}")
        return found[0]

    def _readable(self, name: str) -> Entry:
        stored = self._stored(name)
        if stored.entry is None:
            raise EntryError(
                f"entry {shown(name)} is quarantined: {stored.invalid}; its definition cannot be "
                "read, so delete it (and add it again, or let the next deploy restore it)"
            )
        return stored.entry

    def _may_change(self, name: str, entry: Entry | None, force: bool, verb: str) -> None:
        where = self._declared_in(name, entry)
        if where is not None and not force:
            raise DeclaredEntryError(
                f"entry {shown(name)} is declared in {where}: the next deploy (a beat starting) "
                f"restores its declaration; to {verb} it anyway pass force=True (--force)"
            )

    def _declared_in(self, name: str, entry: Entry | None) -> str | None:
        if entry is None:
            return "code or beat_schedule" if self.store.is_declared(name) else None
        return {"code": "code", "config": "beat_schedule"}.get(entry.source)

    def declared_in(self, name: str) -> str | None:
        """Where the entry is declared (``"code"``, ``"beat_schedule"``), or None for a
        runtime entry: a declared entry's definition belongs to the deploy, which
        restores it when a beat starts.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self._guard():
            return self._declared_in(name, self._stored(name).entry)

    def _check_task(self, task: str) -> None:
        """Log once per task name when the app does not know it (a typo, or a task that
        only the workers' code defines)."""
        if task in self._unknown_tasks_seen:
            return
        try:
            known = task in self.app.tasks
        except Exception:  # an app that cannot finalize here: nothing to compare with
            return
        if not known:
            self._unknown_tasks_seen.add(task)
            logger.warning(
                "periodiq: task %r is not registered in app %r: check its name, or that the "
                "workers' code defines it (runs of an unknown task fail on the worker)",
                task,
                self.app.main,
            )

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
        given = _with_schedule(
            {"cron": cron, "every": every, "calendar": calendar, "at": at, "tz": tz,
             "start_at": start_at, "end_at": end_at, "schedule": schedule}, self.app,
        )  # fmt: skip
        cron, every, calendar, tz = given["cron"], given["every"], given["calendar"], given["tz"]
        start_at, end_at, at = given["start_at"], given["end_at"], given["at"]
        entry = build_entry(
            _check_name(name),
            task_name(task),
            cron=cron, every=every, calendar=calendar, at=at, args=args, kwargs=kwargs,
            options=options, tz=tz, owner=owner, tolerance=tolerance, timebox=timebox,
            grace=grace, overlap=overlap, catchup=catchup, catchup_window=catchup_window,
            expires=expires,
            jitter=jitter, start_at=start_at, end_at=end_at, enabled=enabled, source="runtime",
            defaults=Defaults.of(self.settings), alert_after=alert_after,
            failure_threshold=failure_threshold, pause_on_failure=pause_on_failure,
            max_runs=max_runs,
        )  # fmt: skip
        with self._guard():
            refuse_past(entry, from_ms(self.store.now_ms()))
            (status,) = self.store.put("add", [entry])
            if status == "exists":
                raise EntryExistsError(f"an entry named {shown(name)} already exists")
            stored = self._stored(name)
        self._check_task(entry.task)
        return stored

    def get(self, name: str) -> StoredEntry:
        """One entry with its state.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self._guard():
            return self._stored(name)

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
        with self._guard():
            current = self._readable(name)
            self._may_change(name, current, force, "update")
            changes = _with_schedule(dict(changes), self.app)
            entry = changed_entry(current, dict(changes))
            if changes.get("at") is not None:  # a one-off kept as it was may well be past
                refuse_past(entry, from_ms(self.store.now_ms()))
            (status,) = self.store.put("update", [entry])
            if status == "missing":
                raise EntryNotFoundError(f"no entry named {shown(name)}")
            return self._stored(name)

    def delete(self, name: str, *, force: bool = False) -> None:
        """Delete an entry and its state and history.

        Works on a damaged entry too (keys of the wrong type, an unreadable or
        missing definition): everything stored under its name is removed.

        Raises:
            EntryNotFoundError: no entry has that name.
            DeclaredEntryError: the entry is declared in code or beat_schedule and
                ``force`` is not set (the next deploy would restore it).
        """
        with self._guard():
            found = self.store.load([_check_name(name)])
            self._may_change(name, found[0].entry if found else None, force, "delete")
            if not self.store.remove([name]):
                raise EntryNotFoundError(f"no entry named {shown(name)}")

    def delete_owner(self, owner: str) -> list[str]:
        """Delete every entry tagged with ``owner``; returns their names."""
        _check_owner(owner)
        with self._guard():
            return self.store.remove(self.store.owned_by(owner))

    def pause(self, name: str, note: str | None = None) -> StoredEntry:
        """Stop an entry's ticks until :meth:`resume`; ``note`` says why."""
        if note is not None and not isinstance(note, str):
            raise EntryError(f"note={shown(note)} is invalid (allowed: text)")
        with self._guard():
            _steered(name, self.store.scripts.pause(_check_name(name), note or ""))
            return self._stored(name)

    def resume(self, name: str) -> StoredEntry:
        """Restart a paused entry from its next tick after now."""
        with self._guard():
            entry = self._readable(name)
            now = from_ms(self.store.now_ms())
            upcoming = next_tick(entry, entry.parsed_schedule(), now) if entry.enabled else None
            next_ms = None if upcoming is None else to_ms(upcoming[0])
            due_ms = None if upcoming is None else to_ms(upcoming[1])
            _steered(name, self.store.scripts.resume(name, next_ms, due_ms))
            return self._stored(name)

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
        with self._guard():
            entry = self._readable(name)
            now = from_ms(self.store.now_ms())
            limits = policy.now_limits(entry, now, self.settings.default_grace)
            task_id = send(self.app, entry, None, manual=limits)
            self.store.published(name, "triggered", task_id)
            return task_id

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

        Raises:
            EntryNotFoundError: no entry has that name.
            EntryError: a bad range, overlap or timeout, or more than
                ``BACKFILL_MOST`` ticks in the range (nothing is published).
            BrokerUnavailableError: the broker could not be reached.
        """
        with self._guard():
            entry = self._readable(name)
            try:
                return backfills.backfill(
                    self, entry, start, end, overlap=overlap, dry_run=dry_run,
                    timeout=timeout, progress=progress,
                )  # fmt: skip
            except (KombuError, OSError) as error:
                raise BrokerUnavailableError(f"the broker is unreachable: {error}") from error

    def history(self, name: str, *, limit: int = 20, failures_only: bool = False) -> list[Event]:
        """An entry's newest events, newest first (only failures with ``failures_only``)."""
        _check_count("limit", limit)
        with self._guard():
            self._stored(name)
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
        _check_count("n", n, low=0)
        with self._guard():
            entry = self._readable(name)
            start = from_ms(self.store.now_ms()) if after is None else after
            return entry.parsed_schedule().upcoming(start, n)

    def now(self) -> datetime:
        """The Redis server clock (UTC), which every scheduling decision uses."""
        with self._guard():
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
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MOST_LIMIT:
            raise SimulationError(
                f"limit={shown(limit)} is invalid (allowed: a whole number from 0 to {MOST_LIMIT})"
            )
        if owner is not None:
            _check_owner(owner)
        if names is not None:
            if not isinstance(names, list | tuple) or not names:
                raise EntryError(f"names={shown(names)} is invalid (allowed: a non-empty list)")
            names = list(dict.fromkeys(_check_name(name) for name in names))
        if start is not None:
            check_range(start, end, down)  # bad input fails before Redis is asked
        with self._guard():
            now = from_ms(self.store.now_ms())
            begin, finish, window = check_range(
                now if start is None else start, end, down, now=start is None
            )
            stored = self._chosen(owner, names)
        settings = PlanSettings(
            self.settings.key_prefix, self.settings.catchup_cap, self.settings.default_grace
        )
        simulated, listed = [], 0
        for item in sorted(stored, key=lambda item: item.name):
            room = min(limit, MOST_LISTED - listed)
            result = _simulated(item, begin, finish, window, settings, start is None, room)
            listed += len(result.fires)
            simulated.append(result)
        far = datetime.max.replace(tzinfo=now.tzinfo)
        simulated.sort(key=lambda item: (item.fires[0].sent if item.fires else far, item.name))
        return Simulation(begin, finish, window, start is None, limit, tuple(simulated))

    def _chosen(self, owner: str | None, names: list[str] | None) -> list[StoredEntry]:
        """The entries a simulation covers: ``names`` (every one must exist), those of
        ``owner``, or all."""
        if names is None:
            return self.store.load(None if owner is None else self.store.owned_by(owner))
        stored = self.store.load(names)
        missing = sorted(set(names) - {item.name for item in stored})
        if missing:
            noun = "entry named" if len(missing) == 1 else "entries named"
            raise EntryNotFoundError(f"no {noun} {_some_names(missing)}")
        if owner is not None:
            stored = [item for item in stored if item.entry and item.entry.owner == owner]
        return stored

    def has_checkpoint(self, name: str) -> bool:
        """Whether a run of the entry saved a checkpoint that the next run will resume from.

        Raises:
            EntryNotFoundError: no entry has that name.
        """
        with self._guard():
            self._stored(name)
            return Checkpoint(self.store, name).exists()

    def failures(self, *, limit: int = 20) -> list[tuple[str, Event]]:
        """The newest failed or timeboxed runs across all entries, newest first.

        Returns:
            ``(entry name, event)`` pairs; the event's ``fields["error"]`` holds
            ``"Type: message"`` (empty for a timeboxed run).
        """
        _check_count("limit", limit)
        found: list[tuple[str, Event]] = []
        with self._guard():
            for stored in self.store.load():
                if not any(stored.counters.get(kind) for kind in FAILURE_KINDS):
                    continue
                events = self.store.history(stored.name, limit, failures=True)
                found.extend((stored.name, event) for event in events)
        found.sort(key=lambda pair: (pair[1].at, pair[0]), reverse=True)
        return found[:limit]

    def diagnose(self) -> list[Check]:
        """Check what periodiq needs; never raises, every problem is a :class:`Check`
        (see :func:`celery_periodiq.ops.doctor.diagnose` for what is checked)."""
        return doctor.diagnose(self)

    def beats(self) -> list[BeatInfo]:
        """The live beat instances."""
        with self._guard():
            return self.store.beats()

    def _others(self, chosen: list[str], limit: int, names: list[str] | None) -> list[str]:
        """Up to ``limit - len(chosen)`` more names, not due (paused, ended, ...)."""
        taken, more = set(chosen), []
        pages = [names] if names is not None else self.store.scan()
        for page in pages:
            more += [name for name in page if name not in taken]
            if len(chosen) + len(more) >= limit:
                break
        return more[: limit - len(chosen)]

    def count(self, *, owner: str | None = None) -> int:
        """How many entries there are (with the ``owner`` tag, when given)."""
        with self._guard():
            if owner is None:
                return self.store.count()
            return len(self.store.owned_by(_check_owner(owner)))

    def pages(self, *, batch: int = 500) -> Iterator[list[StoredEntry]]:
        """Every entry, in pages of about ``batch``, in no particular order: a walk through
        a large schedule that never holds all of it in memory."""
        _check_count("batch", batch)
        with self._guard():
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
        with self._guard():
            return transfer.export_schedule(self, owner=owner, source=source, state=state)

    def import_schedule(
        self, document: Any, *, replace: bool = False, dry_run: bool = False
    ) -> transfer.ImportReport:
        """Create the entries of an :meth:`export` document (``replace``: also replace
        entries that exist with another definition); ``dry_run`` writes nothing.

        Raises:
            EntryError: any record is bad (each is named by position): nothing is written.
        """
        with self._guard():
            return transfer.import_schedule(self, document, replace=replace, dry_run=dry_run)

    def import_redbeat(
        self,
        *,
        url: str | None = None,
        key_prefix: str = import_redbeat.DEFAULT_PREFIX,
        replace: bool = False,
        dry_run: bool = False,
        skip_invalid: bool = False,
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
        read = import_redbeat.read_redbeat(self.app, url=url, key_prefix=key_prefix)
        with self._guard():
            return transfer.import_converted(
                self, read.document, read.problems, notes=read.notes, replace=replace,
                dry_run=dry_run, skip_invalid=skip_invalid,
            )  # fmt: skip

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
        from celery_periodiq.ops.import_django import django_document

        document, problems, notes = django_document(dump, self.app, naive_tz=naive_tz)
        with self._guard():
            return transfer.import_converted(
                self, document, problems, notes=notes, replace=replace, dry_run=dry_run,
                skip_invalid=skip_invalid,
            )  # fmt: skip

    def add_many(self, entries: Iterable[dict[str, Any]]) -> list[str]:
        """Create many runtime entries at once, in pipelined batches (one Lua call per
        partition per ``periodiq_batch_size``); beats pick them up within a second.

        Args:
            entries: one dict per entry: ``name``, ``task`` and the keyword options of
                :meth:`add`.

        Returns:
            The names created, in order.

        Raises:
            EntryError: any entry is invalid, or a name is given twice; the message
                lists every bad one (up to ten) by position, and nothing is written.
            EntryExistsError: an entry of that name exists already (nothing is written).
        """
        built, problems = [], []
        builder = EntryBuilder(source="runtime", defaults=Defaults.of(self.settings))
        for position, options in enumerate(entries):
            try:
                if not isinstance(options, dict):
                    raise EntryError(f"{shown(options)} is not a dict of options")
                given = dict(options)
                name, task = given.pop("name", None), given.pop("task", None)
                built.append(builder.build(_check_name(name), task_name(task), given))
            except (EntryError, TypeError) as error:
                problems.append(f"#{position}: {error}")
        names = [entry.name for entry in built]
        twice = sorted(name for name, count in collections.Counter(names).items() if count > 1)
        problems += [f"name {shown(name)} is given twice" for name in twice[:10]]
        if problems:
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise EntryError(f"{len(problems)} bad entries, nothing written: "
                             + "; ".join(problems[:10]) + more)  # fmt: skip
        with self._guard():
            if any(entry.form == "at" for entry in built):
                now = from_ms(self.store.now_ms())
                past = []
                for position, entry in enumerate(built):
                    try:
                        refuse_past(entry, now)
                    except EntryError as error:
                        past.append(f"#{position}: {error}")
                if past:
                    raise EntryError(f"{len(past)} bad entries, nothing written: "
                                     + "; ".join(past[:10]))  # fmt: skip
            taken = self.store.existing(names)
            if taken:
                raise EntryExistsError(f"entries exist already: {_some_names(taken)}")
            statuses = self.store.put("add", built)
        for task in sorted({entry.task for entry in built}):
            self._check_task(task)
        return [name for name, status in zip(names, statuses, strict=True) if status == "created"]

    # Last in the class: below this line ``list`` names the method, not the builtin.
    def list(self, *, owner: str | None = None, limit: int | None = None) -> list[StoredEntry]:
        """Every entry (or those of ``owner``), soonest next run first.

        With ``limit``, only that many are read from Redis: those due soonest, then
        (when fewer are due) others in no particular order; :meth:`count` says how many
        there are in all, :meth:`entries` walks through all of them page by page.
        """
        if limit is not None:
            _check_count("limit", limit)
        with self._guard():
            names = None if owner is None else self.store.owned_by(_check_owner(owner))
            if limit is None:
                stored = self.store.load(names)
            else:
                chosen = self.store.soonest(limit, names)
                if len(chosen) < limit:
                    chosen += self._others(chosen, limit, names)
                stored = self.store.load(chosen)
        far = datetime.max.replace(tzinfo=from_ms(0).tzinfo)
        return sorted(stored, key=lambda item: (item.next_run or far, item.name))
