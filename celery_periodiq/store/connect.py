"""The Redis client of a schedule, built from the settings: a URL (TLS and ACL users
from it), Sentinel (``sentinel://``) or Redis Cluster."""

from __future__ import annotations

from typing import Any

import redis
import redis.sentinel

from celery_periodiq.config import Settings, sentinel_hosts
from celery_periodiq.store.cluster_client import ClusterOnDemand

__all__ = ["connect"]


def connect(settings: Settings) -> Any:
    """A client for the configured Redis URL (TLS and ACL users come from the URL): a
    ``redis.Redis``, or a Redis Cluster client with ``periodiq_redis_cluster``."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 5.0,
        "socket_connect_timeout": 5.0,
    }
    if settings.redis_cluster:
        options.update(settings.redis_options)
        return ClusterOnDemand(settings.redis_url, options)
    options["health_check_interval"] = 15
    options.update(settings.redis_options)
    if settings.redis_url.startswith("sentinel://"):
        return _sentinel_client(settings.redis_url, options)
    return redis.Redis.from_url(settings.redis_url, **options)


def _sentinel_client(url: str, options: dict[str, Any]) -> Any:
    """A client of the primary the sentinels name; it finds the new one after a failover."""
    hosts, db, username, password = sentinel_hosts(url)
    master = options.pop("master_name")
    sentinel_kwargs = {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
        **(options.pop("sentinel_kwargs", None) or {}),
    }
    if username is not None:
        options.setdefault("username", username)
    if password is not None:
        options.setdefault("password", password)
    sentinel: Any = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        hosts, sentinel_kwargs=sentinel_kwargs, **options
    )
    return sentinel.master_for(master, db=db)
