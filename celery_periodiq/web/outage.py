"""What the dashboard answers when the schedule's Redis cannot be read: a 503 that says
what is down (the URL without its password) and when to try again, as a page that
retries itself or, under ``/api/``, as a JSON error; the server logs one line, never a
traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import redis
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from celery_periodiq.config import redacted
from celery_periodiq.errors import ConfigurationError, StoreRefusedError, StoreUnavailableError

__all__ = ["OUTAGES", "RETRY_S", "outage_handlers"]

logger = logging.getLogger("celery_periodiq.web")

RETRY_S = 5
"""How often a page shown during an outage reloads itself (and ``Retry-After``)."""

OUTAGES = (StoreUnavailableError, StoreRefusedError, ConfigurationError, redis.RedisError)
"""What a handler lets through to :func:`outage_handlers` rather than answer as bad input."""

Render = Callable[..., HTMLResponse]
"""``render(request, template, status, **values)`` of :func:`~celery_periodiq.web.app.make_app`."""
Handler = Callable[[Request, Exception], Awaitable[Response]]


def outage_handlers(redis_url: str, render: Render) -> dict[type[Exception], Handler]:
    """Starlette exception handlers for :data:`OUTAGES`, pages drawn with ``render``."""

    async def unavailable(request: Request, error: Exception) -> Response:
        if isinstance(error, StoreUnavailableError | StoreRefusedError):
            problem = str(error)  # says "Redis at <url without password> ..." already
        else:
            problem = f"Redis at {redacted(redis_url)} is unreachable: {error}"
        return _answer(request, 503, problem, render)

    async def misconfigured(request: Request, error: Exception) -> Response:
        return _answer(request, 500, str(error), render)

    return {
        StoreUnavailableError: unavailable,
        StoreRefusedError: unavailable,
        redis.RedisError: unavailable,
        ConfigurationError: misconfigured,
    }


def _answer(request: Request, status: int, problem: str, render: Render) -> Response:
    logger.warning(
        "periodiq: dashboard: %s %s answered %d: %s",
        request.method,
        request.url.path,
        status,
        problem.replace("\n", " "),
    )
    headers = {"Retry-After": str(RETRY_S)} if status == 503 else {}
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": problem}, status_code=status, headers=headers)
    # A page asked with GET reloads itself; after a form's POST the entries page is
    # loaded instead (the action is never sent again on its own).
    again = "" if request.method in ("GET", "HEAD") else "/"
    retry = RETRY_S if status == 503 else None
    page = render(request, "unavailable.html", status, problem=problem, retry=retry, again=again)
    page.headers.update(headers)
    return page
