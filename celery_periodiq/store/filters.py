"""What a page of entries shows (:class:`Query`: a search, a state, an alert, an owner)
and how the indexes the scripts keep per partition answer it: whether each of a batch
of names matches (a pipeline of membership tests, :func:`keeps`), and which index lists
every match when it is small enough to read whole (:func:`sources`).

An entry's state comes from the indexes as :attr:`StoredEntry.status
<celery_periodiq.store.views.StoredEntry.status>` ranks it: quarantined (the
``quarantine`` hash) > paused > running (a ``running`` marker still live) > disabled >
ended (of a clock-driven entry: not one of the cluster ``events``) > active.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery_periodiq.errors import PageError, shown
from celery_periodiq.protocol.keys import Keys, Partition
from celery_periodiq.store.lanes import Lane, lex_bounds

__all__ = ["ALERTS", "STATES", "Query", "Source", "keeps", "sources"]

STATES = ("active", "running", "paused", "disabled", "ended", "quarantined")
ALERTS = ("overdue", "failing")
_LONGEST = 1000
"""The longest search text taken (characters)."""

Source = list[tuple[str, Callable[[Partition], str]]]
"""Indexes whose members, together, include every match: ``(kind, key of a partition)``
with kind ``set``, ``hash``, ``zset``, ``live`` (a zset's members whose score is still
to come) or ``lex`` (the names that start with the query's prefix)."""

_TAIL: Source = [
    ("set", lambda part: part.paused),
    ("set", lambda part: part.disabled),
    ("set", lambda part: part.ended),
    ("hash", lambda part: part.quarantine),
    ("hash", lambda part: part.events),
]
"""Where the entries with no next run are: what is not due is paused, disabled, ended,
quarantined, or fires on a cluster event."""


@dataclass(frozen=True, slots=True)
class Query:
    """Which entries a page shows: all, or those whose name contains ``search`` (any
    case) or starts with ``prefix``, in ``state``, with ``alert``, tagged ``owner``."""

    search: str = ""
    prefix: str | None = None
    state: str | None = None
    alert: str | None = None
    owner: str | None = None

    @classmethod
    def of(
        cls,
        q: str | None = None,
        state: str | None = None,
        alert: str | None = None,
        owner: str | None = None,
    ) -> Query:
        """The query of a search text (``text*``: names that start with ``text``) and
        filters; empty values are no filter.

        Raises:
            PageError: a value that is none of those allowed.
        """
        if q is not None and (not isinstance(q, str) or len(q) > _LONGEST):
            raise PageError(f"q={shown(q)} is invalid (allowed: text of at most {_LONGEST})")
        if state and state not in STATES:
            raise PageError(f"state={shown(state)} is invalid (allowed: {', '.join(STATES)})")
        if alert and alert not in ALERTS:
            raise PageError(f"alert={shown(alert)} is invalid (allowed: {', '.join(ALERTS)})")
        if owner is not None and not isinstance(owner, str):
            raise PageError(f"owner={shown(owner)} is invalid (allowed: an owner tag)")
        text = (q or "").strip()
        prefix = text[:-1] if text.endswith("*") else None
        return cls(
            search="" if prefix is not None else text.casefold(),
            prefix=prefix or None,
            state=state or None,
            alert=alert or None,
            owner=owner or None,
        )

    @property
    def filtered(self) -> bool:
        """Whether the query leaves out any entry."""
        return bool(self.search or self.prefix or self.state or self.alert or self.owner)

    def named(self, name: str) -> bool:
        """Whether ``name`` matches the search and the prefix."""
        if self.prefix is not None and not name.startswith(self.prefix):
            return False
        return not self.search or self.search in name.casefold()


def sources(query: Query, tail: bool = False) -> list[Source]:
    """Each index that lists every match of ``query`` (with ``tail``: of it among the
    entries with no next run); the caller reads the smallest one whole."""
    found: list[Source] = []
    if query.state and query.state != "active":
        found.append([_STATE_INDEX[query.state]])
    if query.alert == "overdue":
        found.append([("zset", lambda part: part.overdue)])
    if query.alert == "failing":
        found.append([("zset", lambda part: part.failing)])
    if query.owner:
        owner = query.owner
        found.append([("set", lambda part: part.owner(owner))])
    if query.prefix:
        found.append([("lex", lambda part: part.names)])
    if tail:
        found.append(_TAIL)
    return found


_STATE_INDEX: dict[str, tuple[str, Callable[[Partition], str]]] = {
    "quarantined": ("hash", lambda part: part.quarantine),
    "paused": ("set", lambda part: part.paused),
    "running": ("live", lambda part: part.running),
    "disabled": ("set", lambda part: part.disabled),
    "ended": ("set", lambda part: part.ended),
}


def ask_size(pipe: Any, kind: str, key: str, now: int, prefix: str | None) -> None:
    """Queue the command that counts the members of one index."""
    if kind == "set":
        pipe.scard(key)
    elif kind == "hash":
        pipe.hlen(key)
    elif kind == "zset":
        pipe.zcard(key)
    elif kind == "live":
        pipe.zcount(key, f"({now}", "+inf")
    else:
        pipe.zlexcount(key, *lex_bounds(prefix))


def ask_members(pipe: Any, kind: str, key: str, now: int, prefix: str | None) -> None:
    """Queue the command that reads the members of one index."""
    if kind == "set":
        pipe.smembers(key)
    elif kind == "hash":
        pipe.hkeys(key)
    elif kind == "zset":
        pipe.zrange(key, 0, -1)
    elif kind == "live":
        pipe.zrangebyscore(key, f"({now}", "+inf")
    else:
        pipe.zrangebylex(key, *lex_bounds(prefix))


def keeps(
    client: Any, keys: Keys, query: Query, lanes: list[Lane], now: int, not_due: bool = False
) -> list[bool]:
    """Whether each of ``lanes`` matches ``query`` (with ``not_due``: and has no next
    run): the name tests here, the rest in one pipeline of membership tests."""
    if query.prefix is None and query.search:  # the common search, without a call a name
        needle = query.search
        keep = [needle in name.casefold() for _, name, _ in lanes]
    else:
        keep = [query.named(name) for _, name, _ in lanes]
    if not (query.state or query.alert or query.owner or not_due):
        return keep
    groups: dict[int, list[int]] = {}
    for i, (_, _, part) in enumerate(lanes):
        if keep[i]:
            groups.setdefault(part, []).append(i)
    pipe = client.pipeline(transaction=False)
    asked = 0  # commands per partition: the same for each
    for part, members in groups.items():
        asked = _ask(pipe, keys.part(part), query, [lanes[i][1] for i in members], not_due)
    replies = pipe.execute() if groups else []
    for g, members in enumerate(groups.values()):
        facts = replies[g * asked : (g + 1) * asked]
        for j, i in enumerate(members):
            keep[i] = _matches(query, [reply[j] for reply in facts], now, not_due)
    return keep


def _ask(pipe: Any, part: Partition, query: Query, names: list[str], not_due: bool) -> int:
    """Queue the membership tests of ``names``; returns how many commands."""
    asked = 0
    if query.state:
        pipe.hmget(part.quarantine, names)
        pipe.smismember(part.paused, names)
        pipe.zmscore(part.running, names)
        pipe.smismember(part.disabled, names)
        pipe.smismember(part.ended, names)
        pipe.hmget(part.events, names)
        asked += 6
    if query.alert:
        pipe.zmscore(part.overdue if query.alert == "overdue" else part.failing, names)
        asked += 1
    if query.owner:
        pipe.smismember(part.owner(query.owner), names)
        asked += 1
    if not_due:
        pipe.zmscore(part.due, names)
        asked += 1
    return asked


def _matches(query: Query, facts: list[Any], now: int, not_due: bool) -> bool:
    """Whether one name's answers to :func:`_ask` match."""
    if query.state:
        if status(facts[:6], now) != query.state:
            return False
        facts = facts[6:]
    if query.alert:
        if facts[0] is None:
            return False
        facts = facts[1:]
    if query.owner:
        if not facts[0]:
            return False
        facts = facts[1:]
    return not not_due or facts[0] is None


def status(facts: list[Any], now: int) -> str:
    """An entry's status from the indexes (see the module's docstring): ``facts`` are
    its answers to the six state tests of :func:`_ask`."""
    quarantined, paused, running, disabled, ended, event = facts
    if quarantined is not None:
        return "quarantined"
    if paused:
        return "paused"
    if running is not None and float(running) > now:
        return "running"
    if disabled:
        return "disabled"
    if ended and event is None:
        return "ended"
    return "active"
