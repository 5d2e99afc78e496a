"""``periodiq_*`` settings with their defaults (key names: :mod:`celery_periodiq.protocol.keys`).

Each Celery app keeps its schedule under its own prefix, ``periodiq:<app main
name>`` unless ``periodiq_key_prefix`` says otherwise, so apps sharing one Redis
never see each other's entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from celery.utils.time import timezone as celery_zones

from celery_periodiq.errors import ConfigurationError, did_you_mean
from celery_periodiq.model.checkin_settings import (
    CHECKIN_KINDS,
    checkin_url,
    checkin_urls,
    checkins,
)
from celery_periodiq.model.policy import (
    CATCHUP_POLICIES,
    DEFAULT_CATCHUP,
    DEFAULT_GRACE,
    DEFAULT_OVERLAP,
    OVERLAP_POLICIES,
    group_limits,
)
from celery_periodiq.protocol.keys import Keys
from celery_periodiq.schedules.zones import zone

__all__ = [
    "CATCHUP_POLICIES",
    "CHECKIN_KINDS",
    "DEFAULTS",
    "OVERLAP_POLICIES",
    "Keys",
    "Settings",
    "app_namespace",
    "app_zone",
    "redacted",
    "refuse_unknown",
    "sentinel_hosts",
]

DEFAULTS: dict[str, Any] = {
    "periodiq_redis_url": None,  # None: the broker URL when it is redis(s)://, else localhost
    "periodiq_redis_options": {},  # extra redis.Redis keyword arguments (ssl_ca_certs, ...);
    # with a sentinel:// URL also master_name (required) and sentinel_kwargs
    "periodiq_key_prefix": None,  # None: "periodiq:<the app's main name>", one namespace per app
    "periodiq_claim_lease": 10.0,  # seconds before a dead beat's claimed ticks are taken over
    "periodiq_batch_size": 500,  # ticks claimed per Lua call
    "periodiq_history_length": 40,  # events kept per entry (about 12 runs)
    "periodiq_partitions": 16,  # entries spread over this many hash tags (Redis Cluster slots)
    "periodiq_redis_cluster": False,  # True: periodiq_redis_url names Redis Cluster nodes (;)
    "periodiq_replica_acks": 0,  # replicas that must have a claim before a beat publishes it
    "periodiq_replica_timeout": 0.5,  # seconds to wait for them (WAIT)
    "periodiq_catchup_cap": 100,  # most ticks catchup="all" publishes at once
    "periodiq_stage_horizon": 60.0,  # seconds ahead a beat may stage a burst (0: never)
    "periodiq_stage_min": 1000,  # ticks due within the horizon before staging pays
    "periodiq_stage_max": 200_000,  # most messages staged in the broker at once
    "periodiq_default_catchup": DEFAULT_CATCHUP,
    "periodiq_default_overlap": DEFAULT_OVERLAP,
    "periodiq_default_grace": DEFAULT_GRACE,  # seconds between soft and hard time limit, at most
    "periodiq_alert_task": None,  # a task name: it gets one JSON payload per alert transition
    "periodiq_checkins": [],  # monitors told of each run: "sentry" (Sentry Crons), "ping"
    "periodiq_checkin_url": None,  # ping URL template, "https://hc.example/ping/{entry}"
    "periodiq_checkin_urls": {},  # entry name -> its own ping URL (wins over the template)
    "periodiq_checkin_timeout": 2.0,  # seconds a ping may take before it is given up
    "periodiq_tracing": False,  # True: OpenTelemetry spans per pass and tick (the otel extra)
    "periodiq_group_limits": {},  # group -> the most runs of its entries at once (worker's guard)
    "periodiq_audit_length": 5,  # audit records kept per entry (0: no audit trail)
    "periodiq_audit_window": 90 * 86400,  # seconds a record is kept (and a deleted entry's trail)
}


@dataclass(frozen=True, slots=True)
class Settings:
    """The ``periodiq_*`` settings of one Celery app, validated."""

    redis_url: str
    redis_options: dict[str, Any]
    key_prefix: str
    claim_lease: float
    batch_size: int
    history_length: int
    catchup_cap: int
    default_catchup: str
    default_overlap: str
    default_grace: float
    partitions: int = 16
    redis_cluster: bool = False
    replica_acks: int = 0
    replica_timeout: float = 0.5
    stage_horizon: float = 60.0
    """Seconds ahead a beat may claim, render and stage ticks in a Redis broker."""
    stage_min: int = 1000
    """Ticks due within the horizon before a beat stages them."""
    stage_max: int = 200_000
    """The most messages staged in the broker at once (about 1.45 KB each)."""
    alert_task: str | None = None
    checkins: tuple[str, ...] = ()
    """The monitors told of each run: "sentry" and/or "ping" (implied by a ping URL)."""
    checkin_url: str | None = None
    checkin_urls: dict[str, str] = field(default_factory=dict)
    checkin_timeout: float = 2.0
    group_limits: dict[str, int] = field(default_factory=dict)  # see model.policy
    audit_length: int = 5
    """Audit records kept per entry, the newest (0: none are)."""
    audit_window: float = 90 * 86400.0
    """Seconds an audit record is kept: older ones, and deleted entries' trails, leave."""
    tracing: bool = False
    """Spans per beat pass and claimed tick, the guard's decision as an event (tracing.md)."""
    namespace: str = "default"
    """The app's main name: what the default prefix is derived from."""
    default_tz: str = "UTC"
    """The zone of an entry that names none: the app's (:func:`app_zone`)."""
    url_origin: str = "periodiq_redis_url"
    """Where ``redis_url`` came from: ``periodiq_redis_url``, ``broker_url`` or ``default``
    (neither was a Redis URL, so ``redis://localhost:6379/0`` is assumed)."""

    @classmethod
    def from_app(cls, app: Celery) -> Settings:
        """Read and check the app's settings.

        Raises:
            ConfigurationError: a setting has a value it cannot have, or a ``periodiq_*``
                setting is none of ours (a misspelling would else be ignored).
        """
        conf = app.conf
        refuse_unknown(app)

        def get(name: str) -> Any:
            value = conf.get(name)
            return DEFAULTS[name] if value is None else value

        def number(name: str) -> float:
            return float(_typed(name, get(name), float))

        url, origin = get("periodiq_redis_url"), "periodiq_redis_url"
        if not url:
            url, origin = _redis_url_from_broker(conf.get("broker_url"))
        namespace = app_namespace(app)
        prefix = get("periodiq_key_prefix")
        settings = cls(
            redis_url=_typed("periodiq_redis_url", url, str),
            redis_options=dict(
                _typed("periodiq_redis_options", get("periodiq_redis_options"), dict)
            ),
            key_prefix=_typed(
                "periodiq_key_prefix", f"periodiq:{namespace}" if prefix is None else prefix, str
            ),
            claim_lease=float(_typed("periodiq_claim_lease", get("periodiq_claim_lease"), float)),
            batch_size=_typed("periodiq_batch_size", get("periodiq_batch_size"), int),
            history_length=_typed("periodiq_history_length", get("periodiq_history_length"), int),
            catchup_cap=_typed("periodiq_catchup_cap", get("periodiq_catchup_cap"), int),
            default_catchup=_typed(
                "periodiq_default_catchup", get("periodiq_default_catchup"), str
            ),
            default_overlap=_typed(
                "periodiq_default_overlap", get("periodiq_default_overlap"), str
            ),
            default_grace=number("periodiq_default_grace"),
            partitions=_typed("periodiq_partitions", get("periodiq_partitions"), int),
            redis_cluster=_typed("periodiq_redis_cluster", get("periodiq_redis_cluster"), bool),
            replica_acks=_typed("periodiq_replica_acks", get("periodiq_replica_acks"), int),
            replica_timeout=number("periodiq_replica_timeout"),
            stage_horizon=number("periodiq_stage_horizon"),
            stage_min=_typed("periodiq_stage_min", get("periodiq_stage_min"), int),
            stage_max=_typed("periodiq_stage_max", get("periodiq_stage_max"), int),
            alert_task=_alert_task(get("periodiq_alert_task")),
            checkins=checkins(
                get("periodiq_checkins"),
                bool(get("periodiq_checkin_url") or get("periodiq_checkin_urls")),
            ),
            checkin_url=checkin_url("periodiq_checkin_url", get("periodiq_checkin_url")),
            checkin_urls=checkin_urls(get("periodiq_checkin_urls")),
            checkin_timeout=number("periodiq_checkin_timeout"),
            tracing=_typed("periodiq_tracing", get("periodiq_tracing"), bool),
            group_limits=group_limits(
                get("periodiq_group_limits"), get("periodiq_redis_cluster") is True
            ),
            audit_length=_typed("periodiq_audit_length", get("periodiq_audit_length"), int),
            audit_window=number("periodiq_audit_window"),
            namespace=namespace,
            default_tz=app_zone(app),
            url_origin=origin,
        )
        settings.check()
        return settings

    def _check_sentinel(self) -> None:
        sentinel_hosts(self.redis_url)
        if self.redis_cluster:
            raise _bad("periodiq_redis_cluster", True, "False with a sentinel:// URL")
        master = self.redis_options.get("master_name")
        if not isinstance(master, str) or not master:
            raise ConfigurationError(
                "setting periodiq_redis_options needs the Sentinel master's name with a "
                "sentinel:// URL, e.g. {'master_name': 'mymaster'}"
            )
        extra = self.redis_options.get("sentinel_kwargs")
        if extra is not None and not isinstance(extra, dict):
            raise _bad("periodiq_redis_options['sentinel_kwargs']", extra, "a dict")

    def check(self) -> None:
        """Raise :class:`ConfigurationError` for any value out of bounds."""
        if self.redis_url.startswith("sentinel://"):
            self._check_sentinel()
        elif ";" in self.redis_url and not self.redis_cluster:
            raise _bad(
                "periodiq_redis_url",
                redacted(self.redis_url),
                "one URL; several nodes separated by ; only with periodiq_redis_cluster",
            )
        elif not all(
            part.strip().startswith(("redis://", "rediss://", "unix://"))
            for part in self.redis_url.split(";")
        ):
            raise _bad(
                "periodiq_redis_url",
                redacted(self.redis_url),
                "a redis://, rediss:// or unix:// URL, or sentinel://host:port;sentinel://...",
            )
        prefix = self.key_prefix
        if not prefix or any(mark in prefix for mark in "{} \n"):
            raise _bad("periodiq_key_prefix", prefix, "a non-empty name without braces or spaces")
        if not 0.5 <= self.claim_lease <= 3600:
            raise _bad("periodiq_claim_lease", self.claim_lease, "0.5 to 3600 seconds")
        if not 1 <= self.batch_size <= 10_000:
            raise _bad("periodiq_batch_size", self.batch_size, "1 to 10000")
        if not 1 <= self.history_length <= 100_000:
            raise _bad("periodiq_history_length", self.history_length, "1 to 100000")
        if not 1 <= self.catchup_cap <= 100_000:
            raise _bad("periodiq_catchup_cap", self.catchup_cap, "1 to 100000")
        if self.default_catchup not in CATCHUP_POLICIES:
            raise _bad(
                "periodiq_default_catchup", self.default_catchup, ", ".join(CATCHUP_POLICIES)
            )
        if self.default_overlap not in OVERLAP_POLICIES:
            raise _bad(
                "periodiq_default_overlap", self.default_overlap, ", ".join(OVERLAP_POLICIES)
            )
        if not 0 <= self.replica_acks <= 16:
            raise _bad("periodiq_replica_acks", self.replica_acks, "0 to 16 replicas")
        if not 0.01 <= self.replica_timeout <= 60:
            raise _bad("periodiq_replica_timeout", self.replica_timeout, "0.01 to 60 seconds")
        if not 0 <= self.default_grace <= 86400:
            raise _bad("periodiq_default_grace", self.default_grace, "0 to 86400 seconds")
        if not 0 <= self.stage_horizon <= 600:
            raise _bad("periodiq_stage_horizon", self.stage_horizon, "0 to 600 seconds")
        if not 1 <= self.stage_min <= 10_000_000:
            raise _bad("periodiq_stage_min", self.stage_min, "1 to 10000000 ticks")
        if not 0 <= self.stage_max <= 10_000_000:
            raise _bad("periodiq_stage_max", self.stage_max, "0 to 10000000 messages")
        if not 1 <= self.partitions <= 1024:
            raise _bad("periodiq_partitions", self.partitions, "1 to 1024")
        if not 0.1 <= self.checkin_timeout <= 30:
            raise _bad("periodiq_checkin_timeout", self.checkin_timeout, "0.1 to 30 seconds")
        if not 0 <= self.audit_length <= 1000:
            raise _bad("periodiq_audit_length", self.audit_length, "0 to 1000 records")
        if not 3600 <= self.audit_window <= 3660 * 86400:
            raise _bad("periodiq_audit_window", self.audit_window, "3600 seconds to 10 years")

    @property
    def keys(self) -> Keys:
        """The Redis key names under this app's prefix and partitions."""
        return Keys(self.key_prefix, self.partitions)


