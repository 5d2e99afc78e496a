"""``celery -A proj periodiq ...``: see and steer the schedule from a shell.

Registered through the ``celery.commands`` entry point, so Celery loads the
app (``-A``) and hands it over in ``ctx.obj.app``, as it does for its own
commands. Each command is a thin layer over :func:`celery_periodiq.periodiq`.

The ``periodiq`` group is in :mod:`~celery_periodiq.cli.group`; its commands, by topic:
:mod:`~celery_periodiq.cli.inspect` (list, show, history, failures, next),
:mod:`~celery_periodiq.cli.entries` (add, update, delete, pause, resume, run),
:mod:`~celery_periodiq.cli.ops` (backfill, beats, doctor, metrics, serve),
:mod:`~celery_periodiq.cli.transfer` (export, import) and
:mod:`~celery_periodiq.cli.simulate`. Exit codes and option types live in
:mod:`~celery_periodiq.cli.options`, the options of add/update in
:mod:`~celery_periodiq.cli.entry_options`. The text is rendered by
:mod:`celery_periodiq.present` (colour and tables in its ``terminal``), the ``--json``
shapes (documented there) by :mod:`celery_periodiq.present.shapes`.
"""

# Importing the topic modules registers their commands on the group.
from celery_periodiq.cli import entries, inspect, ops, simulate, transfer  # noqa: F401
from celery_periodiq.cli.group import periodiq

__all__ = ["periodiq"]
