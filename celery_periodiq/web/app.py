"""The dashboard's routes: pages, ``/api/``, ``/metrics``, login and the write actions.

Every Redis call is blocking, so no handler makes one on the event loop: the handlers
that read are plain functions (Starlette runs them in its thread pool), and those that
must await a form hand their write to the pool; a slow request never delays another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from celery_periodiq.api import Periodiq, acting
from celery_periodiq.errors import EntryNotFoundError, PeriodiqError
from celery_periodiq.present import shapes
from celery_periodiq.present.audit import audit_json, audit_rows
from celery_periodiq.present.entry_form import task_choices, unknown_task
from celery_periodiq.present.terminal import relative
from celery_periodiq.store.filters import ALERTS, STATES
from celery_periodiq.web import entry_pages
from celery_periodiq.web.auth import ACTOR_COOKIE, COOKIE, REFUSED, Guard
from celery_periodiq.web.bulk_routes import bulk_routes
from celery_periodiq.web.editing import editing_routes
from celery_periodiq.web.listing import FILTERS, links, page_json, read_page, totals
from celery_periodiq.web.outage import OUTAGES, RETRY_S, outage_handlers
from celery_periodiq.web.plot import runs_svg

__all__ = ["make_app"]

_TEMPLATES = Path(__file__).with_name("templates")
ACTIONS = ("pause", "resume", "run", "delete")


def make_app(api: Periodiq, token: str | None = None, max_entries: int = 500) -> Starlette:
    """The dashboard of ``api``'s schedule; writes need ``token`` (None: read-only)."""
    guard = Guard(token)
    pages = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    pages.filters["path"] = lambda name: quote(str(name), safe="")
    pages.filters["when"] = entry_pages.when
    pages.filters["ago"] = lambda when: "never" if when is None else relative(when, api.now())

    def render(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        values.update(
            writable=guard.writable,
            logged_in=guard.logged_in(request),
            csrf=guard.csrf(),
            schedule=api.settings.key_prefix,
        )
        return HTMLResponse(pages.get_template(template).render(**values), status_code=status)

    def entries_page(request: Request) -> Response:
        params = request.query_params
        try:
            found = read_page(api, params, sort="next")
        except OUTAGES:
            raise
        except PeriodiqError as error:
            return render(request, "problem.html", 400, problem=str(error))
        now, windows = api.now(), api.windows()
        return render(
            request,
            "entries.html",
            rows=[entry_pages.row(item, now, windows) for item in found.entries],
            page=found,
            links=links(params, found),
            chosen={key: params.get(key, "") for key in FILTERS},
            states=STATES,
            alerts=ALERTS,
            totals=totals(api),
        )

    def entry_page(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            stored, details = entry_pages.details(api, name)
        except EntryNotFoundError as error:
            return render(request, "problem.html", 404, problem=str(error))
        item = entry_pages.row(stored, details.now, api.windows())
        return render(
            request,
            "entry.html",
            item=item,
            shown=shapes.show_json(stored, details),
            plot=Markup(runs_svg(details.events)),
            unknown_task=unknown_task(task_choices(api.app), item["task"] or ""),
            audit=audit_rows(api.audit(name, limit=50)),
        )

    def beats_page(request: Request) -> Response:
        now = api.now()
        beats = [shapes.beat_json(beat, now) for beat in api.beats()]
        return render(request, "beats.html", beats=beats)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render(request, "login.html")
        form = await request.form()
        if not guard.accepts_token(str(form.get("token", ""))):
            return render(request, "login.html", 403, problem="That is not the token.")
        response = RedirectResponse("/", status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(
            COOKIE, guard.session(), httponly=True, samesite="strict", secure=secure
        )
        name = str(form.get("actor", "")).strip()[:200]
        if name:  # who the audit trail says writes
            signed = guard.signed_actor(name)
            response.set_cookie(
                ACTOR_COOKIE, signed, httponly=True, samesite="strict", secure=secure
            )
        return response

    async def logout(request: Request) -> Response:
        form = await request.form()
        if not guard.may_post(request, _text(form.get("csrf"))):
            return render(request, "problem.html", 403, problem=REFUSED)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        response.delete_cookie(ACTOR_COOKIE)
        return response

    async def action(request: Request) -> Response:
        verb, name = request.path_params["action"], request.path_params["name"]
        form = await request.form()
        if verb not in ACTIONS:
            return render(request, "problem.html", 404, problem=f"no action {verb!r}")
        if not guard.may_post(request, _text(form.get("csrf"))):
            return render(request, "problem.html", 403, problem=REFUSED)
        try:
            note, until = _text(form.get("note")) or None, _text(form.get("until")) or None
            writer = acting(api, "dashboard", guard.actor(request))
            await run_in_threadpool(entry_pages.act, writer, verb, name, note, until)
        except OUTAGES:
            raise
        except PeriodiqError as error:
            return render(request, "problem.html", 400, problem=str(error))
        return RedirectResponse(
            "/" if verb == "delete" else f"/entries/{quote(name, safe='')}", status_code=303
        )

    def api_entries(request: Request) -> Response:
        try:
            found = read_page(api, request.query_params)
        except OUTAGES:
            raise
        except PeriodiqError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse(page_json(found))

    def api_entry(request: Request) -> Response:
        try:
            stored, details = entry_pages.details(api, request.path_params["name"])
        except EntryNotFoundError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        return JSONResponse(shapes.show_json(stored, details))

    def api_audit(request: Request) -> Response:
        params = request.query_params
        try:
            found = api.audit(
                request.path_params.get("name"),
                since=params.get("since") or None,
                actor=params.get("actor") or None,
                limit=int(params.get("limit", "100")),
            )
        except OUTAGES:
            raise
        except (PeriodiqError, ValueError) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse([audit_json(record) for record in found])

    def api_history(request: Request) -> Response:
        name = request.path_params["name"]
        failures = request.query_params.get("failures") in ("1", "true")
        try:
            limit = int(request.query_params.get("limit", "20"))
            events = api.history(name, limit=limit, failures_only=failures)
        except EntryNotFoundError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        except OUTAGES:
            raise
        except (PeriodiqError, ValueError) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse([shapes.event_json(event) for event in events])

    def api_failures(request: Request) -> Response:
        try:
            found = api.failures(limit=int(request.query_params.get("limit", "20")))
        except OUTAGES:
            raise
        except (PeriodiqError, ValueError) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse([shapes.event_json(event, entry) for entry, event in found])

    def api_beats(request: Request) -> Response:
        now = api.now()
        return JSONResponse([shapes.beat_json(beat, now) for beat in api.beats()])

    def api_doctor(request: Request) -> Response:
        report = shapes.doctor_json(api.diagnose())
        failed = [
            c["detail"] for c in report["checks"] if c["name"] == "redis" and c["status"] == "fail"
        ]
        if failed:  # the schedule cannot be read: what any other route would answer
            return JSONResponse(
                {"error": failed[0], **report},
                status_code=503,
                headers={"Retry-After": str(RETRY_S)},
            )
        return JSONResponse(report)

    async def api_action(request: Request) -> Response:
        verb, name = request.path_params["action"], request.path_params["name"]
        if verb not in ACTIONS:
            return JSONResponse({"error": f"no action {verb!r}"}, status_code=404)
        if not guard.bearer(request):
            return JSONResponse({"error": REFUSED}, status_code=403 if guard.writable else 405)
        try:
            body = await request.json() if await request.body() else {}
            note, until = (
                body.get(key) if isinstance(body, dict) else None for key in ("note", "until")
            )
            done = await run_in_threadpool(
                entry_pages.act,
                acting(api, "dashboard", guard.actor(request)),
                verb,
                name,
                note if isinstance(note, str) else None,
                until if isinstance(until, str) else None,
            )
        except EntryNotFoundError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        except OUTAGES:
            raise
        except (PeriodiqError, ValueError) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse({"ok": True, "action": verb, "entry": name, "task_id": done})

    def metrics(request: Request) -> Response:
        try:
            from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

            from celery_periodiq.ops.metrics import PeriodiqCollector
        except ImportError:
            return Response("metrics need prometheus-client\n", status_code=501)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(PeriodiqCollector(api, max_entries))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            *editing_routes(api, guard, render),
            *bulk_routes(api, guard, render),
            Route("/", entries_page),
            Route("/entries/{name:path}", entry_page),
            Route("/beats", beats_page),
            Route("/login", login, methods=["GET", "POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/actions/{action}/{name:path}", action, methods=["POST"]),
            Route("/api/entries", api_entries),
            Route("/api/entries/{name:path}", api_entry),
            Route("/api/history/{name:path}", api_history),
            Route("/api/audit", api_audit),
            Route("/api/audit/{name:path}", api_audit),
            Route("/api/failures", api_failures),
            Route("/api/beats", api_beats),
            Route("/api/doctor", api_doctor),
            Route("/api/actions/{action}/{name:path}", api_action, methods=["POST"]),
            Route("/metrics", metrics),
        ],
        exception_handlers=outage_handlers(api.settings.redis_url, render),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
