"""Import from celery-redbeat: read RedBeat 2.4's entries straight from its Redis and
convert them into an export document (:mod:`celery_periodiq.ops.transfer`).

RedBeat's layout under its key prefix ``P`` (``redbeat_key_prefix``, ``"redbeat:"``)::

    P<name>      hash    "definition": JSON {name, task, args, kwargs, options, schedule,
                         enabled}; "meta": JSON {last_run_at, total_run_count}
    P:schedule   zset    entry key -> next due instant (Unix seconds; -1: never)
    P:statics    set     names of the entries a RedBeat beat wrote from its beat_schedule
    P:lock       string  the beat's lock (``redbeat_lock_key``)

Its JSON marks typed values with ``"__type__"``: ``crontab`` {minute, hour, day_of_week,
day_of_month, month_of_year}, ``interval`` {every (seconds), relative}, ``rrule``
{freq, ...}, ``datetime`` {year ... microsecond, timezone: a zone name or an offset in
seconds}. RedBeat cannot store a ``solar`` schedule (its encoder refuses one). This module
decodes that JSON itself: redbeat is not a dependency.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import redis
from celery import Celery
from celery.schedules import crontab
from celery.schedules import schedule as interval

from celery_periodiq.config import Settings, redacted
from celery_periodiq.declare import registry
from celery_periodiq.errors import (
    ConfigurationError,
    EntryError,
    PeriodiqError,
    StoreUnavailableError,
    shown,
)
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.options import OPTION_KEYS
from celery_periodiq.model.policy import Defaults
from celery_periodiq.ops.transfer import FORMAT, VERSION

__all__ = ["DEFAULT_PREFIX", "Conversion", "read_redbeat", "redbeat_document", "redbeat_url"]

DEFAULT_PREFIX = "redbeat:"
_BATCH = 500
_CRON_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
_DATETIME_FIELDS = ("year", "month", "day", "hour", "minute", "second", "microsecond")
_KEPT = ", ".join([*OPTION_KEYS, "expires"])


class Conversion(NamedTuple):
    """What :func:`redbeat_document` read."""

    document: dict[str, Any]
    """An export document (format ``celery-periodiq`` version 1) of the entries converted."""
    problems: list[str]
    """One per record that cannot be converted: its Redis key and why."""
    notes: list[str]
    """What was converted with a loss or left out on purpose (options dropped, entries
    declared in this app's beat_schedule), by Redis key."""


class _RecordError(Exception):
    """A record that cannot be converted; the message says why."""


def redbeat_url(app: Celery, url: str | None = None) -> str:
    """The URL of RedBeat's Redis: ``url``, else the app's ``redbeat_redis_url``, else its
    broker (what RedBeat itself uses).

    Raises:
        ConfigurationError: none of them is set.
    """
    chosen = url or app.conf.get("redbeat_redis_url") or app.conf.get("broker_url")
    if not chosen or not isinstance(chosen, str):
        raise ConfigurationError(
            "no URL for RedBeat's Redis (allowed: url= / --redbeat-url, or the app's "
            "redbeat_redis_url or broker_url setting)"
        )
    return chosen


def read_redbeat(
    app: Celery, *, url: str | None = None, key_prefix: str = DEFAULT_PREFIX
) -> Conversion:
    """Connect to RedBeat's Redis (see :func:`redbeat_url`), read its entries and convert
    them; the connection is closed after.

    Raises:
        ConfigurationError: no URL, or one that is not a Redis URL.
        StoreUnavailableError: RedBeat's Redis cannot be reached or refused a command.
    """
    source = redbeat_url(app, url)
    try:
        client = redis.Redis.from_url(source, socket_connect_timeout=5, socket_timeout=30)
    except ValueError as error:
        raise ConfigurationError(
            f"RedBeat's Redis URL {redacted(source)} is invalid: {error} (allowed: "
            "redis://, rediss:// or unix://; Sentinel and Cluster are not supported)"
        ) from None
    try:
        return redbeat_document(client, app, key_prefix=key_prefix)
    except (redis.ConnectionError, redis.TimeoutError) as error:
        raise StoreUnavailableError(
            f"RedBeat's Redis at {redacted(source)} is unreachable: {error}"
        ) from error
    except redis.RedisError as error:
        raise StoreUnavailableError(
            f"RedBeat's Redis at {redacted(source)} failed: {error}"
        ) from error
    finally:
        client.close()


def redbeat_document(
    client: redis.Redis, app: Celery, *, key_prefix: str = DEFAULT_PREFIX
) -> Conversion:
    """Read every RedBeat entry under ``key_prefix`` (static and dynamic) and convert it
    into a runtime entry of ``app``, keeping its name.

    Entries are found in RedBeat's schedule zset and by SCAN (an entry missing from the
    zset is still found), and read in pipelined batches. An entry whose name ``app``
    declares (``beat_schedule`` or ``@periodic``) is left out with a note: the app's beat
    writes it as a declared entry when it starts, and a runtime entry of that name would
    make the beat ignore the declaration.

    Raises:
        PeriodiqError: ``key_prefix`` is empty.
        redis.RedisError: Redis failed.
    """
    if not isinstance(key_prefix, str) or not key_prefix:
        raise PeriodiqError(
            f"key_prefix={shown(key_prefix)} is invalid (allowed: RedBeat's non-empty "
            "redbeat_key_prefix, 'redbeat:' by default)"
        )
    settings = Settings.from_app(app)
    defaults = Defaults.of(settings)
    declared = {str(name): "beat_schedule" for name in app.conf.beat_schedule or {}}
    declared.update({entry.name: "code (@periodic)" for entry in registry.declared(settings)})
    statics, notes = _statics(client, key_prefix)
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for key, kind, fields in _read(client, _keys(client, app, key_prefix)):
        where = shown(key)
        if kind == "none":
            notes.append(f"{where}: in RedBeat's schedule but the key is gone (RedBeat drops it)")
            continue
        said: list[str] = []
        try:
            if kind != "hash":
                raise _RecordError(f"is a Redis {kind}, not a hash (allowed: a RedBeat entry hash)")
            record = _record(fields, app, defaults, said)
        except _RecordError as why:
            problems.append(f"{where}: {why}")
            continue
        name = record["definition"]["name"]
        if name in declared:
            notes.append(
                f"{where}: left out, declared in {declared[name]}: it moves over "
                "when a periodiq beat starts"
            )
            continue
        if name in statics:
            said.append(
                "a static entry of the RedBeat beat's beat_schedule, which this app "
                "does not declare: imported as a runtime entry"
            )
        notes += [f"{where}: {note}" for note in said]
        records.append(record)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "entries": records,
    }
    return Conversion(document, problems, notes)


