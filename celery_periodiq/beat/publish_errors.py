"""Tell what publishing raised: the broker's failure, or the message's own.

A broker that is down or refuses (its connection or channel failed) keeps every
claimed tick in flight until it is back; a message that cannot be built or
encoded (a serializer or compression not installed here, an encoder refusing the
arguments) is its entry's problem alone. Which connection and channel errors a
broker raises is its kombu transport's to say (``Connection.connection_errors``,
``channel_errors``): a Redis broker's are redis-py's, an AMQP broker's amqp's.
"""

from __future__ import annotations

from typing import Any

import kombu.exceptions
import redis
from kombu.exceptions import (
    LimitExceeded,
    OperationalError,
    SerializationError,
    SerializerNotInstalled,
)

from celery_periodiq.errors import (
    BrokerRefusedError,
    BrokerUnavailableError,
    MessageError,
    shown,
)
from celery_periodiq.model.entry import Entry

__all__ = ["broker_failure", "producer_connection", "publish_failure"]

# A message's own failures, told first: kombu raises KeyError for a compression it
# does not have, and its Redis transport counts KeyError among its connection errors.
_MESSAGE = (SerializationError, SerializerNotInstalled, TypeError, ValueError, LookupError)
# The broker's, whatever its transport: kombu's own, the network's, and redis-py's
# (the Publisher puts messages into a Redis broker's lists itself).
_BATCH_FAILED: type[Exception] = getattr(kombu.exceptions, "BatchPublishError", OperationalError)
"""kombu >= 5.7: a batch's flush failed (the broker's connection, wrapped)."""
_UNREACHABLE = (
    OperationalError,
    _BATCH_FAILED,
    LimitExceeded,
    OSError,
    redis.ConnectionError,
    redis.TimeoutError,
)


def broker_failure(error: Exception, connection: Any) -> BrokerUnavailableError | None:
    """``error``, raised while publishing over ``connection`` (a kombu ``Connection``), as
    the broker's failure; None when it is not one (the message's own, or unknown)."""
    if isinstance(error, _MESSAGE):
        return None
    refused = tuple(getattr(connection, "channel_errors", ()))
    if refused and isinstance(error, refused):
        return BrokerRefusedError(f"broker refused a publish ({error})")
    unreachable = _UNREACHABLE + tuple(getattr(connection, "connection_errors", ()))
    if isinstance(error, unreachable):
        return BrokerUnavailableError(f"broker unreachable ({error})")
    return None


def publish_failure(
    error: Exception, connection: Any, entry: Entry
) -> BrokerUnavailableError | MessageError:
    """``error``, raised while publishing a message of ``entry``: the broker's failure, or
    else the message's own (anything that is not the broker's connection or channel)."""
    found = broker_failure(error, connection)
    if found is not None:
        return found
    options = f" with options {shown(entry.options)}" if entry.options else ""
    return MessageError(
        f"entry {shown(entry.name)}: its message could not be published{options}: "
        f"{type(error).__name__}: {error}"
    )


def producer_connection(producer: Any) -> Any:
    """``producer``'s kombu Connection (its transport's errors); None if that needs the broker."""
    try:
        return producer.connection
    except Exception:
        return None
