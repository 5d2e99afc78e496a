"""Run policy, decided in one place: the defaults, and the numbers of every run.

The decorator, the API, the CLI's display, the beat's plan and the worker's
guard all ask this module; none of them computes a policy number itself.
Nothing here reads a clock: the instant a number is for is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from celery_periodiq.errors import ConfigurationError, EntryError
from celery_periodiq.schedules import IntervalSchedule, Schedule

__all__ = [
    "AUTO",
    "CATCHUP_POLICIES",
    "DEFAULT_CATCHUP",
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_GRACE",
    "DEFAULT_OVERLAP",
    "OVERLAP_POLICIES",
    "AppDefaults",
    "Defaults",
    "Limits",
    "Policied",
    "alert_after",
    "check_group",
    "floor",
    "floor_ms",
    "grace",
    "group_limits",
    "interval_at",
    "limits",
    "marker_ttl",
    "min_gap_ms",
    "now_limits",
    "timebox",
    "tolerance",
]

AUTO = "auto"
OVERLAP_POLICIES = ("skip", "allow", "buffer_one")
CATCHUP_POLICIES = ("last", "skip", "all")
DEFAULT_OVERLAP = "skip"
DEFAULT_CATCHUP = "last"
DEFAULT_FAILURE_THRESHOLD = 3
"""Consecutive failed or timeboxed runs before an entry is failing."""
DEFAULT_GRACE = 10.0
"""``periodiq_default_grace``: the most the derived grace may be, in seconds."""

_TOLERANCE_SHARE = 0.1  # of the interval
_TIMEBOX_SHARE = 0.5  # of the interval
_GRACE_SHARE = 0.2  # of the timebox
_MIN_GRACE = 1.0
# Without a hard limit a dead worker's running marker must still expire: after this
# many intervals, or this many seconds for a run with no interval at all.
_TTL_INTERVALS = 2
_TTL_FALLBACK = 3600.0
_ALERT_INTERVALS = 2  # intervals without a success (plus the timebox) before "overdue"


class AppDefaults(Protocol):
    """The ``periodiq_default_*`` settings of an app, as the policy reads them
    (:class:`celery_periodiq.config.Settings` has them: the policy is below the config)."""

    @property
    def default_overlap(self) -> str: ...
    @property
    def default_catchup(self) -> str: ...
    @property
    def default_grace(self) -> float: ...
    @property
    def default_tz(self) -> str: ...


class Policied(Protocol):
    """The fields of an entry the policy reads (:class:`~celery_periodiq.model.entry.Entry`
    has them: the policy is below the entry, which takes its defaults from here)."""

    @property
    def tolerance(self) -> float | str: ...
    @property
    def timebox(self) -> float | str | None: ...
    @property
    def grace(self) -> float | None: ...
    @property
    def alert_after(self) -> float | str | None: ...
    def parsed_schedule(self) -> Schedule: ...


@dataclass(frozen=True, slots=True)
class Defaults:
    """The policies and zone an entry gets when it sets none: the app's, or ours."""

    overlap: str = DEFAULT_OVERLAP
    catchup: str = DEFAULT_CATCHUP
    grace: float = DEFAULT_GRACE
    tz: str = "UTC"

    @classmethod
    def of(cls, settings: AppDefaults | None) -> Defaults:
        """The defaults of an app (``periodiq_default_*``, and Celery's ``timezone``); ours
        without settings."""
        if settings is None:
            return cls()
        return cls(
            settings.default_overlap,
            settings.default_catchup,
            settings.default_grace,
            settings.default_tz,
        )

    def tz_of(self, given: str | None) -> str:
        """``given``, or the app's time zone when it is None."""
        return self.tz if given is None else given

    def overlap_of(self, given: str | None) -> str:
        """``given``, or the default overlap policy when it is None."""
        return self.overlap if given is None else given

    def catchup_of(self, given: str | None) -> str:
        """``given``, or the default catch-up policy when it is None."""
        return self.catchup if given is None else given


