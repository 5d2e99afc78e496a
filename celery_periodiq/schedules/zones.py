"""Time zones: lookup by IANA name and the DST arithmetic the engine needs.

Pure functions; nothing here reads the clock.
"""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo

from celery_periodiq.errors import ScheduleError, shown

__all__ = ["first_transition", "is_fixed", "resolve_wall", "zone"]

_SECOND = timedelta(seconds=1)
# Zones change offset at most twice a year, and no two changes of any zone in
# tzdata since 1970 lie closer than this, so stepping by it cannot jump over a
# pair of transitions.
_SCAN_STEP = timedelta(days=7)
_FIXED_NAMES = ("UTC", "Etc/", "GMT", "Zulu", "Universal")


@functools.lru_cache(maxsize=512)
def zone(name: str) -> zoneinfo.ZoneInfo:
    """Return the IANA zone called ``name``.

    Raises:
        ScheduleError: the name is empty or not a zone in the tz database.
    """
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError(
            f"time zone: {shown(name)} is not a zone name "
            "(allowed: an IANA name such as 'Europe/Berlin' or 'UTC')"
        )
    try:
        return zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"time zone: {shown(name)} is not in the tz database "
            "(allowed: an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC')"
        ) from None


@functools.lru_cache(maxsize=512)
def is_fixed(tz: tzinfo) -> bool:
    """Whether ``tz`` never changes its UTC offset (UTC, Etc/GMT+3, ...)."""
    return str(tz).startswith(_FIXED_NAMES) or tz is UTC


def _offset_at(instant: datetime, tz: tzinfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def first_transition(
    start: datetime, end: datetime, tz: tzinfo, offset: timedelta | None = None
) -> datetime | None:
    """The first instant in ``(start, end]`` at which ``tz`` changes its offset, or None.

    Both bounds are aware datetimes; the result is in UTC, exact to the second
    (tzdata transitions fall on whole seconds). ``offset``: the offset at
    ``start``, if the caller knows it.
    """
    if offset is None:
        offset = _offset_at(start, tz)
    if end - start <= _SCAN_STEP:  # the common case: one look at the end
        return _bisect(start, end, offset, tz) if _offset_at(end, tz) != offset else None
    low = start
    while low < end:
        high = min(low + _SCAN_STEP, end)
        if _offset_at(high, tz) != offset:
            return _bisect(low, high, offset, tz)
        low = high
    return None


def _bisect(low: datetime, high: datetime, offset: timedelta, tz: tzinfo) -> datetime:
    """Narrow ``(low, high]`` down to the whole second where the offset stops being ``offset``."""
    low = low.astimezone(UTC).replace(microsecond=0)
    if high.microsecond:
        high = high.replace(microsecond=0) + _SECOND
    high = high.astimezone(UTC)
    while high - low > _SECOND:
        middle = low + (high - low) // 2
        middle = middle.replace(microsecond=0)
        if _offset_at(middle, tz) == offset:
            low = middle
        else:
            high = middle
    return high


def resolve_wall(wall: datetime, tz: tzinfo) -> datetime:
    """Map a naive local wall time to the instant that fires for it.

    An existing wall time maps to itself; an ambiguous one (DST fall-back) to
    its first occurrence; a non-existent one (spring-forward gap) to the first
    valid instant after the gap, the transition itself.
    """
    first = wall.replace(tzinfo=tz, fold=0)
    first_offset = first.utcoffset()
    second_offset = wall.replace(tzinfo=tz, fold=1).utcoffset()
    assert first_offset is not None
    assert second_offset is not None
    if first_offset >= second_offset:
        return first  # exists once, or the first reading of a repeated time
    # In a gap, fold=0 reads with the offset before the change and lands after
    # the gap; fold=1 with the offset after it and lands before the gap.
    before = (wall - second_offset).replace(tzinfo=UTC)
    after = (wall - first_offset).replace(tzinfo=UTC)
    transition = _bisect(before, after, _offset_at(before, tz), tz)
    return transition.astimezone(tz)