_OURS = "periodiq_"


def refuse_unknown(app: Celery) -> None:
    """Refuse a ``periodiq_*`` key of ``app.conf`` that is none of our settings (with
    ``config_from_object(..., namespace="CELERY")``, a ``CELERY_PERIODIQ_*`` key too).

    Raises:
        ConfigurationError: the key, and the settings it is closest to.
    """
    given = getattr(app, "namespace", None)  # config_from_object's (celery-types lacks it)
    namespace = given.rstrip("_") + "_" if isinstance(given, str) and given else None
    for key in list(app.conf.keys()):
        if not isinstance(key, str):
            continue
        if key.startswith(_OURS):
            written, name = "", key
        elif namespace and key.upper().startswith((namespace + _OURS).upper()):
            written, name = key[: len(namespace)], key[len(namespace) :].lower()
        else:
            continue
        if name in DEFAULTS:
            continue
        ours = [known.removeprefix(_OURS) for known in DEFAULTS]  # told apart by the rest
        show = partial(_spelled, written, key.isupper())
        hint = did_you_mean(name.removeprefix(_OURS), ours, show=show)
        raise ConfigurationError(
            f"setting {key} is unknown{hint}; the settings are the periodiq_* keys of "
            "docs/reference/settings.md"
        )


def _spelled(namespace: str, upper: bool, rest: str) -> str:
    """The setting ``periodiq_<rest>`` as the key of the user's configuration spells it."""
    return namespace + (_OURS + rest).upper() if upper else namespace + _OURS + rest