OUR_DEFAULTS = Defaults()
"""The defaults of an app that sets no ``periodiq_default_*``."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The numbers of one run, in seconds; None where they do not apply."""

    interval: float | None
    """From the run's tick to the entry's next tick."""
    tolerance: float | None
    """How early the run may start before ``last_run + interval``."""
    timebox: float | None
    """The soft time limit."""
    time_limit: float | None
    """The hard time limit: the timebox plus the grace."""

    @property
    def marker_ttl(self) -> float:
        """Seconds the run's running marker lives (see :func:`marker_ttl`)."""
        return marker_ttl(self.time_limit, self.interval)


def tolerance(entry: Policied, interval: float) -> float:
    """Seconds a run may start early, before ``last_run + interval`` (auto: 10%)."""
    if entry.tolerance == AUTO:
        return interval * _TOLERANCE_SHARE
    return float(entry.tolerance)


def timebox(entry: Policied, interval: float, plain: bool = False) -> float | None:
    """The soft time limit of a run (auto: half the interval), or None when it is off.

    ``plain``: the entry's task is not a ``PeriodicTask``; its runs are timeboxed only
    when the entry sets ``timebox`` to seconds (auto: the task keeps its own limits).
    """
    if entry.timebox is None or (plain and entry.timebox == AUTO):
        return None
    if entry.timebox == AUTO:
        return interval * _TIMEBOX_SHARE
    return float(entry.timebox)


def grace(entry: Policied, soft: float, default_grace: float) -> float:
    """Seconds from the soft to the hard time limit: the entry's, else 20% of the
    timebox, at least 1 s and at most ``default_grace``."""
    if entry.grace is not None:
        return float(entry.grace)
    return min(default_grace, max(_MIN_GRACE, soft * _GRACE_SHARE))


_LIMITS: dict[tuple[object, ...], Limits] = {}
"""What :func:`limits` found, by the numbers it is found from (the beat asks per tick)."""
_LIMITS_MOST = 4096


def limits(
    entry: Policied, interval: float | None, default_grace: float, plain: bool = False
) -> Limits:
    """Every number of a run whose tick is ``interval`` seconds before the next one
    (``plain``: of a task that is not a ``PeriodicTask``, see :func:`timebox`)."""
    # the type too: 3600 and 3600.0 are one key, and Limits keeps the interval as given
    key = (
        entry.timebox,
        entry.tolerance,
        entry.grace,
        interval,
        type(interval),
        default_grace,
        plain,
    )
    found = _LIMITS.get(key)
    if found is None:
        if len(_LIMITS) >= _LIMITS_MOST:
            _LIMITS.clear()
        found = _LIMITS[key] = _limits(entry, interval, default_grace, plain)
    return found


def _limits(entry: Policied, interval: float | None, default_grace: float, plain: bool) -> Limits:
    if interval is None or interval <= 0:
        return Limits(interval, None, None, None)
    soft = timebox(entry, interval, plain)
    hard = None if soft is None else soft + grace(entry, soft, default_grace)
    return Limits(interval, tolerance(entry, interval), soft, hard)


def alert_after(entry: Policied, interval: float | None) -> float | None:
    """Seconds without a successful run before the entry is overdue: the entry's own,
    else two intervals plus the timebox; None for never (``alert_after=None``, or an
    entry with no interval, such as ``@reboot``)."""
    if entry.alert_after is None:
        return None
    if entry.alert_after != AUTO:
        return float(entry.alert_after)
    if interval is None or interval <= 0:
        return None
    return interval * _ALERT_INTERVALS + (timebox(entry, interval) or 0.0)


def min_gap_ms(entry: Policied, gap_before: float) -> int:
    """The earliest a scheduled run may follow the last run's start, in ms: the gap
    since the previous tick minus the tolerance."""
    return int((gap_before - tolerance(entry, gap_before)) * 1000)


