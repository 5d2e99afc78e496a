"""Maintenance windows: stretches of time in which ticks are skipped or deferred.

A window is recurring (any schedule form :func:`~celery_periodiq.schedules.parse_schedule`
reads, each fire opening it for a ``duration``) or one-off (a start and an end), for the
whole schedule (scope ``all``), an owner's entries (``owner:TAG``) or one entry
(``entry:NAME``). Pure: every question takes the instant it is asked about; nothing here
reads a clock. A recurring window opens at its schedule's fires, read in its time zone
(DST as the schedule code has it: on a spring-forward night a skipped 02:00 opens at the
first valid instant after the gap, on a fall-back night a repeated 02:00 opens once),
and stays open ``duration`` of real time. Windows that overlap or touch make one
stretch: a tick is covered until the end of the whole stretch.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from celery_periodiq.errors import ScheduleError, WindowError, shown
from celery_periodiq.model.instants import from_ms, to_ms
from celery_periodiq.schedules import EventSchedule, IntervalSchedule, Schedule, parse_schedule
from celery_periodiq.schedules.interval import parse_duration
from celery_periodiq.schedules.once import parse_instant

__all__ = ["POLICIES", "Cover", "Window", "covering", "excluded_on", "make_window"]

POLICIES = ("skip", "defer")
"""What a window does to the ticks inside it: ``skip`` them (recorded), or ``defer``
them to its end as one catch-up run that says how many ticks it stands for."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}")
_MOST = timedelta(days=366)
"""The longest a window (or a stretch of touching ones) is followed: past it a tick is
taken as covered until then (a stretch that long is a schedule that never opens)."""
_MERGES = 10_000
_SCOPES = "'all', 'owner:TAG' or 'entry:NAME'"


