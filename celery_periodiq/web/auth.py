"""Who may write: the token, the login cookie derived from it, and CSRF tokens; and who
writes, as the audit trail records it: the name given at sign-in (a cookie signed with the
token), or ``X-Periodiq-Actor`` with the bearer token."""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request

__all__ = ["ACTOR_COOKIE", "ACTOR_HEADER", "COOKIE", "REFUSED", "Guard"]

COOKIE = "periodiq_session"
ACTOR_COOKIE = "periodiq_actor"
"""The name given at sign-in, and its signature: who the audit trail says wrote."""
ACTOR_HEADER = "x-periodiq-actor"
"""Who writes with the bearer token (the audit trail's actor)."""
_ACTOR_MOST = 200
REFUSED = "changes need the token: log in, or send Authorization: Bearer <token>"
"""Why a write was refused."""


class Guard:
    """Decides from a request whether it may write, and what its forms must carry."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None

    @property
    def writable(self) -> bool:
        """False without a token: the dashboard is read-only."""
        return self.token is not None

    def _derived(self, purpose: str) -> str:
        assert self.token is not None
        return hmac.new(self.token.encode(), purpose.encode(), hashlib.sha256).hexdigest()

    def session(self) -> str:
        """The login cookie's value: derived from the token, never the token itself."""
        return self._derived("session")

    def csrf(self) -> str:
        """What a form must send back as ``csrf`` (tied to the token, not guessable)."""
        return self._derived("csrf") if self.writable else ""

    def accepts_token(self, given: str) -> bool:
        return self.writable and hmac.compare_digest(given.encode(), str(self.token).encode())

    def logged_in(self, request: Request) -> bool:
        cookie = request.cookies.get(COOKIE, "")
        return self.writable and hmac.compare_digest(cookie.encode(), self.session().encode())

    def bearer(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.accepts_token(given.strip())

    def signed_actor(self, name: str) -> str:
        """The actor cookie's value for ``name``: the name and its signature."""
        return f"{self._derived('actor:' + name)}.{name}"

    def actor(self, request: Request) -> str:
        """Who writes with this request: the name its sign-in gave (or the bearer's
        ``X-Periodiq-Actor``), else who signed in from where."""
        host = request.client.host if request.client else "unknown host"
        if self.bearer(request):
            given = request.headers.get(ACTOR_HEADER, "").strip()[:_ACTOR_MOST]
            return given or f"token holder at {host}"
        signature, _, name = request.cookies.get(ACTOR_COOKIE, "").partition(".")
        if name and self.writable:
            expected = self._derived("actor:" + name)
            if hmac.compare_digest(signature.encode(), expected.encode()):
                return name
        return f"signed in at {host}"

    def may_post(self, request: Request, form_csrf: str | None) -> bool:
        """A write is allowed with the bearer token, or with the login cookie and the
        form's CSRF token."""
        if self.bearer(request):
            return True
        return (
            self.logged_in(request)
            and form_csrf is not None
            and hmac.compare_digest(form_csrf.encode(), self.csrf().encode())
        )