def _glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _name(value: bytes | str) -> str:
    return value.decode(errors="backslashreplace") if isinstance(value, bytes) else value


def _statics(client: redis.Redis, prefix: str) -> tuple[set[str], list[str]]:
    key = f"{prefix}:statics"
    try:
        members = client.smembers(key)
    except redis.ResponseError as error:
        return set(), [f"{shown(key)}: unreadable ({error}), static entries not told apart"]
    return {_name(member) for member in members}, []


def _keys(client: redis.Redis, app: Celery, prefix: str) -> list[bytes | str]:
    """The entry keys: members of the schedule zset, and the keys under the prefix but
    RedBeat's own (``P:schedule``, ``P:statics``, ``P:lock``, the configured lock key)."""
    internal = f"{prefix}:"
    lock = app.conf.get("redbeat_lock_key")
    own = {f"{prefix}{lock}" if lock and not lock.startswith(prefix) else lock}
    keys: dict[str, bytes | str] = {}
    try:
        for member, _ in client.zscan_iter(f"{prefix}:schedule"):
            keys.setdefault(_name(member), member)
    except redis.ResponseError:
        pass  # the schedule is not a zset: every entry is still found by SCAN
    for found in client.scan_iter(match=_glob(prefix) + "*", count=1000):
        name = _name(found)
        if not name.startswith(internal) and name not in own:
            keys.setdefault(name, found)
    return [keys[name] for name in sorted(keys)]


def _read(client: redis.Redis, keys: list[bytes | str]) -> Iterator[tuple[str, str, list[Any]]]:
    """(key, Redis type, [definition, meta]) per key, a pipelined batch at a time."""
    for start in range(0, len(keys), _BATCH):
        batch = keys[start : start + _BATCH]
        with client.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.type(key)
                pipe.hmget(key, ["definition", "meta"])
            replies = pipe.execute(raise_on_error=False)
        for index, key in enumerate(batch):
            kind, fields = replies[2 * index], replies[2 * index + 1]
            if isinstance(fields, Exception):
                fields = [None, None]
            yield _name(key), _name(kind), fields


def _json(raw: Any, what: str) -> Any:
    if raw is None:
        raise _RecordError(f"the hash has no {what!r} field")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as error:
        raise _RecordError(f"{what} is not JSON: {error}") from None


