"""Turn the user-facing keyword options (``cron=``, ``every=``, ...) into an :class:`Entry`.

Shared by ``periodiq(app).add()``, ``update()`` and the ``@periodic`` decorator,
so all of them accept and reject exactly the same things.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

import kombu.compression
from kombu.compression import compress, encoders
from kombu.exceptions import EncodeError, SerializerNotInstalled
from kombu.serialization import dumps
from kombu.serialization import registry as _serializers  # type: ignore[attr-defined]

from celery_periodiq.errors import EntryError, ScheduleError, shown
from celery_periodiq.model.entry import AUTO, Entry, Form, Source, blamed
from celery_periodiq.model.options import SCHEDULE_OPTIONS, UPDATABLE
from celery_periodiq.model.policy import DEFAULT_FAILURE_THRESHOLD, OUR_DEFAULTS, Defaults
from celery_periodiq.schedules.interval import every_spec
from celery_periodiq.schedules.once import at_spec

__all__ = [
    "EntryBuilder",
    "build_entry",
    "changed_entry",
    "check_encodable",
    "refuse_past",
    "schedule_of",
    "task_name",
]


def schedule_of(
    name: str,
    cron: str | None,
    every: float | timedelta | str | None,
    calendar: str | None,
    at: datetime | str | None = None,
) -> tuple[str, Form]:
    """The spec and form given by exactly one of ``cron=``, ``every=``, ``calendar=``,
    ``at=``.

    Raises:
        EntryError: none or several were given, ``every`` is not an interval, or ``at``
            is not an aware instant.
    """
    given = [
        (key, value)
        for key, value in zip(SCHEDULE_OPTIONS, (cron, every, calendar, at), strict=True)
        if value is not None
    ]
    if len(given) != 1:
        got = ", ".join(f"{key}=" for key, _ in given) or "none"
        raise blamed(
            "schedule",
            EntryError(
                f"entry {shown(name)}: give exactly one of cron=, every=, calendar=, at= "
                f"(got {got})"
            ),
        )
    key, value = given[0]
    if key == "at":
        try:
            return at_spec(value), "at"
        except ScheduleError as error:
            raise blamed("schedule", EntryError(f"entry {shown(name)}: {error}")) from None
    if key == "every":
        if isinstance(value, str):
            text = value.strip()
            return (text if text.lower().startswith("@every") else f"@every {text}"), "every"
        try:
            return _every_text(value), "every"
        except ScheduleError as error:
            raise blamed("schedule", EntryError(f"entry {shown(name)}: {error}")) from None
    if not isinstance(value, str):
        message = f"entry {shown(name)}: {key}={shown(value)} is not a string"
        raise blamed("schedule", EntryError(message))
    return value, key  # type: ignore[return-value]


def _every_text(value: object) -> str:
    """``every_spec(value)``, remembered for numbers and timedeltas (a bulk load gives
    many entries one interval)."""
    kind = value.__class__
    if kind is int or kind is float or kind is timedelta:
        return _every_cached(kind, value)  # the kind apart: 1, 1.0 and True hash alike
    return every_spec(value)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _every_cached(kind: type, value: float | timedelta) -> str:
    return every_spec(value)


def task_name(task: Any) -> str:
    """A task's name, from a name or a Celery task object."""
    name = getattr(task, "name", task)
    if not isinstance(name, str):
        message = f"task {shown(task)} is neither a task name nor a Celery task"
        raise blamed("task", EntryError(message))
    return name


