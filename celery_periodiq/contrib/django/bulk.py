"""The admin list's bulk actions: pause (with a note and an end), resume and run now the
entries ticked, or all matching the list's search and filters (``change`` permission),
or delete them (``delete`` permission, after a page that asks first, as Django's
"Delete selected" does). What happened is told in the admin's messages, each entry
changed is written to Django's admin log, and the list comes back with its filters.
The selection and the writes are the dashboard's (:mod:`celery_periodiq.web.bulk`).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from celery_periodiq.contrib.django.celery_app import client
from celery_periodiq.contrib.django.models import PeriodicEntry
from celery_periodiq.contrib.django.pages import page, record, url
from celery_periodiq.errors import PeriodiqError
from celery_periodiq.web import bulk
from celery_periodiq.web.outage import OUTAGES

__all__ = ["bulk_action"]

_CONFIRM_SHOWN = 100  # names listed on the page that asks before a delete


def bulk_action(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """POST only: the list's form (its ``action``, ``names`` or ``scope``, ``note`` and
    ``until``); a delete shows what it would delete and asks first (``confirmed``)."""
    if request.method != "POST":
        return HttpResponse("POST only", status=405, headers={"Allow": "POST"})
    verb = request.POST.get("action", "")
    allowed = (
        model_admin.has_delete_permission(request)
        if verb == "delete"
        else model_admin.has_change_permission(request)
    )
    if not allowed:
        raise PermissionDenied
    fields = request.POST.dict()
    names = request.POST.getlist("names")
    back = url(model_admin, "changelist") + bulk.selection_query(fields)
    try:
        api = client(request)  # its changes recorded in the audit trail as this user's
        if verb == "delete" and fields.get("confirmed") != "yes":
            chosen = bulk.matching(api, fields) if fields.get("scope") == bulk.MATCHING else names
            if chosen:
                return page(
                    model_admin,
                    request,
                    "bulk_delete.html",
                    "Delete periodic entries?",
                    count=len(chosen),
                    shown=chosen[:_CONFIRM_SHOWN],
                    more=max(len(chosen) - _CONFIRM_SHOWN, 0),
                    fields=[(key, value) for key, value in fields.items() if key in _KEPT],
                    names=names if fields.get("scope") != bulk.MATCHING else [],
                    back=back,
                )
        report = bulk.carry_out(api, verb, names, fields)
    except OUTAGES as error:
        return page(model_admin, request, "problem.html", "Periodic entries", 503, problem=error)
    except PeriodiqError as error:
        model_admin.message_user(request, str(error), messages.ERROR)
        return HttpResponseRedirect(back)
    _log(model_admin, request, report)
    model_admin.message_user(request, report.headline, messages.SUCCESS)
    if report.skipped_line:
        model_admin.message_user(request, report.skipped_line, messages.WARNING)
    return HttpResponseRedirect(back)


_KEPT = frozenset({"action", "scope", "q", "state", "alert", "owner", "sort"})
"""What the page that asks before a delete carries on, besides the names ticked."""


def _log(model_admin: ModelAdmin, request: HttpRequest, report: bulk.Report) -> None:
    """Each entry changed in Django's admin log, with the message a single action writes;
    in one insert where Django can (5.1 and later)."""
    done = list(report.result)
    if not done:
        return
    note = f": {report.note}" if report.note else ""
    message = {
        "pause": f"Paused{note} (bulk)",
        "resume": "Resumed (bulk)",
        "run": "Ran now (bulk)",
        "delete": "deleted",
    }[report.verb]
    log_actions = getattr(LogEntry.objects, "log_actions", None)
    if log_actions is None:  # Django before 5.1: one row at a time
        for name in done:
            record(model_admin, request, name, message)
        return
    log_actions(
        user_id=request.user.pk,
        queryset=[PeriodicEntry(name=name) for name in done],
        action_flag=DELETION if report.verb == "delete" else CHANGE,
        change_message="" if report.verb == "delete" else message,
    )
