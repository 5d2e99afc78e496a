"""The admin's list, an entry's page, its actions and delete: the dashboard's reads
(:mod:`celery_periodiq.web.listing`, :mod:`celery_periodiq.present.shapes`, the runs
chart) in Django's pages, with Django's permissions and messages."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe

from celery_periodiq.contrib.django.celery_app import client
from celery_periodiq.contrib.django.models import PeriodicEntry
from celery_periodiq.errors import EntryNotFoundError, PeriodiqError
from celery_periodiq.present import shapes
from celery_periodiq.present.audit import audit_rows
from celery_periodiq.present.terminal import relative
from celery_periodiq.store.filters import ALERTS, STATES
from celery_periodiq.web.entry_pages import act, details, row, when
from celery_periodiq.web.listing import FILTERS, links, read_page, totals
from celery_periodiq.web.outage import OUTAGES
from celery_periodiq.web.plot import runs_svg

__all__ = ["action", "changelist", "delete", "entry", "page", "url"]


def url(model_admin: ModelAdmin, suffix: str, name: str | None = None) -> str:
    """The admin URL of one of the model's views (of entry ``name``)."""
    opts = model_admin.opts
    return str(
        reverse(
            f"admin:{opts.app_label}_{opts.model_name}_{suffix}",
            args=() if name is None else (quote(name),),
            current_app=model_admin.admin_site.name,
        )
    )


