"""Beats divide the partitions between them: two beats watch each, chosen by rendezvous
hashing over the live beats, the same on every beat; a beat joining or leaving moves
only its own share."""

from __future__ import annotations

import collections

from celery_periodiq.model.ring import owners, watched

BEATS = [f"host-{n}:{1000 + n}:{n:08x}" for n in range(5)]


def test_each_partition_is_watched_by_two_beats() -> None:
    shares = [watched(beat, BEATS, 64) for beat in BEATS]

    counts = collections.Counter(index for share in shares for index in share)
    assert counts == dict.fromkeys(range(64), 2)


def test_every_beat_computes_the_same_owners() -> None:
    assert [owners(p, BEATS) for p in range(16)] == [owners(p, list(reversed(BEATS)))
                                                     for p in range(16)]  # fmt: skip


def test_the_work_is_shared_about_evenly() -> None:
    sizes = [len(watched(beat, BEATS, 1024)) for beat in BEATS]

    assert sum(sizes) == 2 * 1024
    assert min(sizes) > 0.8 * 2 * 1024 / 5
    assert max(sizes) < 1.2 * 2 * 1024 / 5


def test_a_beat_leaving_moves_only_the_partitions_it_watched() -> None:
    before = {p: owners(p, BEATS) for p in range(256)}
    after = {p: owners(p, BEATS[:-1]) for p in range(256)}

    moved = [p for p in range(256) if before[p] != after[p]]
    assert moved == [p for p in range(256) if BEATS[-1] in before[p]]
    for p in moved:
        assert set(before[p]) - {BEATS[-1]} <= set(after[p])  # the other keeps it


def test_one_or_two_beats_watch_everything() -> None:
    assert watched(BEATS[0], BEATS[:1], 16) == frozenset(range(16))
    assert watched(BEATS[1], BEATS[:2], 16) == frozenset(range(16))


def test_a_beat_not_yet_in_the_registry_watches_everything() -> None:
    assert watched("new-beat", BEATS, 16) == frozenset(range(16))
