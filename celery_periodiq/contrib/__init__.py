"""Integrations with other frameworks: :mod:`celery_periodiq.contrib.django`, the schedule
in Django's admin.

Owns no decision of its own: it shows and steers the schedule through the API, the
dashboard's pages (``web``) and the shared entry form (``present``).
Open first: ``django/__init__`` (how to install it), then ``django/admin`` (its URLs).
May import: ``web``, ``present``, ``api`` and the layers below, never ``cli``
(tests/test_architecture.py); Django is imported nowhere else in the package.
"""
