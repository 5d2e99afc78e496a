"""Ticks put straight onto a py-amqp channel (RabbitMQ): the frames kombu's
``Producer.publish`` has py-amqp write, with what every tick of a template shares
encoded once.

py-amqp encodes each message's properties afresh, its headers table value by value
through a chain of ``isinstance`` checks: a third of a beat's CPU per tick on
RabbitMQ. A template (publish.py) keeps, from its first message as py-amqp was given
it, the encoded properties that do not change from tick to tick, and each header's
encoded item; a tick's message is those pieces and its own values (its headers, task
id and expiration), published with the channel's own ``basic_publish``. :func:`learn`
keeps a template only where that encodes the first message's properties byte for byte
as py-amqp does; tests/test_amqp_publish.py checks messages of both ways on a real
RabbitMQ.

Inside a Publisher's batch, a chunk's messages are not written one by one: py-amqp
writes each with a socket call of its own, after asking the socket whether the broker
said anything (a blocked connection, a channel it closed). :class:`Frames` lays out the
frames py-amqp would write (method, content header and body) and writes a chunk's in
one call, asking once before it (a channel the broker closed fails that write, or the
flush's round trip after it: the chunk stays in flight either way). A channel in
confirm mode, or a message too big for one frame, is published by py-amqp as before,
after what was buffered.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import amqp
import amqp.serialization

# py-amqp's stubs say less than its code does (dumps takes bytes, a Message encodes its
# properties); _write_item, its encoder of one table item, is private: without it, or
# with another Channel class, this way is not taken
_SERIALIZATION: Any = amqp.serialization
_write_item: Any = getattr(_SERIALIZATION, "_write_item", None)
Channel: Any = amqp.Channel
Message: Any = amqp.Message

__all__ = ["AmqpTemplate", "Frames", "capturing", "learn", "send", "usable"]

_TICK_PROPERTIES = {"application_headers", "correlation_id", "expiration"}
"""The properties a tick sets; the others are the template's."""
_TIMEOUTS = ("timeout", "confirm_timeout")
_INT = struct.Struct(">ci")
_LONG = struct.Struct(">cq")
_DOUBLE = struct.Struct(">cd")
_KEPT = (str, int, bool)
"""Types whose equal values encode alike (not floats: 0.0 == -0.0; not lists: [1] == [1.0])."""
_LENGTH = struct.Struct(">I")
_FRAME = struct.Struct(">BHI")
"""A frame's type, channel and size; its payload and the end octet follow."""
_CONTENT_HEADER = struct.Struct(">HHQ")
"""A content header's class (Basic), weight (0) and body size; the properties follow."""
_FRAME_END = b"\xce"
_BASIC_PUBLISH = struct.pack(">HH", 60, 40)
_FRAME_OVERHEAD = 40
"""What py-amqp adds to a message's sizes when it tells whether it fits one frame."""
_WRITE_MOST = 1 << 20
"""Buffered frames are written once they reach this many bytes."""


@dataclass(frozen=True, slots=True)
class AmqpTemplate:
    """A template's message as py-amqp was given it, cut where a tick's values go."""

    pieces: tuple[bytes | str, ...]
    """The encoded properties: bytes the same for every tick, and the names of those a
    tick sets, in py-amqp's order."""
    items: dict[str, tuple[Any, bytes]]
    """Each header of the template: its value, and it encoded as an item of the table (a
    tick's string, integer or bool equal to it, and of its type, is not encoded again)."""
    body: bytes
    publish: dict[str, Any]
    """``basic_publish``'s keywords: exchange, routing key, mandatory, immediate."""
    method: bytes
    """The Basic.Publish method frame's payload, as py-amqp encodes it."""


class _Encoded(Message):  # type: ignore[misc]  # py-amqp is untyped
    """A message whose properties are encoded already."""

    def __init__(self, body: bytes, properties: bytes) -> None:
        self.body, self._encoded = body, properties
        self.properties: dict[str, Any] = {}

    def _serialize_properties(self) -> bytes:
        encoded: bytes = self._encoded
        return encoded


