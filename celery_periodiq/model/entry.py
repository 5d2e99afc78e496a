"""An entry: a named schedule and what to run on it, stored in Redis as JSON.

:class:`Entry` is the one definition the decorator, ``beat_schedule``, the
API, the CLI and the beat all share. It validates itself on creation, so an
invalid entry never reaches Redis, and :meth:`Entry.from_json` applies the
same checks to data read back (anything else is quarantined).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import date, datetime
from typing import Any, Literal

from celery_periodiq.errors import EntryError, ScheduleError, shown
from celery_periodiq.model.entry_json import JsonLayout, filled, instants
from celery_periodiq.model.exclude import exclusion_dates, exclusion_list
from celery_periodiq.model.options import OPTION_KEYS
from celery_periodiq.model.policy import (
    AUTO,
    CATCHUP_POLICIES,
    DEFAULT_CATCHUP,
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_OVERLAP,
    OVERLAP_POLICIES,
)
from celery_periodiq.schedules import EventSchedule, Schedule
from celery_periodiq.schedules import parse_form as _parse_form
from celery_periodiq.schedules.once import at_spec

__all__ = ["AUTO", "FORMS", "MAX_RUNS", "SOURCES", "Entry", "blamed", "schedule_field"]

FORMS = ("cron", "calendar", "every", "at")
SOURCES = ("code", "config", "runtime")
_MAX_NAME = 200
# Fields left out of the stored JSON when they hold their default (reading fills it back
# in): nothing, or the structural default (never a policy, whose default could one day
# change)...
_EMPTY = ("args", "kwargs", "options", "owner", "group", "start_at", "end_at", "grace",
          "catchup_window", "exclude")  # fmt: skip # table: one line, as before
_STRUCTURAL = ("jitter", "enabled", "tz", "form", "source")
# ...but the alerts, at their defaults, so entries stored before them keep their digest (a
# new default would change what those entries mean), and max_runs when unlimited, so
# entries stored before it keep their digest
_ADDED_LATER = ("alert_after", "failure_threshold", "pause_on_failure", "max_runs")
_OMITTED = frozenset({*_EMPTY, *_STRUCTURAL, *_ADDED_LATER})
MAX_RUNS = 10**9
"""The largest ``max_runs``."""

Form = Literal["cron", "calendar", "every", "at"]
Source = Literal["code", "config", "runtime"]


def blamed(field: str, error: EntryError) -> EntryError:
    """``error`` with its :attr:`~celery_periodiq.errors.EntryError.field` set."""
    error.field = field
    return error


def _fail(name: str, what: str, value: object, allowed: str) -> EntryError:
    message = f"entry {shown(name)}: {what}={shown(value)} is invalid (allowed: {allowed})"
    return blamed(what.partition("[")[0], EntryError(message))


def schedule_field(error: ValueError, otherwise: str = "schedule") -> str:
    """Which option a schedule's error is about: the zone, a bound, or ``otherwise``
    (the spec, or the instant being read)."""
    text = str(error)
    if text.startswith(("time zone:", "tz=")):
        return "tz"
    return "end_at" if text.startswith("end_at") else otherwise


def _number(name: str, what: str, value: object, *, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(name, what, value, f"a number of seconds >= {low:g}")
    if value < low:
        raise _fail(name, what, value, f"a number of seconds >= {low:g}")
    return float(value)


def _non_negative(value: object) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0  # type: ignore[arg-type,operator]


def _positive(value: object) -> bool:
    return _non_negative(value) and float(value) > 0  # type: ignore[arg-type]


@dataclass(frozen=True)
class Entry:
    """A named schedule and the task it runs.

    Policy fields that default to ``"auto"`` follow the tick's interval; what they
    come to is decided in :mod:`celery_periodiq.model.policy`.
    """

    name: str
    task: str
    schedule: str
    form: Form = "cron"
    tz: str = "UTC"
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    owner: str | None = None
    group: str | None = None  # its periodiq_group_limits limit (None: the owner's)
    enabled: bool = True
    start_at: datetime | None = None
    end_at: datetime | None = None
    tolerance: float | str = AUTO
    timebox: float | str | None = AUTO
    grace: float | None = None
    overlap: str = DEFAULT_OVERLAP
    catchup: str = DEFAULT_CATCHUP
    catchup_window: float | None = None
    expires: float | str | None = AUTO
    """How long a published run may wait to start: "auto" until the entry's next tick is
    due, seconds after its own tick, or None for no limit."""
    jitter: float = 0.0
    source: Source = "runtime"
    alert_after: float | str | None = AUTO
    """Seconds without a successful run before the entry is overdue: "auto" for two
    intervals plus the timebox, or None for never."""
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    """Consecutive failed or timeboxed runs before the entry is failing."""
    pause_on_failure: bool = False
    """Pause the entry when it becomes failing (with a note saying why)."""
    max_runs: int | None = None
    """The most ticks the beat publishes for the entry (catch-up runs count once each,
    manual runs not at all); after the last it has ended. None: no limit."""
    exclude: list[str] = field(default_factory=list)
    """Dates (``YYYY-MM-DD``, in the entry's zone) none of its ticks runs on (skipped)."""

    def __post_init__(self) -> None:
        if self.form == "at":
            self._canonical_instant()
        if self.exclude or not isinstance(self.exclude, list):  # sorted ISO dates, each once
            object.__setattr__(self, "exclude", exclusion_list(self.name, self.exclude))
        self._check()

    @property
    def excluded_dates(self) -> frozenset[date]:
        """:attr:`exclude` as a set of dates."""
        return exclusion_dates(tuple(self.exclude)) if self.exclude else frozenset()

    def _canonical_instant(self) -> None:
        # A one-off's schedule is its UTC instant in ISO 8601, however it was written, so
        # that one instant is one definition (one digest).
        try:
            spec = at_spec(self.schedule)
        except ScheduleError:
            return  # _check() reports it, naming the entry
        object.__setattr__(self, "schedule", spec)  # frozen: set once, before any use

    def _check(self) -> None:
        self._check_name()
        self._check_fields()
        self._check_schedule()

    def _check_name(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
            raise blamed(
                "name",
                EntryError(
                    f"entry name {shown(name)} is invalid (allowed: 1-{_MAX_NAME} characters, "
                    "not blank)"
                ),
            )
        if not name.isprintable() or name != name.strip():
            raise blamed(
                "name",
                EntryError(
                    f"entry name {shown(name)} is invalid (allowed: printable, no "
                    "leading/trailing space)"
                ),
            )

    def _check_fields(self) -> None:
        """Every field but the name and the schedule (which the name and the bounds key)."""
        name = self.name
        if not isinstance(self.task, str) or not self.task.strip():
            raise _fail(name, "task", self.task, "a task name such as 'proj.tasks.report'")
        if self.form not in FORMS:
            raise _fail(name, "form", self.form, ", ".join(FORMS))
        if not isinstance(self.args, list | tuple):
            raise _fail(name, "args", self.args, "a list of JSON values")
        if not isinstance(self.kwargs, dict) or not all(isinstance(k, str) for k in self.kwargs):
            raise _fail(name, "kwargs", self.kwargs, "a dict with string keys and JSON values")
        for what, value in (("args", self.args), ("kwargs", self.kwargs)):
            if not value:
                continue
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                raise _fail(
                    name, what, value, "JSON values only: str, int, float, bool, None, list, dict"
                ) from None
        if not isinstance(self.options, dict):
            raise _fail(name, "options", self.options, ", ".join(OPTION_KEYS))
        for key, value in self.options.items():
            kind = OPTION_KEYS.get(key)
            if kind is None or isinstance(value, bool) or not isinstance(value, kind):
                raise _fail(
                    name,
                    f"options[{shown(key)}]",
                    value,
                    ", ".join(f"{k}: {t.__name__}" for k, t in OPTION_KEYS.items()),
                )
        priority = self.options.get("priority")
        if priority is not None and not 0 <= priority <= 255:
            # AMQP's range (RabbitMQ honours up to the queue's x-max-priority); a Redis
            # broker maps it onto its priority steps
            raise _fail(name, "options['priority']", priority, "a whole number 0-255")
        for tag, given in (("owner", self.owner), ("group", self.group)):
            if given is not None and (
                not isinstance(given, str) or not given.strip() or not given.isprintable()
            ):
                raise _fail(name, tag, given, "a non-empty printable tag")
        if not isinstance(self.enabled, bool):
            raise _fail(name, "enabled", self.enabled, "True or False")
        if self.tolerance != AUTO and not _non_negative(self.tolerance):
            raise _fail(name, "tolerance", self.tolerance, "seconds >= 0 or 'auto'")
        if self.timebox not in (AUTO, None) and not _positive(self.timebox):
            raise _fail(name, "timebox", self.timebox, "seconds > 0, 'auto' or None")
        if self.grace is not None:
            _number(name, "grace", self.grace)
        if self.overlap not in OVERLAP_POLICIES:
            raise _fail(name, "overlap", self.overlap, ", ".join(OVERLAP_POLICIES))
        if self.catchup not in CATCHUP_POLICIES:
            raise _fail(name, "catchup", self.catchup, ", ".join(CATCHUP_POLICIES))
        if self.catchup_window is not None and not _positive(self.catchup_window):
            raise _fail(name, "catchup_window", self.catchup_window, "seconds > 0 or None")
        if self.expires not in (AUTO, None) and not _positive(self.expires):
            raise _fail(name, "expires", self.expires, "seconds > 0, 'auto' or None")
        _number(name, "jitter", self.jitter)
        if self.source not in SOURCES:
            raise _fail(name, "source", self.source, ", ".join(SOURCES))
        if self.alert_after not in (AUTO, None) and not _positive(self.alert_after):
            raise _fail(name, "alert_after", self.alert_after, "seconds > 0, 'auto' or None")
        threshold = self.failure_threshold
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int)
            or not (1 <= threshold <= 10_000)
        ):
            raise _fail(name, "failure_threshold", threshold, "a whole number from 1 to 10000")
        if not isinstance(self.pause_on_failure, bool):
            raise _fail(name, "pause_on_failure", self.pause_on_failure, "True or False")
        limit = self.max_runs
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUNS
        ):
            raise _fail(
                name,
                "max_runs",
                limit,
                f"a whole number from 1 to {MAX_RUNS}, or None for no limit",
            )

    def _check_schedule(self) -> None:
        if not isinstance(self.schedule, str):
            raise _fail(self.name, "schedule", self.schedule, "text: the schedule as written")
        try:
            schedule = self.parsed_schedule()
        except ScheduleError as error:
            wrapped = EntryError(f"entry {shown(self.name)}: {error}")
            raise blamed(schedule_field(error), wrapped) from None
        self._check_timebox(schedule)
        if self.max_runs is not None and isinstance(schedule, EventSchedule):
            raise _fail(
                self.name,
                "max_runs",
                self.max_runs,
                "None for @reboot/@shutdown entries: max_runs counts clock ticks",
            )

    def alike(self, name: str, start_at: datetime | None, end_at: datetime | None) -> Entry:
        """A copy of this entry with another name and bounds: what depends on them (the
        name, the schedule) is checked, the rest is this entry's, checked already. Its
        ``args``, ``kwargs`` and ``options`` are shallow copies.

        Raises:
            EntryError: the name or the bounds are invalid.
        """
        copied: Entry = object.__new__(Entry)
        fields = copied.__dict__
        fields.update(self.__dict__)
        for derived in ("_json", "_digest", "_schedule", "_templates"):
            fields.pop(derived, None)
        fields["_model"] = self
        fields["name"], fields["start_at"], fields["end_at"] = name, start_at, end_at
        fields["args"], fields["kwargs"] = list(self.args), dict(self.kwargs)
        fields["options"] = dict(self.options)
        copied._check_name()
        schedule = self.__dict__.get("_schedule")
        if (
            schedule is not None
            and (start_at, end_at) == (self.start_at, self.end_at)
            and not self._hashes_name()
        ):
            # the very schedule this entry was checked with: nothing of it depends on the name
            fields["_schedule"] = schedule
        else:
            copied._check_schedule()
        return copied

    def _hashes_name(self) -> bool:
        """Whether the schedule depends on the entry's name (a cron's ``H``)."""
        return self.form == "cron" and "H" in self.schedule.upper()

    def _check_timebox(self, schedule: Schedule) -> None:
        # A fixed interval lets us refuse a timebox that would let runs overlap.
        from celery_periodiq.schedules import IntervalSchedule

        if not isinstance(schedule, IntervalSchedule):
            return
        interval = schedule.period.total_seconds()
        if isinstance(self.timebox, int | float) and self.timebox > interval:
            raise _fail(
                self.name,
                "timebox",
                self.timebox,
                f"at most the interval, {interval:g} s, so runs cannot overlap",
            )
        if isinstance(self.tolerance, int | float) and self.tolerance >= interval:
            raise _fail(
                self.name, "tolerance", self.tolerance, f"less than the interval, {interval:g} s"
            )

    def parsed_schedule(self) -> Schedule:
        """The entry's :class:`Schedule` (``H`` is keyed by the entry name)."""
        cached: Schedule | None = self.__dict__.get("_schedule")
        if cached is None:
            # Only a cron's H hashes the key (not the h of "@every 1h"): other specs are
            # parsed once for every entry using them, and entries with bounds of their
            # own (a bulk load's start_at) get a copy.
            key = self.name if self._hashes_name() else None
            cached = _parse_cached(self.schedule, self.form, self.tz, key)
            if self.start_at is not None or self.end_at is not None:
                cached = cached.bounded(self.start_at, self.end_at)
            object.__setattr__(self, "_schedule", cached)  # frozen: parsed once, on first use
        return cached

    # JSON

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO strings)."""
        return _LAYOUT.as_dict(self.__dict__)

    def to_json(self) -> str:
        """Canonical JSON as stored: sorted keys, no spaces, and without the fields that
        hold nothing (no args, no owner, no bounds, ...: :meth:`from_dict` restores them).
        Policy fields are always written, so a stored entry never changes meaning."""
        cached: str | None = self.__dict__.get("_json")
        if cached is None:
            model: Entry | None = self.__dict__.get("_model")
            cached = self._encoded() if model is None else model._json_alike(self)
            object.__setattr__(self, "_json", cached)  # frozen: computed once, on first use
        return cached

    def _encoded(self) -> str:
        return _LAYOUT.encode(self.__dict__)

    def _json_alike(self, other: Entry) -> str:
        """The JSON of ``other``, made by :meth:`alike` from this entry: this entry's JSON
        with ``other``'s name and bounds put in."""
        start, end = other.start_at, other.end_at
        shape = (start is not None, end is not None)
        templates: dict[tuple[bool, bool], list[str] | None] = self.__dict__.setdefault(
            "_templates", {}
        )
        if shape not in templates:
            templates[shape] = _LAYOUT.template(self.__dict__, *shape)
        pieces = templates[shape]
        if pieces is None:
            return other._encoded()
        return filled(pieces, other.name, start, end)

    @property
    def digest(self) -> str:
        """A hash of the definition: equal definitions have equal digests."""
        cached: str | None = self.__dict__.get("_digest")
        if cached is None:
            text = self.to_json().encode()
            cached = hashlib.sha1(text, usedforsecurity=False).hexdigest()[:16]
            object.__setattr__(self, "_digest", cached)
        return cached

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        """Build and validate an entry from :meth:`to_dict` output.

        Raises:
            EntryError: a field is missing, unknown or invalid.
        """
        if not isinstance(data, dict):
            raise EntryError(f"entry data {shown(data)} is not a JSON object")
        unknown = set(data) - _KNOWN
        if unknown:
            raise EntryError(f"entry {shown(data.get('name'))}: unknown fields {sorted(unknown)}")
        missing = {"name", "task", "schedule"} - set(data)
        if missing:
            raise EntryError(f"entry {shown(data.get('name'))}: missing fields {sorted(missing)}")
        values = dict(data)
        values["start_at"], values["end_at"] = instants(data)
        try:
            return cls(**values)
        except TypeError as error:
            raise EntryError(f"entry {shown(data.get('name'))}: {error}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Entry:
        """Parse and validate stored JSON.

        Raises:
            EntryError: not JSON, or not a valid entry.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise EntryError(f"entry data is not JSON: {error}") from None
        return cls.from_dict(data)

    def evolve(self, **changes: Any) -> Entry:
        """A copy with ``changes`` applied and validated."""
        return replace(self, **changes)


_FIELDS = tuple(item.name for item in fields(Entry))
_KNOWN = frozenset(_FIELDS)
_LAYOUT = JsonLayout(
    _FIELDS,
    {
        item.name: item.default if item.default_factory is MISSING else item.default_factory()
        for item in fields(Entry)
        if item.name in _OMITTED
    },
)


@functools.lru_cache(maxsize=4096)
def _parse_cached(spec: str, form: Form, tz: str, key: str | None) -> Schedule:
    return _parse_form(spec, form, tz=tz, key=key)
