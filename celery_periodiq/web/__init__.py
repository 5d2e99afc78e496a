"""The web dashboard: ``celery periodiq serve`` (the ``web`` extra).

Server-rendered pages (entries, an entry, beats), the CLI's ``--json`` shapes under
``/api/``, and ``/metrics``. Reads are open to whoever can reach the port (it binds
127.0.0.1 unless told otherwise); writes (pause, resume, run now, delete) need the
token: a browser logs in once and gets an HttpOnly cookie, API clients send
``Authorization: Bearer <token>``. Forms carry a CSRF token. Without a configured
token the server is read-only and says so.
"""

from celery_periodiq.web.app import make_app

__all__ = ["make_app"]
