"""Messages straight into a Redis broker's queue list, as kombu's Redis transport puts them.

kombu's ``Producer.publish`` serialises, retries, routes and batches each message
through several layers; for a tick whose message differs from the last one of
its kind only in a few fields, the Publisher (publish.py) can put it in the
queue list itself, in a pipeline of its own. It does so only where it has
checked that it would write exactly what kombu wrote: kombu publishes the first
message of each kind while :func:`capturing` records the message it puts, and
:func:`learn` keeps that as a template, its JSON cut where a tick's values go, only
if :func:`render` rebuilds it exactly.

Most of what a tick puts in its message is the same for every tick of its kind with
the same numbers (the interval, the limits): a template keeps, per such *shape*, its
JSON with all of that written in, so that a tick writes only its own values (task id,
entry, tick, expiry, arguments, delivery tag) into one format string.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from kombu.serialization import dumps as serialize
from kombu.utils.json import JSONEncoder, dumps

from celery_periodiq.protocol.headers import (
    HEADER_ENTRY,
    HEADER_EXPIRES,
    HEADER_MISSED,
    HEADER_PERIODIC_TASK_NAME,
    HEADER_TICK,
)

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
    """Whether ``channel`` is kombu's Redis channel, publishing as its batches do (its
    transport's settings read once per channel: asked for each tick, they cost about
    what the rest of a tick's message does)."""
    batches = getattr(channel, _USABLE, None)
    if batches is None:
        batches = type(channel).__module__ == "kombu.transport.redis" and bool(
            getattr(channel, "supports_batch_publish", False)
        )
        with contextlib.suppress(AttributeError):  # a channel that takes no attribute
            setattr(channel, _USABLE, batches)
    # queues declared with x-expires (kombu's way for them), asked each time: declared later
    return bool(batches) and not getattr(channel, "_expires", None)


_USABLE = "_periodiq_usable"


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
_TRACE_HEADERS = ("traceparent", "tracestate")  # a traced tick's context (tick_tracing.py)
_TICK_HEADERS = frozenset(
    {"id", "root_id", "expires", "timelimit", "argsrepr", "kwargsrepr", HEADER_PERIODIC_TASK_NAME}
).union(_TRACE_HEADERS)
_TICK_HEADER_PREFIX = "periodiq_"
_TICK_PROPERTIES = ("correlation_id", "expiration", "delivery_tag")
_SLOT = re.compile(r'"\\u0000periodiq-slot:(\d+)\\u0000"')
"""A slot's mark as it reads in JSON (the NUL characters escaped)."""
_ENCODE = JSONEncoder().encode
"""kombu's ``dumps`` without building an encoder per call."""
_quoted = encode_basestring_ascii  # a string as _ENCODE writes it


# The slots whose values change with each tick (the others, with its shape: see the
# module docstring).
_OWN_SLOTS = frozenset(
    {
        ("headers", "id"),
        ("headers", "root_id"),
        ("headers", HEADER_ENTRY),
        ("headers", HEADER_PERIODIC_TASK_NAME),  # the entry's name: entries share a template
        ("headers", HEADER_TICK),
        ("headers", HEADER_EXPIRES),
        ("headers", HEADER_MISSED),
        ("headers", "argsrepr"),  # the arguments: entries alike but for them share a shape
        ("headers", "kwargsrepr"),
        ("body", ""),
        ("properties", "correlation_id"),
        ("properties", "expiration"),
        ("properties", "delivery_tag"),
        *(("headers", name) for name in _TRACE_HEADERS),
    }
)
# Shapes kept per template; beyond this many, they are all dropped.
_SHAPES = 256


@dataclass(frozen=True, slots=True)
class _Shaped:
    """A template's JSON with a shape's values written in: ``text % values``, the
    values (JSON) of ``slots`` in order."""

    text: str
    slots: tuple[tuple[str, str], ...]


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
    shapes: dict[str, _Shaped] = field(default_factory=dict, compare=False)
    """Per shape (the ``repr`` of the values of the slots not a tick's own), the JSON
    with those written in."""

    shaped_headers: tuple[str, ...] = ()
    """The headers whose values make the shape (not a tick's own), in the slots' order."""


def encode_body(channel: Any, body: Any, serializer: str) -> str:
    """``body`` as kombu's Redis channel stores it: serialised, then body-encoded."""
    _, _, payload = serialize(body, serializer=serializer)
    encoded, _ = channel.encode_body(payload, channel.body_encoding)
    return str(encoded)


class _Random(threading.local):
    """``os.urandom`` read 4 KiB at a time (one system call for 256 tags), per thread, in hex."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        self.buffer, self.used = "", 0

    def take32(self) -> str:
        """32 random hex digits."""
        if self.used + 32 > len(self.buffer):
            self.buffer, self.used = os.urandom(4096).hex(), 0
        self.used += 32
        return self.buffer[self.used - 32 : self.used]


_random = _Random()
# a forked child must not hand out the tags its parent has left in its buffer
os.register_at_fork(after_in_child=_random.forget)
# The RFC 4122 variant: the digit's two high bits made 10 (0x8 | digit & 0x3).
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _uuid4() -> str:
    """``str(uuid.uuid4())`` (what kombu tags a message with), without a UUID object:
    random hex digits with the version digit made 4 and the variant's bits set."""
    hexed = _random.take32()
    variant = _VARIANT[hexed[16]]
    return f"{hexed[:8]}-{hexed[8:12]}-4{hexed[13:16]}-{variant}{hexed[17:20]}-{hexed[20:]}"


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
    merged = raw.message["headers"] | headers
    # repr tells apart what JSON writes apart (1, 1.0 and True; 0.0 and -0.0), in C
    shape = repr([merged[name] for name in raw.shaped_headers])
    shaped = raw.shapes.get(shape)
    if shaped is None:
        if len(raw.shapes) >= _SHAPES:
            raw.shapes.clear()
        shaped = raw.shapes[shape] = _shaped(raw, merged)
    parts = {
        "headers": merged,
        "properties": properties,
        "body": {"": raw.message["body"] if body is None else body},
    }
    return shaped.text % tuple([_encoded(parts[part][name]) for part, name in shaped.slots])


def _shaped(raw: RawTemplate, headers: dict[str, Any]) -> _Shaped:
    """The template's JSON with the values of ``headers`` written in but for a tick's own,
    and ``%s`` where those go."""
    text, own = [raw.pieces[0].replace("%", "%%")], []
    for index, (part, name) in enumerate(raw.slots, 1):
        if (part, name) in _OWN_SLOTS:
            own.append((part, name))
            text.append("%s")
        else:  # a header: the properties and the body are a tick's own
            text.append(_encoded(headers[name]).replace("%", "%%"))
        text.append(raw.pieces[index].replace("%", "%%"))
    return _Shaped("".join(text), tuple(own))


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
        shaped_headers=tuple(
            name for part, name in cut[1] if part == "headers" and (part, name) not in _OWN_SLOTS
        ),
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