def build_entry(
    name: str,
    task: Any,
    *,
    cron: str | None = None,
    every: float | timedelta | str | None = None,
    calendar: str | None = None,
    at: datetime | str | None = None,
    args: list[Any] | tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    tz: str | None = None,
    owner: str | None = None,
    group: str | None = None,
    tolerance: float | str = AUTO,
    timebox: float | str | None = AUTO,
    grace: float | None = None,
    overlap: str | None = None,
    catchup: str | None = None,
    catchup_window: float | None = None,
    expires: float | str | None = AUTO,
    jitter: float = 0.0,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    enabled: bool = True,
    source: Source = "runtime",
    defaults: Defaults = OUR_DEFAULTS,
    alert_after: float | str | None = AUTO,
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
    pause_on_failure: bool = False,
    max_runs: int | None = None,
    exclude: list[Any] | tuple[Any, ...] = (),
) -> Entry:
    """Build and validate an entry from keyword options (those of
    :class:`~celery_periodiq.model.options.EntryOptions`, with its defaults).

    ``overlap``, ``catchup`` and ``tz`` left as None take ``defaults`` (the app's
    ``periodiq_default_*`` settings and Celery ``timezone``).

    Raises:
        EntryError: any option is invalid; the message names it and what is allowed.
    """
    spec, form = schedule_of(name, cron, every, calendar, at)
    if not isinstance(args, list | tuple):
        message = (
            f"entry {shown(name)}: args={shown(args)} is invalid (allowed: a list of JSON values)"
        )
        raise blamed("args", EntryError(message))
    entry = Entry(
        name=name,
        task=task_name(task),
        schedule=spec,
        form=form,
        tz=defaults.tz_of(tz),
        args=list(args),
        kwargs={} if kwargs is None else kwargs,
        options={} if options is None else options,
        owner=owner,
        group=group,
        enabled=enabled,
        start_at=start_at,
        end_at=end_at,
        tolerance=tolerance,
        timebox=timebox,
        grace=grace,
        overlap=defaults.overlap_of(overlap),
        catchup=defaults.catchup_of(catchup),
        catchup_window=catchup_window,
        expires=expires,
        jitter=jitter,
        source=source,
        alert_after=alert_after,
        failure_threshold=failure_threshold,
        pause_on_failure=pause_on_failure,
        max_runs=max_runs,
        exclude=exclude,  # type: ignore[arg-type]  # Entry makes it a list of ISO dates
    )
    try:
        check_encodable(entry)
    except EntryError as error:
        raise blamed("options", error) from None
    return entry


# What Celery's task message body is: the arguments and the (empty) workflow options.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def check_encodable(entry: Entry) -> None:
    """Refuse an entry whose messages this process could not encode: a ``serializer`` or
    ``compression`` option kombu has no encoder for here (serializers the app's modules
    register count: they are imported by then), ``"raw"`` (it sends bytes as they are,
    and a task message is no bytes), or a serializer that cannot encode the entry's
    arguments. Entries read back from Redis are not checked: another process may have
    other serializers; what fails to encode when a beat publishes quarantines the entry.

    Raises:
        EntryError: the option and what is allowed.
    """
    options = entry.options
    if not options:
        return
    serializer, compression = options.get("serializer"), options.get("compression")
    if serializer:
        body = (list(entry.args), dict(entry.kwargs), _EMBED)
        missing = ""
        try:
            payload = dumps(body, serializer=serializer)[2]
        except SerializerNotInstalled as error:  # msgpack without its library says why
            payload = None
            missing = "" if str(error).startswith("No encoder installed") else f": {error}"
        except EncodeError as error:
            raise EntryError(
                f"entry {shown(entry.name)}: options['serializer']={shown(serializer)} cannot "
                f"encode its args and kwargs ({error}) (allowed: a serializer that can)"
            ) from None
        if not isinstance(payload, str | bytes):
            installed = ", ".join(
                name for name in sorted(_serializers.name_to_type) if _encodes(name)
            )
            raise EntryError(
                f"entry {shown(entry.name)}: options['serializer']={shown(serializer)} is "
                f"invalid{missing} (allowed: a serializer kombu can encode with in this "
                f"process: {installed}; register others with kombu.serialization.register)"
            )
    if compression:
        try:
            compress(b"", compression)
        except KeyError:
            aliases: dict[str, str] = getattr(kombu.compression, "_aliases", {})
            installed = ", ".join(sorted(aliases) or encoders())
            raise EntryError(
                f"entry {shown(entry.name)}: options['compression']={shown(compression)} is "
                f"invalid (allowed: a compression kombu has in this process: {installed}, or its "
                "content type)"
            ) from None


