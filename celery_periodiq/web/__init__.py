"""The web dashboard: ``celery periodiq serve`` (the ``web`` extra).

Server-rendered pages (entries, an entry, beats, the entry form), bulk actions on the
entries ticked or matching (``bulk``, ``bulk_routes``), the CLI's ``--json``
shapes under ``/api/``, and ``/metrics``. Reads are open to whoever can reach the port
(it binds 127.0.0.1 unless told otherwise); writes need the token (a browser's HttpOnly
cookie, or ``Authorization: Bearer <token>``), and forms carry a CSRF token. Without a
token the server is read-only and says so.
Open first: ``app`` (the routes), then ``entry_pages`` and ``listing``.
May import: ``present``, ``api`` and the layers below, never ``cli``
(tests/test_architecture.py); Starlette and Jinja2 are imported only here and in contrib.
"""

from celery_periodiq.web.app import make_app

__all__ = ["make_app"]
