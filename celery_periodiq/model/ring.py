"""Which beats watch which partitions: rendezvous (highest random weight) hashing.

Every partition is watched by ``COPIES`` of the live beats: those whose hash with the
partition scores highest. Every beat computes the same answer from the same list of
live beats, with no coordination, and a beat joining or leaving moves only the
partitions it gains or loses. The ring only divides the work: a beat still sweeps
every partition now and then, so an expired claim is taken over even while the
beats' views of the ring disagree.
"""

from __future__ import annotations

import hashlib

__all__ = ["COPIES", "owners", "watched"]

COPIES = 2
"""How many beats watch each partition."""


def _weight(beat_id: str, partition: int) -> int:
    digest = hashlib.blake2b(f"{beat_id}\x00{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owners(partition: int, beats: list[str], copies: int = COPIES) -> list[str]:
    """The beats that watch ``partition``, most weighted first."""
    ranked = sorted(beats, key=lambda beat: (_weight(beat, partition), beat), reverse=True)
    return ranked[:copies]


def watched(me: str, beats: list[str], partitions: int, copies: int = COPIES) -> frozenset[int]:
    """The partitions ``me`` watches among the live ``beats`` (all of them when ``me`` is
    not among the live ones yet: a starting beat watches everything until it is)."""
    if me not in beats:
        return frozenset(range(partitions))
    return frozenset(p for p in range(partitions) if me in owners(p, beats, copies))
