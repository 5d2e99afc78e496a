"""The dashboard's bulk actions (:mod:`celery_periodiq.web.bulk`): ``POST /bulk``, the
entries page's form (sign-in and the form's CSRF token, as every write), which answers
with a page that says what changed and what was skipped; and ``POST /api/bulk/{action}``
with the bearer token and a JSON body (``names``, or ``scope: "matching"`` with the
list's filters; ``note`` and ``until`` for a pause).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from celery_periodiq.api import Periodiq, acting
from celery_periodiq.errors import EntryError, PeriodiqError, shown
from celery_periodiq.web import bulk
from celery_periodiq.web.auth import REFUSED, Guard
from celery_periodiq.web.outage import OUTAGES

__all__ = ["bulk_routes"]

Render = Callable[..., Response]


def bulk_routes(api: Periodiq, guard: Guard, render: Render) -> list[Route]:
    """The routes of the bulk actions."""

    async def submit(request: Request) -> Response:
        posted = await request.form()
        fields = {key: value for key, value in posted.items() if isinstance(value, str)}
        if not guard.may_post(request, fields.get("csrf")):
            return render(request, "problem.html", 403, problem=REFUSED)
        names = [value for value in posted.getlist("names") if isinstance(value, str)]
        try:
            writer = acting(api, "dashboard", guard.actor(request))
            report = await run_in_threadpool(
                bulk.carry_out, writer, fields.get("action", ""), names, fields
            )
        except OUTAGES:
            raise
        except PeriodiqError as error:
            return render(request, "problem.html", 400, problem=str(error))
        return render(request, "bulk.html", report=report, back="/" + bulk.selection_query(fields))

    async def api_submit(request: Request) -> Response:
        if not guard.bearer(request):
            return JSONResponse({"error": REFUSED}, status_code=403 if guard.writable else 405)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        names = body.get("names", [])
        fields = {key: value for key, value in body.items() if isinstance(value, str)}
        try:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise EntryError(f"names={shown(names)} is invalid (allowed: a list of names)")
            writer = acting(api, "dashboard", guard.actor(request))
            report = await run_in_threadpool(
                bulk.carry_out, writer, request.path_params["action"], names, fields
            )
        except OUTAGES:
            raise
        except PeriodiqError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse(_answer(report))

    return [
        Route("/bulk", submit, methods=["POST"]),
        Route("/api/bulk/{action}", api_submit, methods=["POST"]),
    ]


def _answer(report: bulk.Report) -> dict[str, Any]:
    result = report.result
    answer: dict[str, Any] = {
        "action": report.verb,
        "changed": list(result),
        "skipped": result.skipped,
    }
    if report.verb == "run":
        answer["task_ids"] = result.task_ids
    return answer
