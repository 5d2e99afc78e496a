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
as py-amqp does; tests/test_publish.py checks messages of both ways on a real RabbitMQ.
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

__all__ = ["AmqpTemplate", "capturing", "learn", "send", "usable"]

_TICK_PROPERTIES = {"application_headers", "correlation_id", "expiration"}
"""The properties a tick sets; the others are the template's."""
_TIMEOUTS = ("timeout", "confirm_timeout")
_INT = struct.Struct(">ci")
_LONG = struct.Struct(">cq")
_DOUBLE = struct.Struct(">cd")
_KEPT = (str, int, bool)
"""Types whose equal values encode alike (not floats: 0.0 == -0.0; not lists: [1] == [1.0])."""
_LENGTH = struct.Struct(">I")


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
    publish = channel.basic_publish

    def recorded(message: Any, *args: Any, **kwargs: Any) -> Any:
        named = dict(zip(("exchange", "routing_key"), args, strict=False))
        captured.append((message, {**named, **kwargs}))
        return publish(message, *args, **kwargs)

    channel.basic_publish = recorded
    try:
        yield captured
    finally:
        channel.basic_publish = publish


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
    template = AmqpTemplate(
        pieces=tuple(pieces),
        items={name: (value, _item(name, value)) for name, value in headers.items()},
        body=body,
        publish={k: v for k, v in publish.items() if k not in _TIMEOUTS},
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
) -> None:
    """Publish a tick's message of ``template`` (``headers``: those the tick sets;
    ``expiration`` in seconds, as ``Producer.publish`` takes it) on ``channel``."""
    ttl = None if expiration is None else str(int(expiration * 1000))
    properties = _properties(template, headers, correlation_id, ttl)
    channel.basic_publish(_Encoded(template.body, properties), **template.publish)
