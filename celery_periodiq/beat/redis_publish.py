"""Messages straight into a Redis broker's queue list, as kombu's Redis transport puts them.

kombu's ``Producer.publish`` serialises, retries, routes and batches each message
through several layers; for a tick whose message differs from the last one of
its kind only in a few fields, the Publisher (publish.py) can put it in the
queue list itself, in a pipeline of its own. It does so only where it has
checked that it would write exactly what kombu wrote: kombu publishes the first
message of each kind while :func:`capturing` records the message it puts, and
:func:`learn` keeps that as a template, its JSON cut where a tick's values go, only
if :func:`render` rebuilds it exactly.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any

from kombu.serialization import dumps as serialize
from kombu.utils.json import JSONEncoder, dumps

__all__ = [
    "NotStagedError",
    "RawTemplate",
    "capturing",
    "diverting",
    "learn",
    "push",
    "render",
    "usable",
]


def usable(channel: Any) -> bool:
    """Whether ``channel`` is kombu's Redis channel, publishing as its batches do."""
    return (
        type(channel).__module__ == "kombu.transport.redis"
        and bool(getattr(channel, "supports_batch_publish", False))
        and not getattr(channel, "_expires", None)  # queues with x-expires: kombu's way
    )


@contextlib.contextmanager
def capturing(channel: Any) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Record each ``(queue, message)`` the Redis channel puts while inside."""
    captured: list[tuple[str, dict[str, Any]]] = []
    put = channel._put

    def recording(queue: str, message: dict[str, Any], **kwargs: Any) -> Any:
        captured.append((queue, copy.deepcopy(message)))
        return put(queue, message, **kwargs)

    with _replaced_put(channel, recording):
        yield captured


@contextlib.contextmanager
def diverting(channel: Any, staged: list[tuple[str, str]]) -> Iterator[None]:
    """Inside, each message the Redis channel would put is appended to ``staged`` (its
    list's key, with the priority's, and its JSON) instead: rendered, not sent."""

    def rendering(queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        priority = channel._get_message_priority(message, reverse=False)
        staged.append((channel._q_for_pri(queue, priority), dumps(message)))

    def refusing(*args: Any, **kwargs: Any) -> None:
        raise NotStagedError("a fanout exchange's message cannot be staged")

    channel._put_fanout = refusing
    try:
        with _replaced_put(channel, rendering):
            yield
    finally:
        del channel._put_fanout


class NotStagedError(Exception):
    """A message that cannot be rendered ahead: it is sent when due instead."""


@contextlib.contextmanager
def _replaced_put(channel: Any, put: Any) -> Iterator[None]:
    previous = channel.__dict__.get("_put")
    channel._put = put
    try:
        yield
    finally:
        if previous is None:
            del channel._put  # the class's method again
        else:
            channel._put = previous


# What a tick changes in a message: these headers, and the properties and body below.
_TICK_HEADERS = frozenset({"id", "root_id", "expires", "timelimit", "argsrepr", "kwargsrepr"})
_TICK_HEADER_PREFIX = "periodiq_"
_TICK_PROPERTIES = ("correlation_id", "expiration", "delivery_tag")
_SLOT = re.compile(r'"\\u0000periodiq-slot:(\d+)\\u0000"')
"""A slot's mark as it reads in JSON (the NUL characters escaped)."""
_ENCODE = JSONEncoder().encode
"""kombu's ``dumps`` without building an encoder per call."""
_quoted = encode_basestring_ascii  # a string as _ENCODE writes it


@dataclass(frozen=True, slots=True)
class RawTemplate:
    """A message kombu put, and the list it went to, as JSON cut where a tick's values
    go: ``pieces[0]``, a slot's value, ``pieces[1]``, ... (one piece more than slots)."""

    key: str
    pieces: tuple[str, ...]
    slots: tuple[tuple[str, str], ...]
    """``("headers", name)``, ``("properties", name)`` or ``("body", "")``, in order."""
    message: dict[str, Any]
    serializer: str


def encode_body(channel: Any, body: Any, serializer: str) -> str:
    """``body`` as kombu's Redis channel stores it: serialised, then body-encoded."""
    _, _, payload = serialize(body, serializer=serializer)
    encoded, _ = channel.encode_body(payload, channel.body_encoding)
    return str(encoded)