def usable(channel: Any) -> bool:
    """Whether ``channel`` is py-amqp's (kombu's ``pyamqp`` transport)."""
    return _write_item is not None and isinstance(channel, Channel)


@contextlib.contextmanager
def capturing(channel: Any) -> Iterator[list[tuple[Any, dict[str, Any]]]]:
    """Record what ``channel.basic_publish`` is given inside (and publish it)."""
    captured: list[tuple[Any, dict[str, Any]]] = []
    publish, own = channel.basic_publish, vars(channel).get("basic_publish")

    def recorded(message: Any, *args: Any, **kwargs: Any) -> Any:
        named = dict(zip(("exchange", "routing_key"), args, strict=False))
        captured.append((message, {**named, **kwargs}))
        return publish(message, *args, **kwargs)

    channel.basic_publish = recorded
    try:
        yield captured
    finally:
        if own is None:
            del channel.basic_publish  # the class's method again (Frames.add asks)
        else:
            channel.basic_publish = own  # confirm mode's


def _item(name: str, value: Any) -> bytes:
    """``name`` and ``value`` as an item of a headers table, as py-amqp encodes it."""
    kind, key = type(value), name.encode("utf-8", "surrogatepass")
    head = bytes((len(key),)) + key
    if kind is str:
        text: bytes = value.encode("utf-8", "surrogatepass")
        return head + b"S" + _LENGTH.pack(len(text)) + text
    if kind is int:
        if -2147483647 <= value <= 2147483647:
            return head + _INT.pack(b"I", value)
        return head + _LONG.pack(b"L", value)
    if kind is float:
        return head + _DOUBLE.pack(b"d", value)
    out = BytesIO()
    _write_item(value, out.write, [])  # the others: bool, float, None, lists, ...
    return head + out.getvalue()


def _properties(
    template: AmqpTemplate, headers: dict[str, Any], correlation_id: str, expiration: str | None
) -> bytes:
    """The encoded properties of a tick's message (``headers``: those the tick sets)."""
    items, parts = template.items, []
    for name, (value, encoded) in items.items():
        if name in headers:
            given = headers[name]
            if type(given) is not type(value) or type(given) not in _KEPT or given != value:
                encoded = _item(name, given)
        parts.append(encoded)
    parts += [_item(name, value) for name, value in headers.items() if name not in items]
    table = b"".join(parts)
    own = {
        "application_headers": _LENGTH.pack(len(table)) + table,
        "correlation_id": _short(correlation_id),
        "expiration": b"" if expiration is None else _short(expiration),
    }
    return b"".join([own[p] if isinstance(p, str) else p for p in template.pieces])


