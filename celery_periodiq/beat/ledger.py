"""Settlements on their way to Redis (ack.lua), none of them lost.

A published chunk's settlements are sent without waiting: Redis runs them while the
next chunk is published. Those that failed, or could not even be sent, are kept and
written first in the next pass (dropping them would leave their claims to be taken
over after the lease and published again); a settlement written twice changes nothing
the second time. ack.lua tells a settlement refused because another beat took its
claim over from one written already (by this beat's own call whose reply was lost):
only the first is warned about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.beat_scripts import Acked
from celery_periodiq.store.store import Store

__all__ = ["Ledger"]

logger = logging.getLogger("celery_periodiq.dispatch")


class Ledger:
    """Writes one beat's settlements, and keeps those not written yet."""

    def __init__(self, store: Store, beat_id: str) -> None:
        self.store = store
        self.settings = store.settings
        self.beat_id = beat_id
        self.refused = 0
        """Settlements Redis refused since the start: claims another beat had taken over."""
        self._settling: Callable[[], Acked] | None = None
        """Waits for the settlements of the last chunk published (see :meth:`send`)."""
        self._unsettled_chunk: dict[int, list[Settlement]] = {}
        self._unsettled: dict[int, list[Settlement]] = {}
        """Settlements of published ticks whose ack failed, by partition: written first in
        the next pass."""

    def send(self, chunk: dict[int, list[Settlement]]) -> None:
        """Send a published chunk's settlements; Redis runs them while the next chunk is
        published (the last chunk's are waited for before this one's are sent)."""
        self.wait()
        self._unsettled_chunk = chunk
        size = self.settings.batch_size
        batches = [
            (self.store.keys.part(index), items[start : start + size])
            for index, items in chunk.items()
            for start in range(0, len(items), size)
        ]
        self._settling = self.store.scripts.ack_later(
            batches, self.beat_id, self.settings.history_length
        )

    def wait(self) -> None:
        """Wait for the settlements sent by :meth:`send`; those that failed, or could not
        even be sent, are written by :meth:`write_pending` (first thing in the next pass,
        if not at the end of this one)."""
        settling, chunk = self._settling, self._unsettled_chunk
        self._settling, self._unsettled_chunk = None, {}
        if settling is not None:
            try:
                settled = settling()
            except Exception:  # kept below, with the others not written yet
                pass
            else:
                self._count_refused(settled)
                return
        # Not sent (ack_later raised) or failed: dropping them would leave their claims
        # to be taken over after the lease and published again.
        for index, items in chunk.items():
            self._unsettled.setdefault(index, []).extend(items)

    def write_pending(self) -> None:
        """Write the settlements not yet written (ack.lua): a batch of each partition at a
        time, every partition's in one round trip. Written again after a failure: a
        settlement written twice changes nothing the second time."""
        size = self.settings.batch_size
        while self._unsettled:
            batches = [
                (self.store.keys.part(index), items[:size])
                for index, items in self._unsettled.items()
            ]
            settled = self.store.scripts.ack_many(
                batches, self.beat_id, self.settings.history_length
            )
            self._count_refused(settled)
            for index in list(self._unsettled):
                del self._unsettled[index][:size]
                if not self._unsettled[index]:
                    del self._unsettled[index]

    def _count_refused(self, acked: Acked) -> None:
        """ack.lua settles only claims this beat still owns: say how many it refused."""
        if not acked.refused:
            return
        self.refused += acked.refused
        logger.warning(
            "periodiq: %d settlements refused: another beat took their claims over while "
            "this one could not renew them (stopped, or cut off from Redis); its messages "
            "of those ticks were sent before, and the worker's guard drops a second copy "
            "(%d refused since this beat started)",
            acked.refused,
            self.refused,
        )
