"""The schedule in Django's admin: add ``"celery_periodiq.contrib.django"`` to
``INSTALLED_APPS`` and the admin gains "Periodic entries".

The list (search, filters, paging), an entry's page (definition, history, next fires,
the runs chart), the create and edit form the dashboard uses, pause with a note,
resume, run now and delete, one entry or many at once (``bulk``), behind Django's
login, staff flag, CSRF and the four permissions of one model (view, add, change,
delete). The model is unmanaged: the schedule stays in Redis and no table holds
entries.

The Celery app is the one ``PERIODIQ_CELERY_APP`` names (``"proj.celery:app"``), else
the one Django's Celery setup made current (``proj/celery.py`` with
``config_from_object("django.conf:settings", namespace="CELERY")``).
"""
