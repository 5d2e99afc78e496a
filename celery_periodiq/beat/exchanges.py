"""The exchange a message names, looked up on an AMQP broker before the first publish.

RabbitMQ answers a publish to an exchange it does not have by closing the channel
(404 NOT_FOUND), and asynchronously: the publish returns, the error comes with a later
call on that channel, and what was published on it in between is dropped. So before
the first message to an exchange that the publish does not declare itself, the
exchange is looked up (a passive declare) on a channel of its own: a missing one is
that message's own failure (:class:`MissingExchangeError`, its entry's alone), and the
producer's channel stays open for the others. An exchange found is not looked up
again on that channel. A broker whose transport is not AMQP (Redis) routes such a
message itself and is not asked.

For the same reason a flush of messages to an AMQP broker ends with one synchronous
round trip on the producer's channel (:func:`confirm`): a channel the broker closed
meanwhile (an exchange deleted since it was looked up) fails the flush, so the chunk's
claims stay in flight and are sent again, instead of being counted sent while the
broker dropped them.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["Checked", "Exchanges", "MissingExchangeError", "confirm"]


class MissingExchangeError(LookupError):
    """The broker has no exchange of the name a message gives: the message's failure."""


class Exchanges:
    """The exchanges found on the broker, for the channel they were found for."""

    def __init__(self) -> None:
        self._channel: Any = None
        self._found: set[str] = set()

    def check(self, producer: Any, publish: dict[str, Any]) -> None:
        """Look up the exchange that ``publish`` (``producer.publish``'s keyword arguments)
        names, unless it is the default one, it is declared by the publish itself, it was
        found before, or the broker is not AMQP.

        Raises:
            MissingExchangeError: the broker has no such exchange.
        """
        exchange = publish.get("exchange")
        name = getattr(exchange, "name", exchange)
        if not name or not isinstance(name, str):
            return
        if producer.channel is not self._channel:
            self._channel, self._found = producer.channel, set()
        if name in self._found or name in _declared(publish.get("declare")):
            return
        connection = producer.connection
        if getattr(connection.transport, "driver_type", None) != "amqp":
            return
        channel = connection.channel()  # a 404 closes this channel, not the producer's
        try:
            channel.exchange_declare(name, "direct", passive=True)
        except Exception as error:
            if getattr(error, "code", None) == 404:
                raise MissingExchangeError(
                    f"the broker has no exchange {name!r} ({error})"
                ) from error
            raise
        finally:
            with contextlib.suppress(Exception):
                channel.close()
        self._found.add(name)


class Checked:
    """Stands in for a producer while ``send_task`` publishes: the exchange of each
    message is checked (:class:`Exchanges`) before it goes to the real producer, which
    does everything else."""

    def __init__(self, producer: Any, exchanges: Exchanges) -> None:
        self._producer = producer
        self._exchanges = exchanges

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def publish(self, body: Any, **kwargs: Any) -> Any:
        self._exchanges.check(self._producer, kwargs)
        return self._producer.publish(body, **kwargs)


def _declared(entities: Any) -> set[str]:
    """The exchanges declared with ``entities`` (a publish's ``declare``): a queue's own,
    an exchange itself."""
    names = set()
    for entity in entities or ():
        exchange = getattr(entity, "exchange", entity)
        name = getattr(exchange, "name", None)
        if isinstance(name, str):
            names.add(name)
    return names


def confirm(producer: Any) -> None:
    """One synchronous round trip on ``producer``'s channel when its broker is AMQP: what
    the broker said of the messages published before (a channel it closed) is raised
    here. Nothing for other brokers.

    Raises:
        Exception: the channel's error (the broker's failure, told as such by the caller).
    """
    connection = producer.connection
    if getattr(connection.transport, "driver_type", None) == "amqp":
        producer.channel.basic_qos(0, 0, False)  # Basic.Qos waits for its Qos-Ok
