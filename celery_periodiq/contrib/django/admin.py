"""The admin's "Periodic entries": the URLs of the list, an entry, the form, the actions
and the list's bulk actions, each behind the admin's login and one of the model's four
permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path

from celery_periodiq.contrib.django import bulk, editing, pages
from celery_periodiq.contrib.django.models import PeriodicEntry

__all__ = ["PeriodicEntryAdmin"]

ACTIONS = ("pause", "resume", "run")
"""The POST-only actions of an entry's page (``change`` permission); delete has its own."""


@admin.register(PeriodicEntry)
class PeriodicEntryAdmin(admin.ModelAdmin):  # type: ignore[misc]
    """The model's admin pages, drawn from the schedule in Redis (no queryset is read)."""

    def get_urls(self) -> list[URLPattern]:
        def named(suffix: str) -> str:
            return f"{self.opts.app_label}_{self.opts.model_name}_{suffix}"

        def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(view)  # type: ignore[no-any-return]

        acts = [
            path(
                f"<path:object_id>/{verb}/",
                wrap(self.action_view),
                {"verb": verb},
                name=named(verb),
            )
            for verb in ACTIONS
        ]
        return [
            path("", wrap(self.changelist_view), name=named("changelist")),
            path("add/", wrap(self.add_view), name=named("add")),
            path("preview/", wrap(self.preview_view), name=named("preview")),
            path("bulk/", wrap(self.bulk_view), name=named("bulk")),
            path("<path:object_id>/change/", wrap(self.change_view), name=named("change")),
            path("<path:object_id>/edit/", wrap(self.edit_view), name=named("edit")),
            path("<path:object_id>/delete/", wrap(self.delete_view), name=named("delete")),
            *acts,
            path("<path:object_id>/", wrap(self.object_redirect)),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return pages.changelist(self, request)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return pages.entry(self, request, object_id)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        return pages.delete(self, request, object_id)

    def action_view(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        return pages.action(self, request, object_id, verb)

    def bulk_view(self, request: HttpRequest) -> HttpResponse:
        return bulk.bulk_action(self, request)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return editing.edit(self, request, None)

    def edit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return editing.edit(self, request, object_id)

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        return editing.preview_view(self, request)

    def object_redirect(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return HttpResponseRedirect(f"{request.path}change/")
