"""A bad ``@periodic`` met while Celery's command line imports the app's code
(``celery -A proj beat``, ``worker``, ``periodiq ...``; the app module, or the modules
of its ``include`` and ``autodiscover_tasks``).

Celery turns an error raised there into its usage text and two tracebacks, or one
traceback after the banner (80-odd lines), with the one useful line last. Under
Celery's command line the error is said in one CRITICAL line, first, with where the
declaration is, and the command exits 1; everywhere else (Python, tests, a shell)
``@periodic`` raises its :class:`~celery_periodiq.errors.EntryError`.
"""

from __future__ import annotations

import logging
import os
import sys
from types import FrameType

from celery_periodiq.errors import PeriodiqError

__all__ = ["stop_loading"]

logger = logging.getLogger("celery_periodiq.decorators")

_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
"""Celery's default log format, as the beat's own CRITICAL lines have it."""


def stop_loading(error: PeriodiqError, declared_at: FrameType | None) -> None:
    """Say ``error`` in one CRITICAL line and exit 1, if Celery's command line is importing
    the module that declares it; else return (the caller raises it). ``declared_at``: the
    frame that applied the wrong ``@periodic``."""
    if declared_at is None or declared_at.f_code.co_name != "<module>":
        return  # not an import: a @periodic applied at run time raises to its caller
    if not _under_celery_command(declared_at):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    message = "periodiq: %s: %s; celery cannot start"
    arguments = (_where(declared_at), error)
    handler.handle(
        logger.makeRecord(logger.name, logging.CRITICAL, __file__, 0, message, arguments, None)
    )
    raise SystemExit(1) from None


def _under_celery_command(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside Celery's command line (``celery``, ``python -m celery``)."""
    while frame is not None:
        if frame.f_globals.get("__name__") == "celery.bin.celery":
            return True
        frame = frame.f_back
    return False


def _where(frame: FrameType) -> str:
    """``proj/tasks.py:12``: the declaration's file (from the working directory) and line."""
    path = frame.f_code.co_filename
    try:
        shown = os.path.relpath(path)
    except ValueError:  # another drive, on Windows
        shown = path
    return f"{path if shown.startswith('..') else shown}:{frame.f_lineno}"
