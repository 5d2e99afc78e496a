"""A Django project as Celery's docs set one up: ``proj/celery.py`` makes the app and
this module imports it, so it is Celery's current app when Django starts."""

import os

if not os.environ.get("TEST_NO_CELERY_APP"):
    from proj.celery import app as celery_app

    __all__ = ["celery_app"]
