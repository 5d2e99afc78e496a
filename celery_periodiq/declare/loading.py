"""A bad ``@periodic`` met while Celery's command line loads the app (``celery -A proj``).

Celery turns any error raised while importing the app into its usage text and two
tracebacks (80-odd lines) with the one useful line last. Inside that import the error
is said in one CRITICAL line, first, and the command exits 1; everywhere else (Python,
tests, a shell) ``@periodic`` raises its :class:`~celery_periodiq.errors.EntryError`.
"""

from __future__ import annotations

import logging
import sys
from types import FrameType

from celery_periodiq.errors import PeriodiqError

__all__ = ["stop_loading"]

logger = logging.getLogger("celery_periodiq.decorators")

_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
"""Celery's default log format, as the beat's own CRITICAL lines have it."""


def stop_loading(error: PeriodiqError) -> None:
    """Say ``error`` in one CRITICAL line and exit 1, if Celery's command line is loading
    the app; else return (the caller raises it)."""
    loading = _app_celery_loads(sys._getframe())
    if loading is None:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    message = "periodiq: %s; celery cannot load the app %r"
    handler.handle(
        logger.makeRecord(
            logger.name, logging.CRITICAL, __file__, 0, message, (error, loading), None
        )
    )
    raise SystemExit(1) from None


def _app_celery_loads(frame: FrameType | None) -> str | None:
    """The ``-A`` value Celery's ``find_app`` is importing, if ``frame`` runs inside it."""
    while frame is not None:
        if frame.f_code.co_name == "find_app" and (
            frame.f_globals.get("__name__") == "celery.app.utils"
        ):
            return str(frame.f_locals.get("app"))
        frame = frame.f_back
    return None
