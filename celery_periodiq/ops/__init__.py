"""Operations on a :class:`~celery_periodiq.runtime.Runtime` or a ``Store``: the work behind
the API's methods.

Owns steering one entry (``steer``), bulk adds (``bulk``), pausing, resuming, deleting
and running many entries at once (``pauses``, ``many``), listings (``listing``),
backfill, simulate (``simulation``), doctor (``doctor``, ``checks``, ``doctor_entries``),
metrics, reading the audit trail (``audit``), export and import (``transfer``,
``export_file``) and the importers from
celery-redbeat and django-celery-beat (``migrate``, ``import_redbeat``, ``import_django``).
Open first: ``steer``.
May import: ``beat`` (its publisher, for a manual run and backfill; its staged count) and
every layer below; never ``api``: an operation takes a Runtime, never a ``Periodiq``.
"""
