"""Turn an entry and a tick into a Celery message.

Every message of a tick carries, in its headers (named in
:mod:`celery_periodiq.protocol.headers`), the entry name, the tick's nominal
instant, its interval and how many ticks it stands for; the worker's guards
(task.py) read them back. The name is also django-celery-beat's ``periodic_task_name``.
The task id is derived from the tick, so a tick published twice is the same run.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.app.routes import MapRoute
from celery.utils.saferepr import saferepr

from celery_periodiq.beat import amqp_publish, exchanges, redis_publish, watchers
from celery_periodiq.beat.amqp_publish import AmqpTemplate
from celery_periodiq.beat.exchanges import Checked, Exchanges
from celery_periodiq.beat.message_options import message_options
from celery_periodiq.beat.publish_errors import (
    broker_failure,
    producer_connection,
    publish_failure,
)
from celery_periodiq.beat.redis_publish import RawTemplate
from celery_periodiq.errors import BrokerUnavailableError
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import Tick
from celery_periodiq.model.policy import Limits
from celery_periodiq.protocol.headers import HEADER_BACKFILL, HEADER_OVERLAP

__all__ = ["Publisher", "message_options", "send", "send_backfill"]


def send_backfill(app: Celery, entry: Entry, tick: Tick, overlap: str, producer: Any) -> str:
    """Publish a backfill run of ``entry``'s past ``tick``; ``overlap`` is what the worker's
    non-final check applies to it ("skip" or "allow"). Returns its task id.

    Raises:
        BrokerUnavailableError: the broker failed (its connection or channel).
        MessageError: anything else: the message could not be built or encoded.
    """

    def options() -> dict[str, Any]:
        built = message_options(entry, tick)
        built["headers"][HEADER_BACKFILL] = True
        built["headers"][HEADER_OVERLAP] = overlap
        return built

    return _send_told(app, entry, options, producer)


def send(
    app: Celery,
    entry: Entry,
    tick: Tick | None,
    producer: Any = None,
    manual: Limits | None = None,
    sent_at_ms: int | None = None,
) -> str:
    """Publish one run of ``entry`` (``tick=None``: a manual run with the limits
    ``manual``); returns its task id. ``sent_at_ms``: the Redis clock now (see
    :func:`message_options`).

    Raises:
        BrokerUnavailableError: the broker failed (its connection or channel).
        MessageError: anything else: the message could not be built or encoded.
    """
    return _send_told(
        app, entry, lambda: message_options(entry, tick, manual, sent_at_ms), producer
    )


def _send_told(
    app: Celery, entry: Entry, options: Callable[[], dict[str, Any]], producer: Any
) -> str:
    """Publish the message of ``entry`` that ``options()`` describes; what fails is told
    as the broker's failure or the message's own (see :func:`send`)."""
    try:
        with app.producer_or_acquire(producer) as used:
            return _send_task(app, entry, options(), Checked(used, Exchanges()))
    except Exception as error:
        if producer is not None:
            raise publish_failure(error, producer_connection(producer), entry) from error
        with app.connection_for_write() as connection:  # its transport's errors; no I/O
            failure = publish_failure(error, connection, entry)
        raise failure from error


_TEMPLATES = 1024  # kept per Publisher; beyond this many, the oldest half is dropped
_BATCH_MOST = 100_000  # the most messages kombu's batch buffers before it sends them


class _Recorder:
    """Stands in for a producer as ``send_task`` builds a message, keeping what it publishes."""

    def __init__(self, producer: Any) -> None:
        self.connection = producer.connection
        self.channel = producer.channel
        self.published: tuple[Any, dict[str, Any]] | None = None

    def publish(self, body: Any, **kwargs: Any) -> None:
        self.published = (body, kwargs)


@dataclass(frozen=True, slots=True)
class _Template:
    """What ``send_task`` gave ``producer.publish`` for one message of a task."""

    headers: dict[str, Any]
    publish: dict[str, Any]
    embed: dict[str, Any]
    args: list[Any]
    kwargs: dict[str, Any]
    declare: list[Any]
    raw: RawTemplate | None
    """The message as kombu's Redis channel put it, where it can be put directly."""
    wire: AmqpTemplate | None = None
    """The message as py-amqp was given it, where it can be given again (amqp_publish.py)."""