_KINDS = {str: "text", int: "a whole number", float: "a number", dict: "a dict"}
_KINDS[bool] = "True or False"  # what an int is not (True is one)


def _alert_task(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad("periodiq_alert_task", value, "a task name such as 'proj.alert', or None")
    return value


def _typed(name: str, value: Any, kind: type) -> Any:
    """``value`` if it is of ``kind`` (ints count as floats; bools count only as bools)."""
    accepted = (int, float) if kind is float else (kind,)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, accepted):
        raise _bad(name, value, _KINDS[kind])
    return value


def sentinel_hosts(url: str) -> tuple[list[tuple[str, int]], int, str | None, str | None]:
    """The sentinels of a ``sentinel://[user:password@]host:port;sentinel://...[/db]`` URL
    (Celery's form), the database number, and the data nodes' user and password.

    Raises:
        ConfigurationError: a part is not ``sentinel://host:port``.
    """
    hosts: list[tuple[str, int]] = []
    db, username, password = 0, None, None
    for part in url.split(";"):
        parsed = urlsplit(part.strip())
        try:
            port = parsed.port
        except ValueError:
            port = None
        if parsed.scheme != "sentinel" or not parsed.hostname or port is None:
            raise _bad(
                "periodiq_redis_url", redacted(url), "sentinel://host:port;sentinel://host:port/db"
            )
        hosts.append((parsed.hostname, port))
        username, password = parsed.username or username, parsed.password or password
        if parsed.path.strip("/"):
            if not parsed.path.strip("/").isdigit():
                raise _bad("periodiq_redis_url", redacted(url), "a database number after /")
            db = int(parsed.path.strip("/"))
    return hosts, db, username, password


