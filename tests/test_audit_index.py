"""The whole schedule's audit read from the trails' index (``audit_newest``: each trail's
newest record): the newest trails are read, not every trail; a partition holding trails
the index lacks (an older version wrote them, or the index is damaged) is read whole,
and ``reindex`` indexes it. Real Redis; the commands a read sends are counted by the
server (``INFO commandstats``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from celery_periodiq import Periodiq
from tests.processes import wait_for
from tests.test_audit import TASK, make_api


@pytest.fixture
def api(broker_url: str, redis_url: str) -> Iterator[Periodiq]:
    client = make_api(broker_url, redis_url, periodiq_partitions=1)
    client.add_many([{"name": f"e{n:03}", "task": TASK, "every": 60} for n in range(300)])
    yield client
    client.store.client.close()
    client.app.close()


def calls(api: Periodiq, read: object) -> dict[str, int]:
    """The calls of each command the schedule's Redis ran while ``read()`` ran."""
    client = api.store.client
    client.config_resetstat()
    read()  # type: ignore[operator]
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(stat["calls"]) for name, stat in stats.items()}


def past_the_last_write(api: Periodiq) -> None:
    """Wait until the Redis clock is in a later millisecond than the last write (records
    of one millisecond have no order among themselves)."""
    later = api.now() + timedelta(milliseconds=2)
    wait_for(lambda: api.now() > later, 5, "the Redis clock to pass the last write")


def newest_pauses(api: Periodiq) -> list[str]:
    """Pause three entries after the others' adds, each in its own millisecond."""
    for name in ("e007", "e123", "e299"):
        past_the_last_write(api)
        api.pause(name, actor="bob")
    return ["e299", "e123", "e007"]


def test_the_whole_schedules_newest_records_are_read_from_the_index(api: Periodiq) -> None:
    newest = newest_pauses(api)
    found: list[list[str]] = []

    counted = calls(api, lambda: found.append([r.name for r in api.audit(limit=3)]))

    assert found == [newest]
    assert counted.get("hscan", 0) <= 1  # the windows' trails only, not the 300 entries'
    assert counted["hmget"] == 1
    assert [r.name for r in api.audit(actor="bob", limit=2)] == newest[:2]
    assert len(api.audit(limit=None)) == 303  # all of them, read through the index
    assert len(api.audit(since="1h", limit=500)) == 303


def test_an_actor_filter_finds_older_records_behind_newer_ones(api: Periodiq) -> None:
    api.pause("e042", actor="carol")
    newest_pauses(api)  # bob's, newer than carol's: more than the limit

    assert [(r.name, r.actor) for r in api.audit(actor="carol", limit=1)] == [("e042", "carol")]


def test_trails_the_index_lacks_are_read_whole_until_reindexed(api: Periodiq) -> None:
    newest = newest_pauses(api)
    client, part = api.store.client, api.store.keys.of("e000")
    # as an older version leaves them: live entries' trails not indexed
    client.zrem(part.audit_newest, "e123", "e050")

    read = calls(api, lambda: api.audit(limit=3))
    assert [r.name for r in api.audit(limit=3)] == newest  # e123's pause still found
    assert read["hscan"] >= 2  # the partition's trails, read whole
    indexes = api.diagnose()[-1]
    assert (indexes.name, indexes.status) == ("indexes", "warn")
    assert indexes.detail.startswith("the audit index misses 2 trails: ")
    assert "doctor --reindex" in indexes.detail

    api.reindex()

    assert client.zcard(part.audit_newest) == 300
    assert api.diagnose()[-1].status == "ok"
    read = calls(api, lambda: api.audit(limit=3))
    assert read.get("hscan", 0) <= 1
    assert [r.name for r in api.audit(limit=3)] == newest


def test_a_damaged_index_is_read_around_and_replaced_by_the_next_record(api: Periodiq) -> None:
    client, part = api.store.client, api.store.keys.of("e000")
    client.set(part.audit_newest, "not a zset")  # written by someone else

    assert len(api.audit(limit=None)) == 300  # read whole
    assert "the audit index misses 300 trails" in api.diagnose()[-1].detail
    newest = newest_pauses(api)

    assert client.type(part.audit_newest) == "zset"
    assert [r.name for r in api.audit(limit=3)] == newest


def test_records_of_one_millisecond_come_in_one_order_whichever_way_they_are_read(
    api: Periodiq,
) -> None:
    client, part = api.store.client, api.store.keys.of("e000")
    past_the_last_write(api)
    api.pause("e100", actor="bob")
    # two more trails of that very millisecond, as two writes in it leave them
    trail, newest = client.hget(part.audit, "e100"), client.zscore(part.audit_newest, "e100")
    for name in ("e050", "e200"):
        client.hset(part.audit, name, trail)
        client.zadd(part.audit_newest, {name: newest})

    indexed = [r.name for r in api.audit(limit=3)]
    client.zrem(part.audit_newest, "e299")  # now read whole: an unindexed trail
    scanned = [r.name for r in api.audit(limit=3)]

    assert indexed == scanned == ["e200", "e100", "e050"]