class Publisher:
    """Publishes ticks exactly as ``app.send_task`` would, faster.

    ``send_task`` routes, merges the task's options, builds headers and declares the
    queue for every message, although all of that is the same for every tick of a
    task with the same options. The first tick of each kind goes through the real
    ``send_task`` (with the producer's ``publish`` recorded instead of called); later
    ticks reuse what it built and fill in only what a tick changes: the task id, the
    ``periodiq_*`` headers, the broker's expiration, the time limits, the arguments and their
    reprs. tests/test_publish.py decodes messages of both paths with kombu and
    compares every header and property.

    ``send_task`` itself is used whenever something could make a message depend on
    more than that: a tool watching publishes (watchers.py), ``task_send_sent_event``, a
    router that is a function (it may look at the arguments), task protocol 1.
    Unlike ``send_task``, a beat does not subscribe to the result of each run it
    sends (result backends such as ``redis://`` would): a beat never reads them.
    """

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._templates: dict[tuple[Any, ...], _Template | None] = {}
        self._configured: bool | None = None
        self._channel: Any = None
        self._declared: set[tuple[Any, ...]] = set()
        """Templates whose queues were declared on ``_channel``."""
        self._exchanges = Exchanges()
        """The exchanges messages name, found on the broker (AMQP)."""
        self._frames = amqp_publish.Frames()
        """Inside :meth:`batch`: the encoded messages' frames not written yet (AMQP)."""
        self._lists: dict[int, tuple[Any, dict[str, list[str]]]] | None = None
        """Inside :meth:`batch`: per Redis channel (by id), its client and lists' messages."""
        self._flush: Callable[[], None] | None = None
        self._unconfirmed = False  # published since a flush last confirmed (exchanges)
        self._watched: bool | None = None  # in a batch: whether a tool watches (asked once)
        self.headers: dict[str, str] = {}  # added to each message: a traced tick's context
        self.staged: list[tuple[str, str]] | None = None
        """While staging (staging.py): each message's list key and JSON, rendered, not sent."""

    @contextlib.contextmanager
    def batch(self, producer: Any) -> Iterator[Callable[[], None]]:
        """Buffer what is published through ``producer`` inside (kombu's batch, and the
        messages put straight into a Redis broker); yields the function that sends the
        buffer. A failure inside discards what was not sent.

        Raises (from the function yielded):
            BrokerUnavailableError: the broker failed; what was not sent is discarded.
        """
        batch = getattr(producer, "batch", None)  # kombu < 5.7: none
        with batch(max_size=_BATCH_MOST) if batch else contextlib.nullcontext() as buffered:
            lists: dict[int, tuple[Any, dict[str, list[str]]]] = {}

            def flush() -> None:
                # kombu's buffer holds only messages built since the last flush (see
                # _build), which came before those put directly: order is kept
                try:
                    self._frames.write()
                    if buffered is not None:
                        buffered.flush()
                    for client, messages in lists.values():
                        redis_publish.push(client, messages)
                    if self._unconfirmed:
                        exchanges.confirm(producer)
                        self._unconfirmed = False
                except Exception as error:
                    # messages were encoded when buffered: what fails here is the broker
                    failure = broker_failure(error, producer_connection(producer))
                    if failure is None:
                        raise
                    raise failure from error

            self._lists, self._flush = lists, flush
            self._watched = watchers.watched(self.app)
            try:
                yield flush
                flush()
            finally:
                lists.clear()
                self._frames.drop()
                self._lists = self._flush = None
                self._watched = None

    def _put(self, channel: Any, key: str, message: str) -> None:
        """Put ``message`` in the list ``key`` of ``channel``'s Redis when the batch flushes."""
        if self.staged is not None:
            self.staged.append((key, message))
            return
        assert self._lists is not None
        found = self._lists.setdefault(id(channel), (channel.client, {}))
        found[1].setdefault(key, []).append(message)

    def send(self, entry: Entry, tick: Tick, producer: Any, sent_at_ms: int | None = None) -> str:
        """Publish one tick of ``entry`` through ``producer`` at ``sent_at_ms`` (the Redis
        clock; see :func:`message_options`); returns its task id.

        Raises:
            BrokerUnavailableError: the broker failed (its connection or channel).
            MessageError: anything else: the message could not be built or encoded
                (nothing of it is buffered; what was buffered before is kept).
        """
        self._unconfirmed = True
        try:
            options = message_options(entry, tick, None, sent_at_ms)
            # no retry inside a publish: the claim stays in flight, planned afresh when sent
            options["retry"] = False
            if self.headers:  # tick_tracing.py: the tick span's context, for the run's trace
                options["headers"].update(self.headers)
            if not self._plain():  # each tick through send_task, as Celery's beat sends it
                with watchers.tick_scope():
                    return _send_task(self.app, entry, options, Checked(producer, self._exchanges))
            key = (
                threading.get_ident(),
                entry.task,
                json.dumps(entry.options, sort_keys=True) if entry.options else "",
                tuple(options["headers"]),
                "expiration" in options,
                "time_limit" in options,
            )
            template = self._templates.get(key, _MISSING)
            if template is _MISSING:
                template = self._build(entry, options, producer)
                if len(self._templates) >= _TEMPLATES:
                    for old in list(self._templates)[: _TEMPLATES // 2]:
                        del self._templates[old]
                self._templates[key] = template
                return str(options["task_id"])  # the build published it
            if template is None:
                self._frames.write()  # what was buffered goes first (and in _publish)
                return _send_task(self.app, entry, options, Checked(producer, self._exchanges))
            self._publish(key, template, entry, options, producer)
            return str(options["task_id"])
        # a flush of what was buffered before (see _build); a staged message refused
        except (BrokerUnavailableError, redis_publish.NotStagedError):
            raise
        except Exception as error:
            raise publish_failure(error, producer_connection(producer), entry) from error

    def _plain(self) -> bool:
        """Whether nothing but the tick can change a message (see the class docstring)."""
        watched = watchers.watched(self.app) if self._watched is None else self._watched
        if watched:  # a tracing tool: see watchers.py
            return False
        if self._configured is None:  # the app's settings are read once
            conf, routes = self.app.conf, getattr(self.app.amqp.router, "routes", [None])
            self._configured = (
                not conf.task_send_sent_event
                and conf.task_protocol == 2
                and all(isinstance(route, MapRoute) for route in routes)
            )
        return self._configured

    def _build(self, entry: Entry, options: dict[str, Any], producer: Any) -> _Template | None:
        """Run ``send_task`` for this tick with its publish recorded, publish the result,
        and keep it as the template of the ticks like it (None: not reusable)."""
        recorder = _Recorder(producer)
        args, kwargs = list(entry.args), dict(entry.kwargs)
        self.app.send_task(
            entry.task,
            args=args,
            kwargs=kwargs,
            producer=recorder,  # type: ignore[arg-type]
            **options,
        )
        assert recorder.published is not None, "send_task published nothing"
        body, publish = recorder.published
        self._exchanges.check(producer, publish)
        if self._flush is not None:  # what was buffered goes first
            self._flush()
        channel = producer.channel
        raw = wire = None
        headers = publish["headers"]
        if redis_publish.usable(channel):
            with redis_publish.capturing(channel) as captured:
                producer.publish(body, **publish)
            raw = redis_publish.learn(channel, captured, publish, body)
        elif amqp_publish.usable(channel):
            with amqp_publish.capturing(channel) as given:
                producer.publish(body, **publish)
            own = [*options["headers"], "id", "root_id", "timelimit"]  # what _publish sets
            wire = amqp_publish.learn(given, {k: headers[k] for k in own if k in headers})
        else:
            producer.publish(body, **publish)
        task_id = options["task_id"]
        reusable = (
            isinstance(body, tuple)
            and len(body) == 3
            and headers.get("id") == headers.get("root_id") == task_id
            and publish.get("correlation_id") == task_id
            and headers.get("expires") is None  # a task's own: an instant, judged by Celery
            and publish.get("expiration") == options.get("expiration")
        )
        if "time_limit" in options:
            limits = [options["time_limit"], options["soft_time_limit"]]
            reusable = reusable and headers.get("timelimit") == limits
        if not reusable:
            return None
        return _Template(
            headers=dict(headers),
            publish={k: v for k, v in publish.items() if k != "headers"},
            embed=body[2],
            args=args,
            kwargs=kwargs,
            declare=list(publish.get("declare") or []),
            raw=raw,
            wire=wire,
        )

    def _publish(
        self,
        key: tuple[Any, ...],
        template: _Template,
        entry: Entry,
        options: dict[str, Any],
        producer: Any,
    ) -> None:
        app, task_id = self.app, options["task_id"]
        args, kwargs = list(entry.args), dict(entry.kwargs)
        # the headers this tick sets; the others are the template's
        headers = {**options["headers"], "id": task_id, "root_id": task_id}
        expiration: float | None = options.get("expiration")
        if "time_limit" in options:
            headers["timelimit"] = [options["time_limit"], options["soft_time_limit"]]
        if args != template.args or kwargs != template.kwargs:  # (not per tick: app.conf is slow)
            levels = app.conf.get("task_repr_maxlevels", 3)  # Celery 5.7's; saferepr's default
            if args != template.args:
                maxsize = app.amqp.argsrepr_maxsize
                headers["argsrepr"] = saferepr(args or (), maxsize, maxlevels=levels)
            if kwargs != template.kwargs:
                maxsize = app.amqp.kwargsrepr_maxsize
                headers["kwargsrepr"] = saferepr(kwargs or {}, maxsize, maxlevels=levels)
        channel = producer.channel
        same = args == template.args and kwargs == template.kwargs
        if template.raw is not None and self._lists is not None and redis_publish.usable(channel):
            body = (
                None
                if same
                else redis_publish.encode_body(
                    channel, (args or (), kwargs or {}, template.embed), template.raw.serializer
                )
            )
            message = redis_publish.render(template.raw, headers, task_id, expiration, body)
            self._put(channel, template.raw.key, message)
            return
        # Declaring costs more than the rest of a publish; once per channel is enough.
        if producer.channel is not self._channel:
            self._channel, self._declared = producer.channel, set()
        # py-amqp given the frames' properties encoded (amqp_publish.py) once declared
        wire = template.wire if same and key in self._declared else None
        publish: dict[str, Any] = {}
        if wire is None:
            publish = dict(
                template.publish, headers={**template.headers, **headers}, correlation_id=task_id
            )
            if expiration is not None:
                publish["expiration"] = expiration
            if key not in self._declared:
                self._exchanges.check(producer, {**publish, "declare": template.declare})
            publish["declare"] = [] if key in self._declared else list(template.declare)
        try:
            if wire is not None:
                frames = None if self._flush is None else self._frames  # in a batch
                amqp_publish.send(channel, wire, headers, task_id, expiration, frames)
            else:
                self._frames.write()
                producer.publish((args or (), kwargs or {}, template.embed), **publish)
        except BaseException:
            self._declared.clear()
            raise
        self._declared.add(key)


_MISSING: Any = object()


def _send_task(app: Celery, entry: Entry, options: dict[str, Any], producer: Any) -> str:
    app.send_task(
        entry.task, args=list(entry.args), kwargs=dict(entry.kwargs), producer=producer, **options
    )
    return str(options["task_id"])