def _encodes(serializer: str) -> bool:
    try:
        return isinstance(dumps([], serializer=serializer)[2], str | bytes)
    except Exception:  # not installed (msgpack without its library), or broken
        return False


# Option values an entry can be built alike from: hashable, compared with their type
# (1, 1.0 and True are equal keys, not equal options).
_ALIKE = frozenset({str, int, float, bool, type(None), timedelta})
_BOUNDS = frozenset({"start_at", "end_at"})


class EntryBuilder:
    """:func:`build_entry` for many entries, faster for entries alike: those whose options
    but name, ``start_at`` and ``end_at`` are equal (and plain values: no ``args``,
    ``kwargs`` or ``options`` dicts) are validated once, then copied with their own name
    and bounds (which are checked each time)."""

    def __init__(self, *, source: Source = "runtime", defaults: Defaults = OUR_DEFAULTS) -> None:
        self.source = source
        self.defaults = defaults
        self._models: dict[tuple[Any, ...], Entry] = {}

    def build(self, name: str, task: Any, options: dict[str, Any]) -> Entry:
        """``build_entry(name, task, **options)`` with this builder's source and defaults.

        Raises:
            EntryError: as :func:`build_entry`.
            TypeError: an unknown option.
        """
        plain = {key: value for key, value in options.items() if key not in _BOUNDS}
        kinds = tuple(map(type, plain.values()))
        shape = (task, tuple(plain.items()), kinds)
        alike = task.__class__ is str and _ALIKE.issuperset(kinds)  # else built on its own
        model = self._models.get(shape) if alike else None
        if model is not None:
            return model.alike(name, options.get("start_at"), options.get("end_at"))
        entry = build_entry(name, task, source=self.source, defaults=self.defaults, **options)
        if alike:
            self._models[shape] = entry
        return entry


def changed_entry(
    entry: Entry, changes: dict[str, Any], defaults: Defaults = OUR_DEFAULTS
) -> Entry:
    """``entry`` with ``changes`` (the keyword options of ``update()``) applied; an option
    changed to None takes ``defaults`` as :func:`build_entry` does.

    Raises:
        EntryError: an unknown option, or an invalid value.
    """
    unknown = set(changes) - UPDATABLE
    if unknown:
        raise EntryError(
            f"entry {shown(entry.name)}: cannot update {sorted(unknown)} (allowed: "
            f"{sorted(UPDATABLE)})"
        )
    kept = UPDATABLE.difference(SCHEDULE_OPTIONS)  # each one a field of the entry
    current: dict[str, Any] = {key: getattr(entry, key) for key in kept}
    if any(key in changes for key in SCHEDULE_OPTIONS):
        current.update({key: changes.pop(key, None) for key in SCHEDULE_OPTIONS})
    else:
        current[entry.form] = entry.schedule
    current.update(changes)
    return build_entry(entry.name, source=entry.source, defaults=defaults, **current)


def refuse_past(entry: Entry, now: datetime) -> None:
    """Refuse a one-off (``at=``) entry whose instant is not after ``now`` (the Redis
    clock): given through the API or the CLI, it would never run.

    Raises:
        EntryError: the instant has passed.
    """
    if entry.form != "at":
        return
    instant = datetime.fromisoformat(entry.schedule)
    if instant <= now:
        message = (
            f"entry {shown(entry.name)}: at={entry.schedule} is already past (the Redis clock "
            f"says {now.astimezone(instant.tzinfo).isoformat()}); a one-off entry runs once, so "
            "give an instant in the future (allowed: after now)"
        )
        raise blamed("schedule", EntryError(message))
