"""Every key name: the schedule's global keys under {prefix}, each partition's under
{prefix:p}, so a Redis Cluster spreads the partitions while a script stays in one slot."""

from __future__ import annotations

import collections

from celery import Celery

from celery_periodiq.config import Settings
from celery_periodiq.protocol.keys import Keys, partition_of


def test_global_keys_carry_the_prefix_as_a_hash_tag() -> None:
    keys = Keys("periodiq:proj", 16)

    assert (keys.beats, keys.meta, keys.changes, keys.beat("host:42:ab12")) == (
        "{periodiq:proj}:beats",
        "{periodiq:proj}:meta",
        "{periodiq:proj}:changes",
        "{periodiq:proj}:beat:host:42:ab12",
    )


def test_partition_keys_carry_the_prefix_and_the_partition_as_a_hash_tag() -> None:
    part = Keys("periodiq:proj", 16).part(7)

    assert [part.entries, part.state, part.due, part.inflight, part.ticks, part.quarantine,
            part.declared, part.events, part.alive, part.owner("team-a")] == [
        "{periodiq:proj:7}:entries", "{periodiq:proj:7}:state", "{periodiq:proj:7}:due",
        "{periodiq:proj:7}:inflight", "{periodiq:proj:7}:ticks",
        "{periodiq:proj:7}:quarantine", "{periodiq:proj:7}:declared",
        "{periodiq:proj:7}:events", "{periodiq:proj:7}:alive", "{periodiq:proj:7}:owner:team-a",
    ]  # fmt: skip


def test_an_entrys_own_keys_are_named_after_it_in_its_partition() -> None:
    keys = Keys("p", 16)
    part = keys.of("report")

    assert part.index == partition_of("report", 16)
    assert part.entry_keys("report") == [
        (f"{{p:{part.index}}}:history:report", "list"),
        (f"{{p:{part.index}}}:failures:report", "list"),
    ]
    assert part.checkpoint("report") == f"{{p:{part.index}}}:checkpoint:report"


def test_an_entrys_partition_is_a_stable_hash_of_its_name() -> None:
    # CRC-32 of the UTF-8 name: the same on every host, in every process, forever
    assert partition_of("report", 16) == 3291445124 % 16  # zlib.crc32(b"report")
    assert partition_of("report", 5) == 3291445124 % 5
    assert partition_of("anything", 1) == 0


def test_entries_spread_evenly_over_the_partitions() -> None:
    counts = collections.Counter(partition_of(f"tenant-{n}", 16) for n in range(16_000))

    assert sorted(counts) == list(range(16))
    assert max(counts.values()) < 1.1 * 1000
    assert min(counts.values()) > 0.9 * 1000


def test_settings_keys_use_the_configured_prefix_and_partitions() -> None:
    app = Celery("t", broker="redis://127.0.0.1:6390/0", set_as_current=False)
    app.conf.periodiq_key_prefix = "prod"
    app.conf.periodiq_partitions = 4

    keys = Settings.from_app(app).keys

    assert [part.tag for part in keys.all()] == ["{prod:0}", "{prod:1}", "{prod:2}", "{prod:3}"]
    assert keys.beats == "{prod}:beats"