def _short(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return bytes((len(raw),)) + raw  # ValueError past 255 bytes, as struct's error in py-amqp


def learn(captured: list[tuple[Any, dict[str, Any]]], own: dict[str, Any]) -> AmqpTemplate | None:
    """The template of one captured message, or None unless its properties come out of
    :func:`_properties` as py-amqp encodes them (``own``: the headers a tick sets)."""
    if len(captured) != 1:
        return None
    message, publish = captured[0]
    properties = message.properties
    headers = properties.get("application_headers")
    body, encoding = message.body, properties.get("content_encoding")
    if isinstance(body, str) and isinstance(encoding, str):  # as py-amqp's frame writer does
        body = body.encode(encoding)
    if (
        type(message) is not Message
        or not isinstance(body, bytes)
        or not isinstance(headers, dict)
        or not all(type(name) is str for name in headers)
        or set(publish) - {"exchange", "routing_key", "mandatory", "immediate", *_TIMEOUTS}
        or any(publish.get(name) is not None for name in _TIMEOUTS)
    ):
        return None
    # py-amqp's flags: a bit per property present, from the top (its 14 fit one word)
    flags, pieces = 0, list[bytes | str]([b""])
    for index, (name, kind) in enumerate(Message.PROPERTIES):
        if properties.get(name) is None:
            continue
        flags |= 1 << (15 - index)
        if name in _TICK_PROPERTIES:
            pieces.append(name)
        else:
            pieces.append(_SERIALIZATION.dumps(kind.encode(), [properties[name]]))
    pieces[0] = struct.pack(">H", flags)
    given = {k: v for k, v in publish.items() if k not in _TIMEOUTS}
    try:
        fields = ("exchange", "routing_key", "mandatory", "immediate")
        defaults = ("", "", False, False)  # py-amqp's basic_publish's
        values = [given.get(name, default) for name, default in zip(fields, defaults, strict=True)]
        method = _SERIALIZATION.dumps("Bssbb", (0, *values))
    except (TypeError, ValueError, struct.error):
        return None
    template = AmqpTemplate(
        pieces=tuple(pieces),
        items={name: (value, _item(name, value)) for name, value in headers.items()},
        body=body,
        publish=given,
        method=_BASIC_PUBLISH + method,
    )
    try:
        rebuilt = _properties(
            template, own, properties["correlation_id"], properties.get("expiration")
        )
    except (KeyError, ValueError, struct.error):
        return None
    return template if rebuilt == message._serialize_properties() else None


def send(
    channel: Any,
    template: AmqpTemplate,
    headers: dict[str, Any],
    correlation_id: str,
    expiration: float | None,
    frames: Frames | None = None,
) -> None:
    """Publish a tick's message of ``template`` (``headers``: those the tick sets;
    ``expiration`` in seconds, as ``Producer.publish`` takes it) on ``channel``; into
    ``frames`` where they take it, to be written with the others."""
    ttl = None if expiration is None else str(int(expiration * 1000))
    properties = _properties(template, headers, correlation_id, ttl)
    if frames is not None:
        if frames.add(channel, template, properties):
            return
        frames.write()  # what was buffered goes first
    channel.basic_publish(_Encoded(template.body, properties), **template.publish)


class Frames:
    """Messages' frames for one channel, buffered to be written in one socket call."""

    def __init__(self) -> None:
        self._channel: Any = None
        self._buffer: list[bytes] = []
        self._size = 0

    def add(self, channel: Any, template: AmqpTemplate, properties: bytes) -> bool:
        """Buffer a message's frames, as py-amqp lays them out; False where py-amqp must
        publish it (a channel in confirm mode, or with its ``basic_publish`` replaced;
        a message that does not fit one frame)."""
        connection = getattr(channel, "connection", None)
        body = template.body
        if (
            "basic_publish" in vars(channel)  # confirm mode sets its own
            or connection is None
            or len(template.method) - 4 + len(properties) + len(body) + _FRAME_OVERHEAD
            > connection.frame_max - 8
        ):
            return False
        if channel is not self._channel:
            self.write()
            self._channel = channel
        number, method = channel.channel_id, template.method
        header = _CONTENT_HEADER.pack(60, 0, len(body)) + properties
        parts = [_FRAME.pack(1, number, len(method)), method, _FRAME_END]
        parts += [_FRAME.pack(2, number, len(header)), header, _FRAME_END]
        if body:
            parts += [_FRAME.pack(3, number, len(body)), body, _FRAME_END]
        frames = b"".join(parts)
        self._buffer.append(frames)
        self._size += len(frames)
        if self._size >= _WRITE_MOST:
            self.write()
        return True

    def drop(self) -> None:
        """Forget what is buffered (a batch that failed: its claims stay in flight)."""
        self._channel, self._buffer, self._size = None, [], 0

    def write(self) -> None:
        """Write what is buffered, as py-amqp's ``basic_publish`` writes one message: the
        broker's notices read first (where it sends them), and a write that times out is
        the connection's failure.

        Raises:
            Exception: py-amqp's (what was buffered is dropped: its claims stay in flight).
        """
        channel, buffered = self._channel, b"".join(self._buffer)
        self.drop()
        if not buffered:
            return
        connection = channel.connection
        if connection is None:
            raise amqp.RecoverableConnectionError("basic_publish: connection closed")
        if connection.client_properties.get("capabilities", {}).get("connection.blocked"):
            with contextlib.suppress(TimeoutError):
                connection.drain_events(timeout=0)
        try:
            connection.transport.write(buffered)
        except TimeoutError as error:
            raise amqp.RecoverableConnectionError("basic_publish: timed out") from error
