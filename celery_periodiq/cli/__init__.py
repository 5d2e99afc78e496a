"""``celery -A proj periodiq ...``: see and steer the schedule from a shell.

Registered through the ``celery.commands`` entry point, so Celery loads the app (``-A``)
and hands it over in ``ctx.obj.app``. Each command is a thin layer over
:func:`celery_periodiq.periodiq`; its text and ``--json`` shapes come from
:mod:`celery_periodiq.present`. Open first: ``group`` (the group, "now", the terminal),
then a topic: ``inspect`` (list, show, history, failures, next), ``entries`` (add,
update, delete, pause, resume, run), ``ops`` (backfill, beats, doctor, metrics, serve),
``transfer`` (export, import), ``simulate``, ``windows`` (window add, list, remove),
``audit``; exit codes and option types in ``options``.
May import: every layer (it is the top); click is imported nowhere else in the package.
"""

# Importing the topic modules registers their commands on the group.
from celery_periodiq.cli import (  # noqa: F401
    audit,
    entries,
    inspect,
    ops,
    simulate,
    transfer,
    windows,
)
from celery_periodiq.cli.group import periodiq

__all__ = ["periodiq"]