def redacted(url: str) -> str:
    """The URL without its password (in the credentials or the query); each part of a
    ``;``-separated Sentinel URL alike."""
    if ";" in url:
        return ";".join(redacted(part) for part in url.split(";"))
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        rest = f"{user}:***@{host}" if user else f"***@{host}"
    return scheme + sep + re.sub(r"(?i)(password=)[^&]*", r"\1***", rest)


def _bad(name: str, value: object, allowed: str) -> ConfigurationError:
    return ConfigurationError(f"setting {name}={value!r} is invalid (allowed: {allowed})")


def _redis_url_from_broker(broker: object) -> tuple[str, str]:
    if isinstance(broker, str) and broker.startswith(("redis://", "rediss://")):
        return broker, "broker_url"
    return "redis://localhost:6379/0", "default"


def app_zone(app: Celery) -> str:
    """The IANA name of the zone Celery reads the app's ``crontab`` schedules in: its
    ``timezone`` setting (or Django's ``TIME_ZONE``, as Celery reads it); without one,
    UTC when ``enable_utc`` is on (the default), else the host's zone.

    Raises:
        ConfigurationError: ``timezone`` is no IANA zone, or it is unset with
            ``enable_utc`` off and the host's zone has no IANA name.
    """
    conf = app.conf
    name = conf.get("timezone") or conf.get("TIME_ZONE")
    if not name:
        if conf.get("enable_utc", True):
            return "UTC"
        name = getattr(celery_zones.local, "key", None)
        if not name:
            raise ConfigurationError(
                "setting timezone is unset and enable_utc is False, so Celery reads "
                "schedules on the host's clock, whose zone has no IANA name here; set "
                "timezone (e.g. 'Europe/Berlin')"
            )
    text = str(name)
    try:
        zone(text)
    except ValueError:
        raise _bad("timezone", name, "an IANA zone name such as 'Europe/Berlin' or 'UTC'") from None
    return text


def app_namespace(app: Celery) -> str:
    """The app's main name, made safe for a key prefix (``default`` when it has none)."""
    return re.sub(r"[^\w.:-]", "_", app.main or "") or "default"
