"""What ``doctor`` reports of a Redis behind Sentinel: the primary the sentinels name,
its replicas with their replication lag, and how many sentinels answer."""

from __future__ import annotations

from typing import Any

import redis

from celery_periodiq.config import Settings, sentinel_hosts

__all__ = ["replicas", "sentinel_report"]


def replicas(replication: dict[str, Any], state: str | None = None) -> list[dict[str, Any]]:
    """The replicas listed by a primary's ``INFO replication`` (``slave0``, ...), those
    in ``state`` only when given (``online``: in sync)."""
    return [
        value
        for key, value in replication.items()
        if key.startswith("slave")
        and isinstance(value, dict)
        and (state is None or value.get("state") == state)
    ]


def sentinel_report(settings: Settings, primary: Any) -> tuple[str, str]:
    """``(status, detail)``: ok when every sentinel answers and the primary has a replica
    in sync, warn when some do not, fail when none answers.

    ``primary`` is the store's client (it reaches the primary the sentinels name).
    """
    hosts, _, _, _ = sentinel_hosts(settings.redis_url)
    master = str(settings.redis_options["master_name"])
    extra = dict(settings.redis_options.get("sentinel_kwargs") or {})
    named: tuple[str, int] | None = None
    answering = 0
    for host, port in hosts:
        client: Any = redis.Redis(
            host=host,
            port=port,
            socket_timeout=2,
            socket_connect_timeout=2,
            decode_responses=True,
            **extra,
        )
        try:
            found = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", master)
        except redis.RedisError:
            continue
        finally:
            client.close()
        answering += 1
        if found and named is None:
            named = (str(found[0]), int(found[1]))
    if not answering:
        where = ", ".join(f"{host}:{port}" for host, port in hosts)
        return "fail", f"no sentinel answers ({where})"
    if named is None:
        return "fail", f"the sentinels know no primary named {master!r}"
    try:
        replication = primary.info("replication")
    except redis.RedisError as error:
        return "fail", f"primary {named[0]}:{named[1]} does not answer: {error}"
    listed = replicas(replication)
    shown = ", ".join(
        f"{r.get('ip')}:{r.get('port')} {r.get('state')}, lag {r.get('lag')} s" for r in listed
    )
    detail = (
        f"primary {named[0]}:{named[1]} ({master!r}); {len(listed)} "
        f"{'replica' if len(listed) == 1 else 'replicas'}{': ' + shown if shown else ''}; "
        f"{answering} of {len(hosts)} sentinels answer"
    )
    in_sync = any(r.get("state") == "online" for r in listed)
    return ("ok" if in_sync and answering == len(hosts) else "warn"), detail
