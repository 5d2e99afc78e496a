"""The Django app: its label, and the Celery app found when Django starts."""

from __future__ import annotations

from django.apps import AppConfig


class PeriodiqConfig(AppConfig):  # type: ignore[misc]
    """``celery_periodiq.contrib.django`` in ``INSTALLED_APPS``."""

    name = "celery_periodiq.contrib.django"
    label = "periodiq"
    verbose_name = "Periodiq"

    def ready(self) -> None:
        from celery_periodiq.contrib.django.celery_app import remember

        remember()  # on the thread that loaded the settings: Celery's current app is per thread
