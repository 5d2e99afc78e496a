"""Moving a schedule over from another scheduler: celery-redbeat's entries (read from
its Redis by :mod:`~celery_periodiq.ops.import_redbeat`) and a django-celery-beat dump
(converted by :mod:`~celery_periodiq.ops.import_django`) are imported as runtime
entries (:func:`~celery_periodiq.ops.transfer.import_converted`).
"""

from __future__ import annotations

from typing import Any

from celery_periodiq.ops.import_redbeat import read_redbeat
from celery_periodiq.ops.transfer import ImportReport, import_converted
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
) -> ImportReport:
    """``Periodiq.import_redbeat``: read RedBeat's entries and import what converts.

    Args:
        url: RedBeat's Redis; default the app's ``redbeat_redis_url``, else its broker.
        key_prefix: RedBeat's ``redbeat_key_prefix``.
        replace: also replace entries that exist with another definition.
        dry_run: say what would change; write nothing.
        skip_invalid: import what converts; the records that do not are listed in
            the report's ``skipped``. Options dropped and entries left out (declared
            in this app's ``beat_schedule``) are listed in its ``notes``.

    Raises:
        EntryError: records cannot be converted (each named by its Redis key, unless
            ``skip_invalid``), or an entry exists with another definition; nothing
            is written.
        ConfigurationError: no URL for RedBeat's Redis, or an invalid one.
        StoreUnavailableError: RedBeat's Redis (or ours) is unreachable.
    """
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
        )


def import_from_django(
    runtime: Runtime,
    dump: Any,
    *,
    replace: bool,
    dry_run: bool,
    skip_invalid: bool,
    naive_tz: str | None,
) -> ImportReport:
    """``Periodiq.import_django_celery_beat``: convert the dump and import what converts.

    Args:
        dump: the parsed JSON of the dump.
        replace: also replace entries that exist with another definition.
        dry_run: check and convert everything, write nothing.
        skip_invalid: import the tasks that convert, and list the others in the
            report's ``skipped`` instead of refusing the whole dump.
        naive_tz: the zone of naive datetimes (a dump made with ``USE_TZ=False``:
            Django's ``TIME_ZONE``); default the app's ``timezone``.

    Returns:
        What was (with ``dry_run``: would be) created, replaced, left unchanged or
        skipped, and ``notes`` on what the converted tasks lost or how they were read.

    Raises:
        EntryError: the dump is not a list, or any record cannot be converted and
            ``skip_invalid`` is not set (each is named, nothing is written), or an
            entry exists with another definition and ``replace`` is not set.
    """
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
        )
