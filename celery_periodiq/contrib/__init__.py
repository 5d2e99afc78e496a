"""Integrations with other frameworks: :mod:`celery_periodiq.contrib.django`."""