def _record(fields: list[Any], app: Celery, defaults: Defaults, notes: list[str]) -> dict[str, Any]:
    raw_definition, raw_meta = fields
    definition = _json(raw_definition, "definition")
    if not isinstance(definition, dict):
        raise _RecordError(f"definition {shown(definition)} is not a JSON object")
    missing = [key for key in ("name", "task", "schedule") if key not in definition]
    if missing:
        raise _RecordError(f"definition lacks {', '.join(map(repr, missing))}")
    options, expires = _options(definition.get("options"), notes)
    try:
        entry = build_entry(
            definition["name"],
            definition["task"],
            args=definition.get("args") or [],
            kwargs=definition.get("kwargs") or {},
            options=options,
            enabled=definition.get("enabled", True),
            expires=expires,
            source="runtime",
            defaults=defaults,
            **_schedule(definition["schedule"], app, notes),
        )
    except EntryError as error:
        raise _RecordError(str(error)) from None
    return {"definition": entry.to_dict(), "state": {"last_run": _last_run(raw_meta, notes)}}


def _options(value: Any, notes: list[str]) -> tuple[dict[str, Any], float | str | None]:
    """The options periodiq keeps, and Celery's ``expires`` as the entry's (seconds)."""
    if value is None:
        return {}, "auto"
    if not isinstance(value, dict):
        raise _RecordError(f"options {shown(value)} is not a JSON object")
    kept = {key: item for key, item in value.items() if key in OPTION_KEYS}
    dropped = sorted(key for key in value if key not in OPTION_KEYS and key != "expires")
    expires = value.get("expires")
    if isinstance(expires, dict) and expires.get("__type__") == "datetime":
        dropped.append("expires")  # an instant, not seconds after each tick
        expires = None
    if dropped:
        notes.append(
            f"options {dropped} are not carried over (periodiq keeps {_KEPT}; expires as seconds)"
        )
    return kept, "auto" if expires is None else expires


def _schedule(value: Any, app: Celery, notes: list[str]) -> dict[str, Any]:
    """The ``cron=``/``every=`` options of a RedBeat schedule, through the Celery schedule
    object it stands for (so a crontab is read in the app's time zone, as the API does)."""
    kind = value.get("__type__") if isinstance(value, dict) else None
    if kind == "crontab":
        unknown = sorted(set(value) - {"__type__", *_CRON_FIELDS})
        if unknown:
            raise _RecordError(f"crontab schedule has unknown fields {unknown}")
        spec = {key: value[key] for key in _CRON_FIELDS if key in value}
        if all(str(spec.get(key, "*")) != "*" for key in ("day_of_month", "day_of_week")):
            raise _RecordError(
                f"crontab({', '.join(f'{key}={shown(item)}' for key, item in spec.items())}) "
                "restricts both day_of_month and day_of_week: Celery "
                "runs when both match, a cron expression when either does (add it again with "
                "calendar=, e.g. 'Mon *-*-01..07 08:00', which needs both)"
            )
        try:
            celery_schedule: Any = crontab(**spec)
        except (ValueError, TypeError) as error:
            raise _RecordError(f"crontab schedule {shown(spec)} is invalid: {error}") from None
    elif kind == "interval":
        every = value.get("every")
        if isinstance(every, bool) or not isinstance(every, int | float) or every <= 0:
            raise _RecordError(
                f"interval schedule every={shown(every)} is invalid (allowed: seconds > 0)"
            )
        if value.get("relative"):
            notes.append(
                "interval relative=True (first run rounded to the interval) is not "
                "kept: periodiq anchors intervals to the entry's creation"
            )
        celery_schedule = interval(run_every=timedelta(seconds=every))
    elif kind == "rrule":
        raise _RecordError(
            "rrule schedules are not supported (allowed: crontab, interval); "
            "add it again with cron= or calendar="
        )
    else:
        raise _RecordError(
            f"schedule {shown(value)} is not supported (allowed: a RedBeat crontab or interval)"
        )
    try:
        return registry.schedule_options(celery_schedule, app)
    except EntryError as error:
        raise _RecordError(str(error)) from None


def _last_run(raw: Any, notes: list[str]) -> str | None:
    """RedBeat's ``last_run_at`` as ISO text (informational: an import does not write
    it); an unreadable meta loses only that, with a note."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)["last_run_at"]
        if value is None:
            return None
        return _instant(value).isoformat()
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, LookupError) as error:
        notes.append(
            f"meta is unreadable ({type(error).__name__}: {error}): last run not carried over"
        )
        return None


def _instant(value: dict[str, Any]) -> datetime:
    if value.get("__type__") != "datetime":
        raise ValueError(f"{shown(value)} is not a RedBeat datetime")
    zone = value.get("timezone", "UTC")
    tz = (
        timezone(timedelta(seconds=zone))
        if isinstance(zone, int | float) and not isinstance(zone, bool)
        else ZoneInfo(zone)
    )
    return datetime(**{key: value[key] for key in _DATETIME_FIELDS}, tzinfo=tz)
