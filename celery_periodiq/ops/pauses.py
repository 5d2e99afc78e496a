"""Pausing with an end and pausing many entries at once: when a pause ends (``until=``:
an instant, a duration, seconds), and which entries a selector names (a list of names,
an owner, a name glob, the whole schedule). The pause itself and its end are
``lua/pause.lua``'s and ``lua/claim.lua``'s (:mod:`celery_periodiq.beat.pauses`).

The functions that take a :class:`Store` run inside the caller's
:meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from celery_periodiq.errors import EntryError, EntryNotFoundError, ScheduleError, shown
from celery_periodiq.model.instants import from_ms, to_ms
from celery_periodiq.model.plan import next_tick_ms
from celery_periodiq.ops.many import BulkResult
from celery_periodiq.ops.steer import check_name, check_owner, not_found, some_names
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.schedules.interval import parse_duration
from celery_periodiq.schedules.once import parse_instant
from celery_periodiq.store.store import Store

__all__ = ["GLOB", "Until", "known", "pause_many", "resume_many", "select", "until_ms"]

Until = datetime | timedelta | float | str
"""An ``until=``: an aware datetime or ISO 8601 text with an offset, a duration
(a timedelta, ``"2h"``, ``"1h30m"``) or seconds from now."""

GLOB = frozenset("*?[")
"""The characters that make a name a glob (``report-*``)."""

_ALLOWED = (
    "an aware datetime or ISO 8601 with an offset, a duration such as '2h' or '1h30m', "
    "or seconds from now"
)


_WHY = {"paused already": "paused already", "changed": "not paused", "missing": "deleted meanwhile"}


def _outcome(names: list[str], replies: list[str], skipped: dict[str, str]) -> BulkResult:
    """pause.lua's reply for each of ``names`` as a result (``skipped``: those not called)."""
    done = []
    for name, reply in zip(names, replies, strict=True):
        if reply == "ok":
            done.append(name)
        else:
            skipped[name] = _WHY.get(reply, reply.replace(": ", " (", 1) + ")")
    return BulkResult(done, skipped)


def until_ms(value: Until | None, now_ms: int) -> int | None:
    """When a pause given ``until=value`` at ``now_ms`` ends (ms); None for no end.

    Raises:
        EntryError: not an instant or a duration, or not after now.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise EntryError(f"until={shown(value)} is invalid (allowed: {_ALLOWED})")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise EntryError(f"until={shown(value)} is invalid: seconds from now must be > 0")
        return now_ms + math.ceil(value * 1000)
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise EntryError(f"until={shown(str(value))} is invalid: the duration must be > 0")
        return now_ms + math.ceil(value / timedelta(milliseconds=1))
    if isinstance(value, str) and not any(c in value for c in "-:T"):
        try:
            return now_ms + math.ceil(parse_duration(value, value) / timedelta(milliseconds=1))
        except ScheduleError:
            raise EntryError(f"until={shown(value)} is invalid (allowed: {_ALLOWED})") from None
    try:
        end = to_ms(parse_instant(value, "until"))
    except ScheduleError as error:
        raise EntryError(f"{error}; a duration such as '2h' is allowed too") from None
    if end <= now_ms:
        raise EntryError(
            f"until={shown(str(value))} is in the past (now: {from_ms(now_ms).isoformat()}); "
            "give a later instant or a duration"
        )
    return end


def select(
    store: Store,
    *,
    name: str | None = None,
    names: Iterable[str] | None = None,
    match: str | None = None,
    owner: str | None = None,
    everything: bool = False,
) -> list[str]:
    """The names one selector names: an entry, the entries ``names`` (see :func:`known`),
    those whose name matches the glob ``match``, those of ``owner``, or every entry.

    Raises:
        EntryError: not exactly one selector, or a bad one.
        EntryNotFoundError: the selector names no entry (or, ``names``, one unknown).
    """
    chosen = (("a name", name), ("names=", names), ("match=", match), ("owner=", owner))
    given = [what for what, value in chosen if value is not None]
    given += ["all=True"] if everything else []
    if len(given) != 1:
        which = f"{' and '.join(given)} given" if given else "none given"
        allowed = "a name, " if name is not None else ""
        raise EntryError(f"give one of {allowed}names=, match=, owner=, all=True ({which})")
    if names is not None:
        return known(store, names)
    if owner is not None:
        names = sorted(store.owned_by(check_owner(owner)))
        if not names:
            raise EntryNotFoundError(f"no entries have owner {shown(owner)}")
        return names
    if name is not None:
        return [name]
    if match is not None and (not isinstance(match, str) or not match):
        raise EntryError(f"match={shown(match)} is invalid (allowed: a glob such as 'report-*')")
    names = sorted(
        found
        for batch in store.scan()
        for found in batch
        if match is None or fnmatch.fnmatchcase(found, match)
    )
    if not names:
        raise EntryNotFoundError(
            "the schedule has no entries" if match is None else f"no entry matches {shown(match)}"
        )
    return names


def known(store: Store, names: object) -> list[str]:
    """``names=`` checked: entry names, each stored (one given twice, once), in order.

    Raises:
        EntryError: not a list of names, or an empty one.
        EntryNotFoundError: a name is no entry's (the message names them; nothing changes).
    """
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        raise EntryError(f"names={shown(names)} is invalid (allowed: a list of entry names)")
    unique = list(dict.fromkeys(check_name(name) for name in names))
    if not unique:
        raise EntryError("names= is empty: select at least one entry")
    found = {item.name for item in store.glance_at(unique)}
    missing = [name for name in unique if name not in found]
    if len(missing) == 1:
        raise EntryNotFoundError(f"{not_found(store, missing[0]).args[0]}; nothing was changed")
    if missing:
        raise EntryNotFoundError(
            f"no entries named {some_names(missing)} ({len(missing)} of the {len(unique)} "
            "names given); nothing was changed"
        )
    return unique


def pause_many(
    store: Store, names: list[str], note: str, end_ms: int | None, audit: Audit | None = None
) -> BulkResult:
    """Pause each of ``names`` that is not paused yet (one paused already keeps its own
    pause and note), pipelined; returns those paused, each recorded by ``audit``, and why
    each other was not."""
    argument = store.audit_argument(audit)
    replies = store.scripts.pause_each(names, note, end_ms, fresh=True, audit=argument)
    return _outcome(names, replies, {})


def resume_many(store: Store, names: list[str], audit: Audit | None = None) -> BulkResult:
    """Resume each of ``names`` that is paused, from its next tick after now, pipelined;
    returns those resumed, each recorded by ``audit``, and why each other was not."""
    now = from_ms(store.now_ms())
    items: list[tuple[str, int | None, int | None]] = []
    loaded = {item.name: item for item in store.load(names)}
    skipped: dict[str, str] = {}
    for name in names:
        item = loaded.get(name)
        if item is None or not item.paused:
            skipped[name] = "deleted meanwhile" if item is None else "not paused"
            continue
        upcoming = None if item.entry is None else next_tick_ms(item.entry, now)
        items.append((item.name, *((None, None) if upcoming is None else upcoming)))
    argument = store.audit_argument(audit)
    replies = store.scripts.resume_each(items, paused_only=True, audit=argument)
    result = _outcome([name for name, _, _ in items], replies, skipped)
    order = {name: index for index, name in enumerate(names)}
    result.skipped = dict(sorted(skipped.items(), key=lambda pair: order[pair[0]]))
    return result