def page(
    model_admin: ModelAdmin,
    request: HttpRequest,
    template: str,
    title: str,
    status: int = 200,
    **values: Any,
) -> TemplateResponse:
    """One of the model's pages in the admin's frame (header, breadcrumbs, messages)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "title": title,
        "has_add_permission": model_admin.has_add_permission(request),
        "has_change_permission": model_admin.has_change_permission(request),
        "has_delete_permission": model_admin.has_delete_permission(request),
        "list_url": url(model_admin, "changelist"),
        **values,
    }
    return TemplateResponse(request, f"periodiq/{template}", context, status=status)


def record(model_admin: ModelAdmin, request: HttpRequest, name: str, done: str) -> None:
    """Write what ``request``'s user did to the entry in Django's admin log (the "Recent
    actions" of the admin's index): ``done`` is "added", "deleted", or a change."""
    entry = PeriodicEntry(name=name)
    if done == "added":
        model_admin.log_addition(request, entry, [{"added": {}}])
    elif done != "deleted":
        model_admin.log_change(request, entry, done)
    elif hasattr(model_admin, "log_deletions"):  # Django 5.1 and later
        model_admin.log_deletions(request, [entry])
    else:
        model_admin.log_deletion(request, entry, name)


def _problem(
    model_admin: ModelAdmin, request: HttpRequest, error: Exception, status: int
) -> TemplateResponse:
    return page(model_admin, request, "problem.html", "Periodic entries", status, problem=error)


def changelist(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The entries, a page at a time, searched and filtered as the dashboard's list is."""
    if not model_admin.has_view_or_change_permission(request):
        raise PermissionDenied
    try:
        api = client()
        found = read_page(api, request.GET, sort="next")
        now = api.now()
        counted = totals(api)
        windows = api.windows()
    except OUTAGES as error:
        return _problem(model_admin, request, error, 503)
    except PeriodiqError as error:
        return _problem(model_admin, request, error, 400)
    here = request.path
    rows = [
        {
            **row(item, now, windows),
            "url": url(model_admin, "change", item.name),
            "last": "never" if item.last_run is None else relative(item.last_run, now),
        }
        for item in found.entries
    ]
    moves = {
        key: None if link is None else here + link.removeprefix("/")
        for key, link in links(request.GET, found).items()
    }
    return page(
        model_admin,
        request,
        "change_list.html",
        "Periodic entries",
        rows=rows,
        found=found,
        links=moves,
        chosen={key: request.GET.get(key, "") for key in FILTERS},
        filtered=any(request.GET.get(key) for key in ("q", "state", "alert", "owner")),
        states=STATES,
        alerts=ALERTS,
        totals=[(label, count, here + href.removeprefix("/")) for label, count, href in counted],
        bulk_url=url(model_admin, "bulk"),
    )


def entry(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """One entry: its definition, policy, next fires, runs chart and history."""
    if not model_admin.has_view_or_change_permission(request):
        raise PermissionDenied
    name = unquote(object_id)
    try:
        api = client()
        stored, read = details(api, name)
        declared = api.declared_in(name)
        windows = api.windows()
    except EntryNotFoundError as error:
        raise Http404(str(error)) from error
    except OUTAGES as error:
        return _problem(model_admin, request, error, 503)
    shown = shapes.show_json(stored, read)
    history = [
        {**event, "at": when(event["at"]), "tick": when(event["tick"])}
        for event in shown["history"]
    ]
    item = row(stored, read.now, windows)
    return page(
        model_admin,
        request,
        "entry.html",
        name,
        item=item,
        shown=shown,
        declared=declared,
        last="never" if stored.last_run is None else relative(stored.last_run, read.now),
        arguments=(
            ""
            if stored.entry is None
            else f"{json.dumps(list(stored.entry.args))} {json.dumps(stored.entry.kwargs)}"
        ),
        counters=" · ".join(f"{reason} {count}" for reason, count in shown["counters"].items()),
        fires=[when(fire) for fire in shown["upcoming"]],
        history=history,
        audit=[{**r, "at": when(r["at"])} for r in audit_rows(api.audit(name, limit=50))],
        plot=mark_safe(runs_svg(read.events)),  # numbers only, no text from the entry
        urls={verb: url(model_admin, verb, name) for verb in ("pause", "resume", "run", "delete")}
        | {"edit": url(model_admin, "edit", name)},
    )


def action(
    model_admin: ModelAdmin, request: HttpRequest, object_id: str, verb: str
) -> HttpResponse:
    """Pause (with the form's ``note``), resume or run now: POST only, ``change``
    permission; back to the entry's page with what happened in a message."""
    if request.method != "POST":
        return HttpResponse("POST only", status=405, headers={"Allow": "POST"})
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    name = unquote(object_id)
    try:
        api = client(request)
        until = request.POST.get("until") or None
        sent = act(api, verb, name, request.POST.get("note") or None, until)
    except EntryNotFoundError as error:
        raise Http404(str(error)) from error
    except OUTAGES as error:
        return _problem(model_admin, request, error, 503)
    except PeriodiqError as error:
        model_admin.message_user(request, str(error), messages.ERROR)
    else:
        note = request.POST.get("note")
        done = {
            "pause": f"Paused{f': {note}' if note else ''}",
            "resume": "Resumed",
            "run": f"Ran now (task id {sent})",
        }[verb]
        record(model_admin, request, name, done)
        model_admin.message_user(request, f"The periodic entry “{name}”: {done}.", messages.SUCCESS)
    return HttpResponseRedirect(url(model_admin, "change", name))


def delete(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """Asks first (GET), deletes on POST (``delete`` permission), as Django's admin does."""
    if not model_admin.has_delete_permission(request):
        raise PermissionDenied
    name = unquote(object_id)
    try:
        api = client(request)
        declared = api.declared_in(name)
        if request.method == "POST":
            act(api, "delete", name, None)
    except EntryNotFoundError as error:
        raise Http404(str(error)) from error
    except OUTAGES as error:
        return _problem(model_admin, request, error, 503)
    if request.method == "POST":
        record(model_admin, request, name, "deleted")
        model_admin.message_user(request, f"Deleted {name}.", messages.SUCCESS)
        return HttpResponseRedirect(url(model_admin, "changelist"))
    return page(
        model_admin,
        request,
        "delete.html",
        f"Delete {name}?",
        name=name,
        declared=declared,
        entry_url=url(model_admin, "change", name),
    )
