"""The dashboard's entry form: create (``/entries/new``) and edit
(``/entries/{name}/edit``) an entry, and the schedule preview it asks while typing
(``/api/preview``, which also says when the task typed is none of the app's).

Writes need sign-in and the form's CSRF token, as the other actions; every Redis call
runs in the thread pool (plain handlers, or ``run_in_threadpool`` after awaiting a form).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from celery_periodiq.api import Periodiq, acting
from celery_periodiq.errors import EntryNotFoundError
from celery_periodiq.present.entry_form import (
    EntryForm,
    preview,
    save,
    task_choices,
    unknown_task,
)
from celery_periodiq.web.auth import REFUSED, Guard

__all__ = ["editing_routes"]

Render = Callable[..., Response]
PREVIEW_URL = "/api/preview"
_READ_ONLY = "Read-only: this dashboard was started without a token, so nothing can be changed."


def editing_routes(api: Periodiq, guard: Guard, render: Render) -> list[Route]:
    """The routes of the entry form (before ``/entries/{name}``, which would take them)."""

    def page(request: Request, form: EntryForm, status: int = 200) -> Response:
        tasks = task_choices(api.app)
        return render(
            request,
            "entry_form.html",
            status,
            form=form,
            tasks=tasks,
            preview_url=PREVIEW_URL,
            unknown_task=unknown_task(tasks, form.values["task"]),
        )

    def refused(request: Request) -> Response | None:
        """Why this request may not use the form (None: it may)."""
        if not guard.writable:
            return render(request, "problem.html", 403, problem=_READ_ONLY)
        if not guard.logged_in(request):
            return RedirectResponse("/login", status_code=303)
        return None

    def new_page(request: Request) -> Response:
        return refused(request) or page(request, EntryForm.blank(api.settings.default_tz))

    def edit_page(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        try:
            stored = api.get(request.path_params["name"])
        except EntryNotFoundError as error:
            return render(request, "problem.html", 404, problem=str(error))
        return page(request, EntryForm.of(stored))

    async def submit(request: Request) -> Response:
        editing: str | None = request.path_params.get("name")
        posted = await request.form()
        data = {key: value for key, value in posted.items() if isinstance(value, str)}
        if not guard.may_post(request, data.get("csrf")):
            return render(request, "problem.html", 403, problem=REFUSED)
        form = EntryForm.posted(data, editing)
        writer = acting(api, "dashboard", guard.actor(request))
        saved = await run_in_threadpool(_save, writer, form)
        if saved is None:
            return page(request, form, 400)
        return RedirectResponse(f"/entries/{quote(saved, safe='')}", status_code=303)

    def api_preview(request: Request) -> Response:
        params = request.query_params
        answer = preview(
            params.get("schedule", ""),
            params.get("tz", "") or api.settings.default_tz,
            api.now(),
            name=params.get("name") or None,
        )
        answer["unknown_task"] = unknown_task(task_choices(api.app), params.get("task", ""))
        return JSONResponse(answer, status_code=400 if answer["error"] else 200)

    return [
        Route("/entries/new", new_page),
        Route("/entries/new", submit, methods=["POST"]),
        Route("/entries/{name:path}/edit", edit_page),
        Route("/entries/{name:path}/edit", submit, methods=["POST"]),
        Route(PREVIEW_URL, api_preview),
    ]


def _save(api: Periodiq, form: EntryForm) -> str | None:
    """Save the form; the entry's name, or None when the form says why not."""
    stored = save(api, form)
    return None if stored is None else stored.name
