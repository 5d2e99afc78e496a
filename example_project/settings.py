"""Where the example project runs and how fast, read from the environment once.

``REDIS_URL`` is both the Celery broker and celery_periodiq's store (default
``redis://localhost:6379/0``). ``PERIODIQ_DEMO=1`` is the demo switch: every
schedule runs in seconds instead of minutes, hours or months, so ``make demo``
shows a month of activity in one minute. Nothing else changes.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["DEMO", "KEY_PREFIX", "REDIS_URL", "when"]

T = TypeVar("T")

DEMO: bool = os.environ.get("PERIODIQ_DEMO", "").strip() not in ("", "0")
"""True under ``PERIODIQ_DEMO=1``: fast schedules."""

REDIS_URL: str = os.environ.get("REDIS_URL") or "redis://localhost:6379/0"
"""The broker and the schedule store."""

KEY_PREFIX: str = "periodiq-demo" if DEMO else "periodiq"
"""Demo runs keep their keys apart from a real deployment sharing the same Redis."""


def when(real: T, *, demo: T) -> T:
    """``real`` normally, ``demo`` under ``PERIODIQ_DEMO=1``.

    Every declaration shows both, so the production schedule stays the one
    you read first.
    """
    return demo if DEMO else real
