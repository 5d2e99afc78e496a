"""Moving a schedule over from another scheduler: celery-redbeat's entries (read from
its Redis by :mod:`~celery_periodiq.ops.import_redbeat`) and a django-celery-beat dump
(converted by :mod:`~celery_periodiq.ops.import_django`) are imported as runtime
entries (:func:`~celery_periodiq.ops.transfer.import_converted`).
"""

from __future__ import annotations

from typing import Any

from celery_periodiq.ops.import_redbeat import read_redbeat
from celery_periodiq.ops.transfer import ImportReport, import_converted
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.runtime import Runtime

__all__ = ["import_from_django", "import_from_redbeat"]


def import_from_redbeat(
    runtime: Runtime,
    *,
    url: str | None,
    key_prefix: str,
    replace: bool,
    dry_run: bool,
    skip_invalid: bool,
    audit: Audit | None = None,
) -> ImportReport:
    """Read RedBeat's entries and import what converts; the arguments and errors are
    those of :meth:`Periodiq.import_redbeat <celery_periodiq.api.Periodiq.import_redbeat>`."""
    read = read_redbeat(runtime.app, url=url, key_prefix=key_prefix)
    with runtime.guard():
        return import_converted(
            runtime.store,
            read.document,
            read.problems,
            notes=read.notes,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            audit=audit,
        )


def import_from_django(
    runtime: Runtime,
    dump: Any,
    *,
    replace: bool,
    dry_run: bool,
    skip_invalid: bool,
    naive_tz: str | None,
    audit: Audit | None = None,
) -> ImportReport:
    """Convert the dump and import what converts; the arguments, result and errors are
    those of :meth:`Periodiq.import_django_celery_beat
    <celery_periodiq.api.Periodiq.import_django_celery_beat>`."""
    from celery_periodiq.ops.import_django import django_document

    document, problems, notes = django_document(dump, runtime.app, naive_tz=naive_tz)
    with runtime.guard():
        return import_converted(
            runtime.store,
            document,
            problems,
            notes=notes,
            replace=replace,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            audit=audit,
        )
