"""Which Celery app the admin shows: ``settings.PERIODIQ_CELERY_APP``, else the one
Django's Celery setup made current; and its :class:`~celery_periodiq.api.Periodiq`."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.app import app_or_default
from celery.utils.imports import symbol_by_name
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from celery_periodiq.api import Periodiq, acting, periodiq

__all__ = ["celery_app", "client", "remember"]

SETTING = "PERIODIQ_CELERY_APP"
_FALLBACK = "default"  # the main name of the app Celery makes when none was made
_found: list[Celery] = []


def _named(name: object) -> Celery:
    if not isinstance(name, str) or not name.strip():
        raise ImproperlyConfigured(
            f"{SETTING}={name!r} is invalid (allowed: a dotted path to a Celery app, "
            f'such as "proj.celery:app")'
        )
    try:
        app = symbol_by_name(name.strip())
    except (ImportError, AttributeError, ValueError) as error:
        raise ImproperlyConfigured(
            f"{SETTING}={name!r} names nothing importable ({type(error).__name__}: {error})"
        ) from error
    if not isinstance(app, Celery):
        raise ImproperlyConfigured(
            f"{SETTING}={name!r} is a {type(app).__name__}, not a Celery app"
        )
    return app


def _current() -> Celery | None:
    app = app_or_default()
    if app.main == _FALLBACK and not getattr(app, "set_as_current", True):
        return None  # Celery's stand-in: nothing named an app
    return app if isinstance(app, Celery) else None


def remember() -> None:
    """Find the app when Django starts (``AppConfig.ready``): a named app is imported
    now, so a wrong name fails at start, and the current app is read on the thread that
    loaded the settings (Celery keeps it per thread; requests run on others).

    Raises:
        ImproperlyConfigured: ``PERIODIQ_CELERY_APP`` names nothing importable.
    """
    name = getattr(settings, SETTING, None)
    app = _named(name) if name is not None else _current()
    _found[:] = [] if app is None else [app]


def celery_app() -> Celery:
    """The Celery app whose schedule the admin shows.

    Raises:
        ImproperlyConfigured: no setting names an app and none was made current.
    """
    name = getattr(settings, SETTING, None)
    if name is not None:
        return _named(name)
    app = _found[0] if _found else _current()
    if app is None:
        raise ImproperlyConfigured(
            "celery_periodiq.contrib.django found no Celery app: make one in proj/celery.py "
            f"and import it in proj/__init__.py, or name it in settings.{SETTING} "
            '(such as "proj.celery:app")'
        )
    return app


def client(request: Any = None) -> Periodiq:
    """The runtime API of :func:`celery_app` (one client per app); given the admin's
    ``request``, its writes are recorded in the audit trail as the signed-in user's."""
    api = periodiq(celery_app())
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return api
    return acting(api, "admin", user.get_username())
