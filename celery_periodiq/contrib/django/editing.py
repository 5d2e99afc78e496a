"""The admin's create and edit pages and the schedule preview: the dashboard's entry form
(:mod:`celery_periodiq.present.entry_form`, its fields drawn by the same Jinja2
fragment) inside Django's page, ``<form>`` and CSRF token."""

from __future__ import annotations

import jinja2
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.safestring import mark_safe

from celery_periodiq.contrib.django.celery_app import client
from celery_periodiq.contrib.django.pages import page, record, url
from celery_periodiq.errors import EntryNotFoundError
from celery_periodiq.present.entry_form import (
    EntryForm,
    preview,
    save,
    task_choices,
    unknown_task,
)
from celery_periodiq.web.outage import OUTAGES

__all__ = ["edit", "preview_view"]

_FRAGMENTS = jinja2.Environment(
    loader=jinja2.PackageLoader("celery_periodiq.web", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def edit(model_admin: ModelAdmin, request: HttpRequest, object_id: str | None) -> HttpResponse:
    """Create (``object_id`` None: ``add`` permission) or edit (``change``) an entry:
    GET shows the form, POST saves it, or shows it again with each error beside its
    field and nothing written."""
    allowed = (
        model_admin.has_add_permission(request)
        if object_id is None
        else model_admin.has_change_permission(request)
    )
    if not allowed:
        raise PermissionDenied
    editing = None if object_id is None else unquote(object_id)
    try:
        api = client(request)
        if request.method == "POST":
            form = EntryForm.posted(request.POST.dict(), editing)
            stored = save(api, form)
            if stored is not None:
                saved = stored.name
                record(model_admin, request, saved, "added" if editing is None else "Edited")
                done = "Added" if editing is None else "Changed"
                model_admin.message_user(request, f"{done} {saved}.", messages.SUCCESS)
                return HttpResponseRedirect(url(model_admin, "change", saved))
        else:
            form = (
                EntryForm.blank(api.settings.default_tz)
                if editing is None
                else EntryForm.of(api.get(editing))
            )
        tasks = task_choices(api.app)
    except EntryNotFoundError as error:
        raise Http404(str(error)) from error
    except OUTAGES as error:
        return page(model_admin, request, "problem.html", "Periodic entries", 503, problem=error)
    fields = _FRAGMENTS.get_template("entry_form_fields.html").render(
        form=form,
        tasks=tasks,
        preview_url=url(model_admin, "preview"),
        unknown_task=unknown_task(tasks, form.values["task"]),
    )
    return page(
        model_admin,
        request,
        "entry_form.html",
        "Add periodic entry" if editing is None else f"Change {editing}",
        400 if form.errors else 200,
        name=editing,
        entry_url=None if editing is None else url(model_admin, "change", editing),
        fields=mark_safe(fields),  # the fragment escapes what it shows (autoescape)
        marked=any(form.errors),  # errors beside fields ("": the form's own, shown atop)
    )


def preview_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """``?schedule=&tz=&name=&task=``: the schedule in words and its next 5 fires, and
    whether the task is none of the app's, as JSON (for whoever may add or change entries)."""
    if not (model_admin.has_add_permission(request) or model_admin.has_change_permission(request)):
        raise PermissionDenied
    params = request.GET
    try:
        api = client()
        now = api.now()
    except OUTAGES as error:
        return JsonResponse({"error": str(error)}, status=503)
    answer = preview(
        params.get("schedule", ""),
        params.get("tz", "") or api.settings.default_tz,
        now,
        name=params.get("name") or None,
    )
    answer["unknown_task"] = unknown_task(task_choices(api.app), params.get("task", ""))
    return JsonResponse(answer, status=400 if answer["error"] else 200)
