"""The cursor of a page of entries: an opaque string that says in which order the pages
go (by name, or by next run) and where the page starts: after a position (the next
page), before one (the previous page), or at an end of the schedule.

A position is a key of the order: ``(score, name)``, where the score is 0 in name order
and the instant of the next run (ms) in next-run order, infinite for the entries that
have none (they come last, by name). The string is URL-safe base64 of a small JSON
object; anything else is refused with a :class:`~celery_periodiq.errors.PageError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from celery_periodiq.errors import PageError, shown

__all__ = ["ORDERS", "Cursor", "Key", "decode", "encode"]

ORDERS = ("name", "next")
"""The orders pages go in: by name, or by next run (then name)."""

Key = tuple[float, str]
"""A position in an order: ``(score, name)``."""

_MOST = 4096
"""The longest cursor read (a name is at most a few hundred bytes)."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts: after ``at`` (forward) or before it (backward); ``at`` None
    is the start (forward) or the end (backward) of the schedule."""

    order: str = "name"
    forward: bool = True
    at: Key | None = None


def encode(cursor: Cursor) -> str:
    """The opaque string of ``cursor``."""
    at: Any = None
    if cursor.at is not None:
        score, name = cursor.at
        if cursor.order == "name":
            at = name
        else:
            at = [None if math.isinf(score) else _number(score), name]
    data = {"o": cursor.order, "d": "a" if cursor.forward else "b", "at": at}
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(text: str) -> Cursor:
    """The cursor a string stands for.

    Raises:
        PageError: it is no cursor of ours (cut, changed, or made up).
    """
    if not isinstance(text, str) or not text or len(text) > _MOST:
        raise _bad(text, "not a cursor string")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw.decode())
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _bad(text, "not a cursor") from None
    if not isinstance(data, dict) or data.get("o") not in ORDERS or data.get("d") not in ("a", "b"):
        raise _bad(text, "no order or direction")
    order, at = data["o"], data.get("at")
    if at is None:
        key = None
    elif order == "name" and isinstance(at, str):
        key = (0.0, at)
    elif order == "next" and _next_position(at):
        key = (math.inf if at[0] is None else float(at[0]), at[1])
    else:
        raise _bad(text, f"no position of the {order!r} order")
    return Cursor(order, data["d"] == "a", key)


def _next_position(at: object) -> bool:
    if not isinstance(at, list) or len(at) != 2 or not isinstance(at[1], str):
        return False
    score = at[0]
    if score is None:
        return True
    return isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score)


def _number(score: float) -> float | int:
    return int(score) if score.is_integer() else score


def _bad(text: object, why: str) -> PageError:
    return PageError(
        f"cursor={shown(text)} is invalid: {why} (use the 'next' or 'previous' of a page)"
    )