@dataclass(frozen=True)
class Window:
    """One maintenance window, as stored (``to_json``/``from_json``)."""

    id: str
    scope: str
    """``all``, ``owner:TAG`` or ``entry:NAME``."""
    policy: str
    schedule: str | None = None
    """A recurring window's schedule as written; None for a one-off window."""
    tz: str = "UTC"
    duration_ms: int | None = None
    """How long each opening lasts (ms of real time); None for a one-off window."""
    start_ms: int | None = None
    """A one-off window's start; a recurring window's first opening is not before it."""
    end_ms: int | None = None
    """A one-off window's end; a recurring window opens no more after it."""
    note: str | None = None
    _parsed: Schedule | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.schedule is not None:  # checked once, kept: every question asks it
            object.__setattr__(self, "_parsed", _schedule(self))

    @property
    def recurring(self) -> bool:
        """Whether the window opens on a schedule (else once, from start to end)."""
        return self.schedule is not None

    def applies_to(self, name: str, owner: str | None) -> bool:
        """Whether the window holds the entry ``name`` (whose owner is ``owner``)."""
        kind, _, target = self.scope.partition(":")
        if kind == "all":
            return True
        return target == (name if kind == "entry" else owner)

    def open_at(self, instant: datetime) -> tuple[datetime, datetime] | None:
        """The opening of this window that holds ``instant`` (start, end), in UTC; None
        when the window is closed then. An opening holds its start, not its end."""
        ms = to_ms(instant)
        if self._parsed is None:
            assert self.start_ms is not None
            assert self.end_ms is not None
            if self.start_ms <= ms < self.end_ms:
                return from_ms(self.start_ms), from_ms(self.end_ms)
            return None
        assert self.duration_ms is not None
        duration = timedelta(milliseconds=self.duration_ms)
        start = self._parsed.next_after(instant.astimezone(UTC) - duration)
        if start is None or start.astimezone(UTC) > instant:
            return None
        start = start.astimezone(UTC)
        return start, self._stretch(start, start + duration, instant)

    def next_opening(self, after: datetime) -> tuple[datetime, datetime] | None:
        """The opening that holds ``after``, or else the next one to start (start, end),
        in UTC; None when the window opens no more."""
        held = self.open_at(after)
        if held is not None:
            return held
        if self._parsed is None:
            assert self.start_ms is not None
            assert self.end_ms is not None
            if to_ms(after) < self.start_ms:
                return from_ms(self.start_ms), from_ms(self.end_ms)
            return None
        assert self.duration_ms is not None
        start = self._parsed.next_after(after)
        if start is None:
            return None
        start = start.astimezone(UTC)
        end = start + timedelta(milliseconds=self.duration_ms)
        return start, self._stretch(start, end, start)

    def _stretch(self, start: datetime, end: datetime, instant: datetime) -> datetime:
        """The end of the stretch of openings from ``start`` (ending at ``end``): a next
        opening that starts before or at the end prolongs it."""
        assert self._parsed is not None
        assert self.duration_ms is not None
        duration = timedelta(milliseconds=self.duration_ms)
        limit = instant + _MOST
        for _ in range(_MERGES):
            following = self._parsed.next_after(start)
            if following is None or following.astimezone(UTC) > end or end >= limit:
                break
            start = following.astimezone(UTC)
            end = max(end, start + duration)
        return min(end, limit)

    def describe(self) -> str:
        """``every day at 02:00 (Europe/Berlin) for 2h`` or ``2026-03-01T02:00Z to ...``."""
        if self._parsed is not None and self.duration_ms is not None:
            return f"{self._parsed.describe()} for {_duration_text(self.duration_ms)}"
        assert self.start_ms is not None
        assert self.end_ms is not None
        return f"from {_iso(self.start_ms)} to {_iso(self.end_ms)}"

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready), also what ``--json`` prints."""
        return {
            "id": self.id,
            "scope": self.scope,
            "policy": self.policy,
            "schedule": self.schedule,
            "tz": self.tz,
            "duration": None if self.duration_ms is None else self.duration_ms / 1000,
            "start": None if self.start_ms is None else _iso(self.start_ms),
            "end": None if self.end_ms is None else _iso(self.end_ms),
            "note": self.note,
        }

    def to_json(self) -> str:
        """The JSON stored in Redis."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Window:
        """A stored window.

        Raises:
            WindowError: the JSON is not a valid window.
        """
        try:
            data = json.loads(text)
            return make_window(
                data["id"],
                scope=data["scope"],
                policy=data["policy"],
                schedule=data.get("schedule"),
                tz=data.get("tz") or "UTC",
                duration=data.get("duration"),
                start=data.get("start"),
                end=data.get("end"),
                note=data.get("note"),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise WindowError(f"stored window {shown(text)} is unreadable: {error}") from None


@dataclass(frozen=True, slots=True)
class Cover:
    """The window that holds a tick, and until when (the end of its stretch)."""

    window: Window
    end: datetime

    @property
    def defer(self) -> bool:
        """Whether the tick is deferred to ``end`` (else skipped)."""
        return self.window.policy == "defer"


def covering(windows: tuple[Window, ...] | list[Window], instant: datetime) -> Cover | None:
    """The window holding a tick at ``instant``, of ``windows`` (those of its entry): a
    ``skip`` one first (a skipped tick never runs), else the ``defer`` one that ends last;
    None when no window is open then."""
    found: Cover | None = None
    for window in windows:
        held = window.open_at(instant)
        if held is None:
            continue
        if window.policy == "skip":
            return Cover(window, held[1])
        if found is None or held[1] > found.end:
            found = Cover(window, held[1])
    return found


def excluded_on(dates: frozenset[date], tz: Any, instant: datetime) -> date | None:
    """The excluded date ``instant`` falls on in the zone ``tz`` (a tzinfo), or None."""
    day = instant.astimezone(tz).date()
    return day if day in dates else None


def make_window(
    window_id: object,
    *,
    scope: object = "all",
    policy: object = "skip",
    schedule: object = None,
    tz: object = "UTC",
    duration: object = None,
    start: object = None,
    end: object = None,
    note: object = None,
    now_ms: int | None = None,
) -> Window:
    """Check every part of a window and build it.

    Args:
        window_id: its name (letters, digits, ``_.:@/-``, at most 100).
        scope: ``all``, ``owner:TAG`` or ``entry:NAME``.
        policy: ``skip`` or ``defer``.
        schedule: for a recurring window, when it opens: any schedule form (cron,
            calendar event, macro, ``@every``, seconds); with ``duration``.
        tz: the IANA zone ``schedule`` is read in.
        duration: how long each opening lasts: a timedelta, seconds, or ``"2h"``.
        start: a one-off window's start (an aware datetime or ISO 8601 with an offset);
            for a recurring window, no opening before it.
        end: a one-off window's end; for a recurring window, no opening after it.
        note: why (shown beside the window).
        now_ms: the Redis clock, when creating: an end already past is refused.

    Raises:
        WindowError: naming the part at fault and what is allowed.
    """
    if not isinstance(window_id, str) or not _ID.fullmatch(window_id):
        raise WindowError(
            f"window id {shown(window_id)} is invalid (allowed: 1-100 letters, digits and "
            "_.:@/-, starting with a letter or digit)"
        )
    where = f"window {window_id!r}"
    _check_scope(scope, where)
    if policy not in POLICIES:
        raise WindowError(f"{where}: policy={shown(policy)} is unknown (allowed: skip, defer)")
    if note is not None and not isinstance(note, str):
        raise WindowError(f"{where}: note={shown(note)} is not text")
    start_ms = None if start is None else _instant_ms(start, "start", where)
    end_ms = None if end is None else _instant_ms(end, "end", where)
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise WindowError(f"{where}: end {_iso(end_ms)} is not after start {_iso(start_ms)}")
    if now_ms is not None and end_ms is not None and end_ms <= now_ms:
        raise WindowError(
            f"{where}: end {_iso(end_ms)} is in the past (now: {_iso(now_ms)}); nothing to do"
        )
    if schedule is None:
        if duration is not None:
            raise WindowError(f"{where}: duration= needs schedule= (a recurring window)")
        if start_ms is None or end_ms is None:
            raise WindowError(
                f"{where}: give schedule= and duration= (recurring) or start= and end= (one-off)"
            )
        text = None
    else:
        if duration is None:
            raise WindowError(f"{where}: a recurring window needs duration= (e.g. '2h')")
        text = schedule if isinstance(schedule, str) else None
        if text is None and isinstance(schedule, timedelta | int | float):
            text = "@every " + _duration_text(_duration_ms(schedule, where, "schedule"))
        if text is None:
            raise WindowError(f"{where}: schedule={shown(schedule)} is not a schedule")
    if not isinstance(tz, str):
        raise WindowError(f"{where}: tz={shown(tz)} is not an IANA zone name")
    window = Window(
        window_id,
        str(scope),
        str(policy),
        text,
        tz,
        None if duration is None else _duration_ms(duration, where, "duration"),
        start_ms,
        end_ms,
        note or None,
    )
    _check_period(window, where)
    return window


def _schedule(window: Window) -> Schedule:
    where = f"window {window.id!r}"
    try:
        parsed = parse_schedule(
            str(window.schedule),
            tz=window.tz,
            key=window.id,
            start_at=None if window.start_ms is None else from_ms(window.start_ms),
            end_at=None if window.end_ms is None else from_ms(window.end_ms),
        )
    except ScheduleError as error:
        raise WindowError(f"{where}: {error}") from None
    if isinstance(parsed, EventSchedule):
        raise WindowError(f"{where}: {window.schedule} has no instants to open a window at")
    return parsed


def _check_scope(scope: object, where: str) -> None:
    if scope == "all":
        return
    if isinstance(scope, str):
        kind, colon, target = scope.partition(":")
        if kind in ("owner", "entry") and colon and target.strip() == target and target:
            return
    raise WindowError(f"{where}: scope={shown(scope)} is unknown (allowed: {_SCOPES})")


def _check_period(window: Window, where: str) -> None:
    """An interval window as long as its period would never close."""
    parsed = window._parsed
    if isinstance(parsed, IntervalSchedule) and window.duration_ms is not None:
        period_ms = parsed.period / timedelta(milliseconds=1)
        if window.duration_ms >= period_ms:
            raise WindowError(
                f"{where}: duration {_duration_text(window.duration_ms)} is not shorter "
                f"than the schedule's period ({window.schedule}): it would never close"
            )


def _duration_ms(value: object, where: str, what: str) -> int:
    allowed = "a timedelta, seconds > 0, or text such as '2h' or '1h30m'"
    try:
        if isinstance(value, bool):
            raise WindowError("")
        if isinstance(value, timedelta):
            ms = value / timedelta(milliseconds=1)
        elif isinstance(value, int | float):
            ms = float(value) * 1000
        elif isinstance(value, str):
            ms = parse_duration(value, value) / timedelta(milliseconds=1)
        else:
            raise WindowError("")
    except (ScheduleError, WindowError):
        message = f"{where}: {what}={shown(value)} is invalid (allowed: {allowed})"
        raise WindowError(message) from None
    if not math.isfinite(ms) or ms < 1000 or ms > _MOST / timedelta(milliseconds=1):
        raise WindowError(
            f"{where}: {what}={shown(value)} is out of range (allowed: 1 s to 366 days)"
        )
    return math.ceil(ms)


def _instant_ms(value: object, what: str, where: str) -> int:
    try:
        return to_ms(parse_instant(value, what))
    except ScheduleError as error:
        raise WindowError(f"{where}: {error}") from None


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat().replace("+00:00", "Z")


def _duration_text(ms: int) -> str:
    seconds = ms // 1000
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"
