"""Per-entry checkpoints: a run that hits its timebox saves where it stopped, the next resumes."""

from __future__ import annotations

import json
from typing import Any

from celery_periodiq.errors import PeriodiqError
from celery_periodiq.store import Store

__all__ = ["Checkpoint"]


class Checkpoint:
    """A JSON value stored in Redis for one entry."""

    def __init__(self, store: Store, entry: str) -> None:
        self._store = store
        self._key = store.keys.checkpoint(entry)
        self.entry = entry

    def load(self, default: Any = None) -> Any:
        """The saved value, or ``default`` when nothing is saved."""
        raw = self._store.client.get(self._key)
        return default if raw is None else json.loads(str(raw))

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
