"""Every exception celery_periodiq raises descends from :class:`PeriodiqError`."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

import redis


class PeriodiqError(Exception):
    """Root of every error raised by celery_periodiq."""


class ScheduleError(PeriodiqError, ValueError):
    """A schedule spec, time zone or bound is invalid; the message names the part and the rule."""


class RedisServerError(PeriodiqError):
    """A local ``redis-server`` could not be found, started or stopped."""


class ConfigurationError(PeriodiqError, ValueError):
    """A ``periodiq_*`` setting has a value it cannot have."""


class EntryError(PeriodiqError, ValueError):
    """An entry definition is invalid: bad name, task, arguments or policy."""

    field: str | None = None
    """The option at fault (``"tz"``, ``"args"``, ``"schedule"`` for any schedule option,
    ...), where one is: a form shows the message beside it."""


class EntryNotFoundError(PeriodiqError, KeyError):
    """No entry has that name; the message offers the stored names closest to it (``did
    you mean 'proj.make_report'?``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "entry not found"


class EntryExistsError(PeriodiqError):
    """An entry with that name already exists."""


class DeclaredEntryError(EntryError):
    """The entry is declared in code or beat_schedule: changing it needs ``force``, and the
    next deploy restores the declaration."""


class WindowError(PeriodiqError, ValueError):
    """A maintenance window is invalid (its schedule, duration, start and end, scope or
    policy) or unknown; the message names the part and what is allowed."""


class SimulationError(PeriodiqError, ValueError):
    """A simulation's span, down window or limit is invalid."""


class PageError(PeriodiqError, ValueError):
    """A page's cursor, limit, order, search or filter is invalid; the message names it
    and what is allowed."""


class StoreUnavailableError(PeriodiqError):
    """Redis could not be reached."""


class StoreRefusedError(PeriodiqError):
    """Redis refused a command: a key holds data periodiq did not write (WRONGTYPE), or the
    server will not (no permission, out of memory, read-only replica)."""


class BrokerUnavailableError(PeriodiqError):
    """The Celery broker could not be reached to publish a run, or refused it (its
    connection or channel failed): the message is not the cause."""


class BrokerRefusedError(BrokerUnavailableError):
    """The broker is reached but refused a publish (its channel failed): a beat keeps
    claiming, the claims of that chunk stay in flight."""


class MessageError(EntryError):
    """An entry's message could not be built or encoded: its serializer or compression is
    not installed in this process, or its encoder refused the arguments. The broker is
    not at fault: a beat quarantines that entry alone."""


_SHOWN = 60


def shown(value: object, most: int = _SHOWN) -> str:
    """``repr(value)`` for a message, cut to about ``most`` characters so that a huge
    value cannot drown what the message says: ``'aaaa…' (5000 characters)``."""
    if isinstance(value, str):
        if len(value) <= most:
            return repr(value)
        return f"{(value[:most] + '…')!r} ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}… ({len(text)} characters)"


def did_you_mean(
    word: str, choices: Iterable[str], most: int = 3, show: Callable[[str], str] | None = None
) -> str:
    """``" (did you mean 'x'?)"`` for the choices closest to ``word`` (those that end with
    ``.word`` or ``:word``, a name qualified by its module, first), or ``""`` when none is
    close: the end of a message that says ``word`` is unknown. ``show`` writes a choice
    (default: :func:`shown`, quoted)."""
    pool = list(dict.fromkeys(choices))
    qualified = [choice for choice in pool if choice.endswith((f".{word}", f":{word}"))]
    close = difflib.get_close_matches(word, pool, n=most, cutoff=0.6)
    if close:  # the closest, and those nearly as close: not every name above the cutoff
        best = difflib.SequenceMatcher(None, word, close[0]).ratio()
        close = [c for c in close if difflib.SequenceMatcher(None, word, c).ratio() > best - 0.1]
    found = list(dict.fromkeys(sorted(qualified) + close))[:most]
    if not found:
        return ""
    return " (did you mean " + " or ".join(map(show or shown, found)) + "?)"


class ReplicasBehindError(PeriodiqError, redis.RedisError):
    """Not every replica attached to the primary (or fewer than ``periodiq_replica_acks``)
    acknowledged a write in time: what it decided is not acted on (a beat publishes none
    of the claims; they are taken over after their lease; a worker writes its run's start
    again until they have it)."""

    now_ms: int | None = None
    """The Redis clock (ms) when the write was made, where the reply said."""
