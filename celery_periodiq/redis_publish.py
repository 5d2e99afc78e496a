"""Messages straight into a Redis broker's queue list, as kombu's Redis transport puts them.

kombu's ``Producer.publish`` serialises, retries, routes and batches each message
through several layers; for a tick whose message differs from the last one of
its kind only in a few fields, the Publisher (publish.py) can put it in the
queue list itself, in a pipeline of its own. It does so only where it has
checked that it would write exactly what kombu wrote: kombu publishes the first
message of each kind while :func:`capturing` records the message it puts, and
:func:`learn` keeps that as a template only if :func:`fill` rebuilds it exactly.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kombu.serialization import dumps as serialize
from kombu.utils.json import dumps

__all__ = ["RawTemplate", "capturing", "fill", "learn", "usable"]


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

    channel._put = recording
    try:
        yield captured
    finally:
        del channel._put  # the class's method again


@dataclass(frozen=True, slots=True)
class RawTemplate:
    """A message kombu put, and the list it went to."""

    key: str
    message: dict[str, Any]
    serializer: str


def encode_body(channel: Any, body: Any, serializer: str) -> str:
    """``body`` as kombu's Redis channel stores it: serialised, then body-encoded."""
    _, _, payload = serialize(body, serializer=serializer)
    encoded, _ = channel.encode_body(payload, channel.body_encoding)
    return str(encoded)


def _uuid4() -> str:
    """``str(uuid.uuid4())`` (what kombu tags a message with), without a UUID object."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


def fill(
    raw: RawTemplate,
    headers: dict[str, Any],
    correlation_id: str,
    expiration: float | None,
    body: str | None,
    delivery_tag: str | None = None,
) -> dict[str, Any]:
    """The template's message with a tick's fields (``body`` None: the template's)."""
    properties = dict(raw.message["properties"], correlation_id=correlation_id)
    properties["delivery_tag"] = delivery_tag or _uuid4()
    if expiration is not None:
        properties["expiration"] = str(int(expiration * 1000))
    message = dict(raw.message, headers=headers, properties=properties)
    if body is not None:
        message["body"] = body
    return message


def learn(
    channel: Any,
    captured: list[tuple[str, dict[str, Any]]],
    publish: dict[str, Any],
    body: Any,
) -> RawTemplate | None:
    """The template of one captured message, or None unless :func:`fill` rebuilds it
    exactly from ``publish`` (the keywords given to ``Producer.publish``) and ``body``."""
    if len(captured) != 1 or publish.get("exchange") or publish.get("compression"):
        return None
    queue, message = captured[0]
    serializer = publish.get("serializer") or "json"
    properties = message.get("properties", {})
    raw = RawTemplate(
        key=channel._q_for_pri(queue, channel._get_message_priority(message, reverse=False)),
        message=message,
        serializer=serializer,
    )
    rebuilt = fill(
        raw, publish.get("headers") or {}, publish.get("correlation_id", ""),
        publish.get("expiration"), encode_body(channel, body, serializer),
        properties.get("delivery_tag"),
    )  # fmt: skip
    return raw if dumps(rebuilt) == dumps(message) else None