def floor(entry: Policied, gap: float) -> float:
    """The least time, in seconds, between the starts of two runs of an entry whose ticks
    are ``gap`` apart, whatever made either late: half the gap, or ``gap - tolerance``
    where the entry's tolerance asks for runs closer than that."""
    return max(min(gap / 2, gap - tolerance(entry, gap)), 0.0)


def floor_ms(entry: Policied, catchup: str, interval: float, gap_before: float) -> int:
    """:func:`floor` of a scheduled run, in ms, as the worker keeps it between its start
    and the start of the run before it: of the shorter of the interval before its tick
    and the one after it. 0 under ``catchup="all"``, whose missed ticks run back to
    back."""
    if catchup == "all":
        return 0
    return int(floor(entry, min(interval, gap_before)) * 1000)


def marker_ttl(time_limit: float | None, interval: float | None) -> float:
    """Seconds a run's running marker lives: its hard limit, else two intervals, else
    an hour, so a run whose worker died stops blocking the entry."""
    if time_limit is not None:
        return time_limit
    if interval is not None and interval > 0:
        return max(interval * _TTL_INTERVALS, 1.0)
    return _TTL_FALLBACK


def interval_at(schedule: Schedule, instant: datetime) -> float | None:
    """Seconds between the schedule's next two fires after ``instant`` (the constant
    period of an interval); None when fewer than two are left."""
    if isinstance(schedule, IntervalSchedule):
        return schedule.period.total_seconds()
    first = schedule.next_after(instant)
    second = None if first is None else schedule.next_after(first)
    if first is None or second is None:
        return None
    return (second.astimezone(UTC) - first.astimezone(UTC)).total_seconds()


def now_limits(
    entry: Policied, instant: datetime, default_grace: float, plain: bool = False
) -> Limits:
    """The numbers of a run of ``entry`` at ``instant`` outside its schedule (a manual
    run, or what ``show`` prints): those of its next tick."""
    return limits(entry, interval_at(entry.parsed_schedule(), instant), default_grace, plain)


def group_limits(value: object, cluster: bool = False) -> dict[str, int]:
    """``periodiq_group_limits`` checked: group name -> the most runs of the group at once.

    Raises:
        ConfigurationError: not a dict of non-empty printable names to whole numbers >= 1,
            or limits set on Redis Cluster: a group's markers live under the schedule's
            hash tag, begin.lua touches them with the entry's partition in one call, and
            a Cluster refuses a call across slots (docs/options.md, "Group limits").
    """
    allowed = 'a dict of group name -> a whole number >= 1, e.g. {"reports": 2}'
    if not isinstance(value, dict):
        raise ConfigurationError(f"setting periodiq_group_limits={value!r} is invalid ({allowed})")
    for group, limit in value.items():
        if not isinstance(group, str) or not group.strip() or not group.isprintable():
            raise ConfigurationError(
                f"setting periodiq_group_limits: the key {group!r} is invalid (allowed: a "
                "non-empty printable group name)"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(
                f"setting periodiq_group_limits[{group!r}]={limit!r} is invalid (allowed: a "
                "whole number >= 1)"
            )
    if value and cluster:
        raise ConfigurationError(
            "setting periodiq_group_limits is not supported with periodiq_redis_cluster: a "
            "group limit needs one atomic call across the group's partitions (a single Redis "
            "or Sentinel); leave it unset on Redis Cluster"
        )
    return dict(value)


def check_group(name: str, group: str | None, limits: dict[str, int]) -> None:
    """Refuse an entry's explicit ``group`` that ``limits`` does not name while it names
    some (a misspelt group would else run unlimited).

    Raises:
        EntryError: the group is unknown.
    """
    if group is not None and limits and group not in limits:
        known = ", ".join(sorted(map(repr, limits)))
        raise EntryError(
            f"entry {name!r}: group={group!r} is invalid (allowed: a group of "
            f"periodiq_group_limits: {known})"
        )
