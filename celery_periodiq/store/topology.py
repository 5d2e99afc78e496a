"""What ``doctor`` reports of the Redis topology: behind Sentinel, the primary the
sentinels name, its replicas with their replication lag, and how many sentinels answer;
and whether the replicas attached to each primary can give ``periodiq_replica_acks``."""

from __future__ import annotations

from typing import Any

import redis

from celery_periodiq.config import Settings, sentinel_hosts
from celery_periodiq.store.cluster_client import is_cluster

__all__ = ["attached", "replica_report", "replicas", "sentinel_report"]


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


def attached(replication: dict[str, Any]) -> int:
    """How many replicas a primary's ``INFO replication`` lists, syncing or in sync, that
    a failover could promote: all but a tool attached as one (``redis-cli --replica``,
    with no port). Replica acks wait for every one of them."""
    return sum(1 for replica in replicas(replication) if str(replica.get("port", 0)) != "0")


def replica_report(settings: Settings, client: Any) -> tuple[str, str] | None:
    """``(status, detail)`` of what ``periodiq_replica_acks`` can count on: fail when a
    primary has fewer replicas attached than it asks for (nothing would be published),
    warn when replicas are there and it is 0 (a failover can run a tick twice); None
    when there is nothing to say (no replica, no replica acks).

    Raises:
        redis.RedisError: Redis does not answer.
    """
    if is_cluster(client):
        found = client.info("replication", target_nodes=client.PRIMARIES)
        infos = list(found.values()) if "role" not in found else [found]
    else:
        infos = [client.info("replication")]
    counts = [attached(info) for info in infos]
    fewest, acks, one = min(counts, default=0), settings.replica_acks, len(counts) == 1
    noun = "replica" if fewest == 1 else "replicas"
    if not acks:
        if not fewest:
            return None
        return "warn", (
            f"{'the primary has' if one else 'each primary has at least'} {fewest} {noun}, "
            "and periodiq_replica_acks = 0: a failover can lose claims and run starts the "
            "primary had not passed on, and run a tick twice (set periodiq_replica_acks = 1)"
        )
    if fewest < acks:
        return "fail", (
            f"periodiq_replica_acks = {acks}, but {'the' if one else 'a'} primary has "
            f"{fewest} {noun} attached: nothing is published and runs wait until {acks} are"
        )
    detail = (
        "claims and run starts wait for every replica attached "
        f"({f'the primary has {fewest}' if one else f'at least {fewest} per primary'}), "
        f"and at least periodiq_replica_acks = {acks}"
    )
    if acks < fewest:
        detail += (
            "; a replica cut off from its primary is not waited for (periodiq_replica_acks "
            "= the number of replicas would wait for it, and stop while it is away)"
        )
    return "ok", detail


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
