"""Per-entry checkpoints: a run that hits its timebox saves where it stopped, the next resumes."""

from __future__ import annotations

import json
import logging
from typing import Any

import redis

from celery_periodiq.errors import PeriodiqError
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import wrong_type

__all__ = ["Checkpoint"]

logger = logging.getLogger("celery_periodiq.checkpoint")


class Checkpoint:
    """A JSON value stored in Redis for one entry."""

    def __init__(self, store: Store, entry: str) -> None:
        self._store = store
        self._key = store.keys.of(entry).checkpoint(entry)
        self.entry = entry

    def load(self, default: Any = None) -> Any:
        """The saved value, or ``default`` when nothing is saved.

        A saved value that is not JSON, or a key of another Redis type (written by
        something else), also gives ``default``, with a warning in the log: the run
        starts afresh, and its next :meth:`save` replaces the bad value.
        """
        try:
            raw = self._store.client.get(self._key)
        except redis.ResponseError as error:
            raw = error
        return self._decoded(raw, default)

    @classmethod
    def load_many(cls, store: Store, entries: list[str]) -> dict[str, Any]:
        """:meth:`load` of several entries in one round trip: each entry's saved value,
        or None."""
        checkpoints = [cls(store, entry) for entry in entries]
        pipe = store.client.pipeline(transaction=False)
        for checkpoint in checkpoints:
            pipe.get(checkpoint._key)
        replies = pipe.execute(raise_on_error=False) if checkpoints else []
        return {
            checkpoint.entry: checkpoint._decoded(raw, None)
            for checkpoint, raw in zip(checkpoints, replies, strict=True)
        }

    def _decoded(self, raw: Any, default: Any) -> Any:
        if isinstance(raw, redis.ResponseError):
            if not wrong_type(raw):
                raise raw
            logger.warning(
                "periodiq: checkpoint of entry %r is unusable (%s holds another Redis type); "
                "starting without it",
                self.entry,
                self._key,
            )
            return default
        if raw is None:
            return default
        try:
            return json.loads(str(raw))
        except ValueError as error:
            logger.warning(
                "periodiq: checkpoint of entry %r is not JSON (%s); starting without it",
                self.entry,
                error,
            )
            return default

    def save(self, value: Any) -> None:
        """Store ``value`` (anything JSON can hold) for the next run.

        Raises:
            PeriodiqError: ``value`` is not JSON-serialisable.
        """
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise PeriodiqError(f"checkpoint of {self.entry!r}: {error}") from None
        self._store.client.set(self._key, text)

    def clear(self) -> None:
        """Forget the saved value."""
        self._store.client.delete(self._key)

    def exists(self) -> bool:
        """Whether a value is saved."""
        return bool(self._store.client.exists(self._key))