class _Random(threading.local):
    """``os.urandom`` read 4 KiB at a time (one system call for 256 tags), per thread."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        self.buffer, self.used = b"", 0

    def take16(self) -> bytes:
        if self.used + 16 > len(self.buffer):
            self.buffer, self.used = os.urandom(4096), 0
        self.used += 16
        return self.buffer[self.used - 16 : self.used]


_random = _Random()
# a forked child must not hand out the tags its parent has left in its buffer
os.register_at_fork(after_in_child=_random.forget)


def _uuid4() -> str:
    """``str(uuid.uuid4())`` (what kombu tags a message with), without a UUID object."""
    raw = bytearray(_random.take16())
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


_CONSTANTS = {None: "null", True: "true", False: "false"}


def _encoded(value: Any) -> str:
    """``value`` as kombu's ``dumps`` writes it inside a message."""
    kind = type(value)
    if kind is str:
        return _quoted(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if value is None or kind is bool:
        return _CONSTANTS[value]
    if kind is list:
        return "[" + ", ".join(map(_encoded, value)) + "]"
    return _ENCODE(value)


def render(
    raw: RawTemplate,
    headers: dict[str, Any],
    correlation_id: str,
    expiration: float | None,
    body: str | None,
    delivery_tag: str | None = None,
) -> str:
    """The JSON of the template's message with a tick's fields (``headers``: those the
    tick sets; ``body`` None: the template's; ``expiration`` None: the template's): what
    ``dumps`` makes of the message with those fields put in."""
    properties = {
        "correlation_id": correlation_id,
        "delivery_tag": delivery_tag or _uuid4(),
        "expiration": raw.message["properties"].get("expiration")
        if expiration is None
        else str(int(expiration * 1000)),
    }
    pieces = raw.pieces
    out = [pieces[0]]
    for index, (part, name) in enumerate(raw.slots, 1):
        if part == "headers":
            value = headers[name] if name in headers else raw.message["headers"][name]
        elif part == "properties":
            value = properties[name]
        else:
            value = raw.message["body"] if body is None else body
        out.append(_encoded(value))
        out.append(pieces[index])
    return "".join(out)


def _cut(message: dict[str, Any]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]] | None:
    """``message``'s JSON cut at its slots (see RawTemplate), or None if it cannot be."""
    headers, properties = message.get("headers"), message.get("properties")
    if not isinstance(headers, dict) or not isinstance(properties, dict):
        return None
    slots = [
        ("headers", name)
        for name in headers
        if name in _TICK_HEADERS or name.startswith(_TICK_HEADER_PREFIX)
    ]
    slots += [("properties", name) for name in _TICK_PROPERTIES if name in properties]
    slots.append(("body", ""))
    marked_headers, marked_properties = dict(headers), dict(properties)
    marked = dict(message, headers=marked_headers, properties=marked_properties)
    for index, (part, name) in enumerate(slots):
        mark = f"\x00periodiq-slot:{index}\x00"
        if part == "headers":
            marked_headers[name] = mark
        elif part == "properties":
            marked_properties[name] = mark
        else:
            marked["body"] = mark
    cut = _SLOT.split(dumps(marked))
    order = [int(index) for index in cut[1::2]]
    if sorted(order) != list(range(len(slots))):
        return None
    return tuple(cut[0::2]), tuple(slots[index] for index in order)


def learn(
    channel: Any,
    captured: list[tuple[str, dict[str, Any]]],
    publish: dict[str, Any],
    body: Any,
) -> RawTemplate | None:
    """The template of one captured message, or None unless :func:`render` rebuilds it
    exactly from ``publish`` (the keywords given to ``Producer.publish``) and ``body``."""
    if len(captured) != 1 or publish.get("exchange") or publish.get("compression"):
        return None
    queue, message = captured[0]
    serializer = publish.get("serializer") or "json"
    properties = message.get("properties", {})
    cut = _cut(message)
    if cut is None:
        return None
    raw = RawTemplate(
        key=channel._q_for_pri(queue, channel._get_message_priority(message, reverse=False)),
        pieces=cut[0],
        slots=cut[1],
        message=message,
        serializer=serializer,
    )
    rebuilt = render(
        raw,
        publish.get("headers") or {},
        publish.get("correlation_id", ""),
        publish.get("expiration"),
        encode_body(channel, body, serializer),
        properties.get("delivery_tag"),
    )
    return raw if rebuilt == dumps(message) else None


# Messages per LPUSH: one command puts a list's messages of a flush in the order given.
_PUSH_MOST = 500


def push(client: Any, messages: dict[str, list[str]]) -> None:
    """LPUSH each list's messages, in order, in one round trip; ``messages`` is emptied
    (also when that fails: what was not sent is discarded, as kombu's batch does)."""
    if not messages:
        return
    pipe = client.pipeline(transaction=False)
    try:
        for key, values in messages.items():
            for start in range(0, len(values), _PUSH_MOST):
                pipe.lpush(key, *values[start : start + _PUSH_MOST])
        pipe.execute()
    finally:
        messages.clear()
        pipe.reset()
