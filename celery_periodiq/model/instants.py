"""Instants as the beat keeps them: whole milliseconds since the epoch, in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["from_ms", "past_ms", "tick_text", "to_ms"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_ms(instant: datetime) -> int:
    """Whole milliseconds since the epoch."""
    return (instant - _EPOCH) // _MS


def past_ms(instant: datetime) -> datetime:
    """The last microsecond of ``instant``'s millisecond.

    The beat keeps ticks in whole milliseconds (``to_ms``) while a schedule may fire
    between them (``start_at`` with microseconds, solar events): the next fire after
    a stored tick is the schedule's next fire after this instant, never one that
    falls in the stored tick's own millisecond.
    """
    return _EPOCH + timedelta(milliseconds=to_ms(instant) + 1, microseconds=-1)


def from_ms(ms: int) -> datetime:
    """An aware UTC datetime from milliseconds since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def tick_text(nominal_ms: int) -> str:
    """A tick's nominal instant as the beat and the worker both log it (UTC, ms)."""
    return from_ms(nominal_ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{nominal_ms % 1000:03d}Z"
