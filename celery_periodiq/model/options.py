"""The vocabulary of an entry's options: each named once here, typed, with its default.

``@periodic``, ``Periodiq.add``/``update``/``add_many``,
:func:`~celery_periodiq.model.build.build_entry` and the CLI's ``add``/``update`` spell
their options out, so that ``help()``, IDEs and ``--help`` show them;
``tests/test_vocabulary.py`` fails when one of them drifts from :class:`EntryOptions`
(a name, a type or a default). The policy defaults are :mod:`~celery_periodiq.model.policy`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from celery_periodiq.model.policy import AUTO, DEFAULT_FAILURE_THRESHOLD

__all__ = [
    "DEFAULTS",
    "NAMES",
    "OPTION_KEYS",
    "SCHEDULE_OPTIONS",
    "UPDATABLE",
    "EntryOptions",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryOptions:
    """Every keyword option of an entry, as the API takes it, with its default.

    The options are what the API and ``@periodic`` document; the entry they build is
    :class:`~celery_periodiq.model.entry.Entry`, whose fields store them resolved (one
    ``schedule`` and its ``form`` for the four schedule options, the app's default
    policies for ``overlap``/``catchup`` and its zone for ``tz`` left None, empty lists
    and dicts for None).
    """

    cron: str | None = None
    """A cron expression or macro (``"H/15 * * * *"``, ``"@daily"``, ``"@reboot"``)."""
    every: float | timedelta | str | None = None
    """An interval: seconds, a ``timedelta`` or ``"@every 1h30m"``."""
    calendar: str | None = None
    """A systemd calendar event (``"Mon..Fri 09:00"``)."""
    at: datetime | str | None = None
    """Run once, at this instant (an aware datetime, or ISO 8601 with an offset)."""
    args: list[Any] | tuple[Any, ...] = ()
    """The task's positional arguments (JSON values)."""
    kwargs: dict[str, Any] | None = None
    """The task's keyword arguments (JSON values)."""
    options: dict[str, Any] | None = None
    """Message options: the keys of :data:`OPTION_KEYS`."""
    tz: str | None = None
    """The IANA time zone the schedule is read in (None: the app's ``timezone``, as
    Celery reads a ``crontab`` in it; UTC when the app sets none)."""
    owner: str | None = None
    """A tag, to list and delete entries by."""
    group: str | None = None
    """The group whose ``periodiq_group_limits`` limit applies to the entry's runs (None:
    its owner's); a group the setting does not name, while it names some, is refused."""
    tolerance: float | str = AUTO
    """Seconds a run may start before ``last_run + interval`` (auto: 10%)."""
    timebox: float | str | None = AUTO
    """The soft time limit (auto: half the interval; None: off)."""
    grace: float | None = None
    """Seconds from the soft to the hard time limit (None: derived)."""
    overlap: str | None = None
    """``skip``, ``allow`` or ``buffer_one`` (None: the app's default)."""
    catchup: str | None = None
    """``last``, ``skip`` or ``all`` (None: the app's default)."""
    catchup_window: float | None = None
    """How late a missed tick may still run, in seconds (None: any)."""
    expires: float | str | None = AUTO
    """How long a published run may wait to start (auto: until the next tick)."""
    jitter: float = 0.0
    """Delay each tick by a stable random amount below this many seconds."""
    start_at: datetime | None = None
    """Nothing fires before this (intervals anchor here)."""
    end_at: datetime | None = None
    """Nothing fires after this."""
    enabled: bool = True
    """A disabled entry keeps its definition but never fires."""
    alert_after: float | str | None = AUTO
    """Seconds without a successful run before the entry is overdue (None: never)."""
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    """Consecutive failed or timeboxed runs before the entry is failing."""
    pause_on_failure: bool = False
    """Pause the entry when it becomes failing."""
    max_runs: int | None = None
    """The most ticks the beat publishes for the entry (None: no limit)."""
    exclude: list[Any] | tuple[Any, ...] = ()
    """Dates (``"2026-12-25"`` or ``date``, in the entry's zone) none of its ticks runs on."""


NAMES: tuple[str, ...] = tuple(option.name for option in fields(EntryOptions))
"""Every option's name, in the order of :class:`EntryOptions`."""
DEFAULTS: dict[str, Any] = {option.name: option.default for option in fields(EntryOptions)}
"""Every option's default."""
SCHEDULE_OPTIONS = ("cron", "every", "calendar", "at")
"""The options that give the schedule: an entry takes exactly one of them."""
UPDATABLE = frozenset({"task", *NAMES})
"""What ``update()`` may change: every option, and the task."""
OPTION_KEYS: dict[str, type] = {
    "queue": str,
    "routing_key": str,
    "exchange": str,
    "priority": int,
    "serializer": str,
    "compression": str,
}
"""The keys ``options=`` may hold, and the type of each."""
