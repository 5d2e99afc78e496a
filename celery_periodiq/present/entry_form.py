"""The entry form shared by the dashboard and the Django admin: what each field holds as
text, how that text becomes the keyword options of ``Periodiq.add``/``update``, and the
schedule preview shown while typing.

Framework-neutral: the pages around it own the ``<form>`` tag, the CSRF token and the
submit button; ``web/templates/entry_form_fields.html`` renders the fields. The API's own
validation decides what is valid; this module only reads the text (JSON, numbers,
instants) and puts each error beside the field it concerns.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import Celery

from celery_periodiq.api import Periodiq
from celery_periodiq.errors import (
    DeclaredEntryError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    ScheduleError,
)
from celery_periodiq.model.entry import AUTO, Entry, schedule_field
from celery_periodiq.model.policy import (
    CATCHUP_POLICIES,
    DEFAULT_FAILURE_THRESHOLD,
    OVERLAP_POLICIES,
)
from celery_periodiq.present.terminal import iso
from celery_periodiq.schedules import Schedule, parse_form
from celery_periodiq.schedules.calendar import looks_like_calendar
from celery_periodiq.schedules.zones import zone
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.worker.task_modules import import_task_modules

__all__ = ["FIELDS", "EntryForm", "preview", "save", "task_choices", "unknown_task"]

FIELDS: tuple[str, ...] = (
    "name",
    "task",
    "schedule",
    "tz",
    "args",
    "kwargs",
    "queue",
    "options",
    "owner",
    "enabled",
    "start_at",
    "end_at",
    "max_runs",
    "exclude",
    "tolerance",
    "timebox",
    "overlap",
    "catchup",
    "catchup_window",
    "expires",
    "jitter",
    "alert_after",
    "failure_threshold",
    "pause_on_failure",
)
"""The form's field names, in the order the page shows them."""

CHECKBOXES = ("enabled", "pause_on_failure", "force")
"""Fields that are checkboxes: ``"on"`` when ticked, ``""`` when not (absent when posted)."""

_BLANK = {
    "enabled": "on",
    "tolerance": AUTO,
    "timebox": AUTO,
    "expires": AUTO,
    "alert_after": AUTO,
    "failure_threshold": str(DEFAULT_FAILURE_THRESHOLD),
    "jitter": "0",
}
# Options named in errors that the form shows under another field.
_SHOWN_AT = {"cron": "schedule", "every": "schedule", "calendar": "schedule", "at": "schedule"}


@dataclass
class EntryForm:
    """One entry as a form: the text of each field, and the error beside each."""

    values: dict[str, str]
    """Field name -> text as typed (every field of :data:`FIELDS`, ``""`` when empty; and
    ``force``, the "write it anyway" checkbox of a declared entry)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Field name -> message shown beside that field (``""``: about the whole form)."""
    editing: str | None = None
    """The entry's name when editing, None when creating."""
    declared: bool = False
    """Editing an entry declared in code or beat_schedule (saving needs ``force``)."""

    @property
    def choices(self) -> dict[str, tuple[str, ...]]:
        """The values of the fields chosen from a list (``""``: the app's default)."""
        return {"overlap": OVERLAP_POLICIES, "catchup": CATCHUP_POLICIES}

    @classmethod
    def blank(cls, tz: str = "UTC") -> EntryForm:
        """An empty form, with the API's defaults filled in (``tz``: the app's zone)."""
        return cls({name: _BLANK.get(name, "") for name in (*FIELDS, "force")} | {"tz": tz})

    @classmethod
    def of(cls, stored: StoredEntry) -> EntryForm:
        """A stored entry's form, to edit it (a quarantined one: its name and why)."""
        entry = stored.entry
        if entry is None:
            form = cls.blank()
            form.values["name"], form.editing = stored.name, stored.name
            form.errors[""] = f"entry {stored.name!r} is quarantined: {stored.invalid}"
            return form
        return cls(
            _values_of(entry), editing=entry.name, declared=entry.source in ("code", "config")
        )

    @classmethod
    def posted(cls, data: Mapping[str, str], editing: str | None = None) -> EntryForm:
        """The form as submitted (``data``: the posted fields; a checkbox left unticked
        is absent). When ``editing``, the name is that entry's, whatever was posted."""
        values = {
            name: ("on" if data.get(name) else "") if name in CHECKBOXES else _text(data.get(name))
            for name in (*FIELDS, "force")
        }
        if editing is not None:
            values["name"] = editing
        return cls(values, editing=editing)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _values_of(entry: Entry) -> dict[str, str]:
    options = dict(entry.options)
    queue = options.pop("queue", "")
    return {
        "name": entry.name,
        "task": entry.task,
        "schedule": entry.schedule,
        "tz": entry.tz,
        "args": json.dumps(list(entry.args)) if entry.args else "",
        "kwargs": json.dumps(entry.kwargs) if entry.kwargs else "",
        "queue": str(queue),
        "options": json.dumps(options) if options else "",
        "owner": entry.owner or "",
        "enabled": "on" if entry.enabled else "",
        "start_at": "" if entry.start_at is None else entry.start_at.isoformat(),
        "end_at": "" if entry.end_at is None else entry.end_at.isoformat(),
        "max_runs": "" if entry.max_runs is None else str(entry.max_runs),
        "exclude": ", ".join(entry.exclude),
        "tolerance": _number_text(entry.tolerance),
        "timebox": _number_text(entry.timebox),
        "overlap": entry.overlap,
        "catchup": entry.catchup,
        "catchup_window": _number_text(entry.catchup_window, none=""),
        "expires": _number_text(entry.expires),
        "jitter": _number_text(entry.jitter),
        "alert_after": _number_text(entry.alert_after),
        "failure_threshold": str(entry.failure_threshold),
        "pause_on_failure": "on" if entry.pause_on_failure else "",
        "force": "",
    }


def _number_text(value: float | str | None, none: str = "none") -> str:
    if value is None:
        return none
    return value if isinstance(value, str) else f"{value:g}"


def save(api: Periodiq, form: EntryForm) -> StoredEntry | None:
    """Create (``form.editing`` None) or update the entry; None when ``form.errors`` says
    why (then nothing was written). The API's own validation decides.

    An edit of an entry declared in code or beat_schedule is marked so first
    (``form.declared``), so the page offers "write it anyway" even when the save fails
    for another reason.

    Raises:
        StoreUnavailableError: Redis failed (the page says so as for any other read).
    """
    if form.editing is not None and not form.declared:
        with contextlib.suppress(EntryNotFoundError):  # said beside the form below
            form.declared = api.declared_in(form.editing) is not None
    form.errors.clear()
    options = _options(form, api.settings.default_tz)
    if form.errors:
        return None
    values = form.values
    try:
        if form.editing is None:
            return api.add(values["name"], values["task"], **options)
        if _same_schedule(api, form.editing, values["schedule"]):
            # kept as it is: a one-off's instant may have passed, and that is no change
            options = {key: value for key, value in options.items() if key not in _SHOWN_AT}
        force = values["force"] == "on"
        return api.update(form.editing, force=force, task=values["task"], **options)
    except EntryExistsError as error:
        form.errors["name"] = str(error)
    except DeclaredEntryError as error:
        form.declared = True
        form.errors["force"] = str(error)
    except EntryNotFoundError as error:
        form.errors[""] = str(error)
    except EntryError as error:
        where = _SHOWN_AT.get(error.field or "", error.field or "")
        form.errors[where if where in FIELDS else ""] = str(error)
    return None


def _same_schedule(api: Periodiq, name: str, text: str) -> bool:
    entry = api.get(name).entry
    return entry is not None and entry.schedule == " ".join(text.split())


def _options(form: EntryForm, default_tz: str) -> dict[str, Any]:
    """The keyword options of ``add``/``update`` the form's text stands for (an empty zone:
    ``default_tz``, the app's); what cannot be read (bad JSON, a word for a number) goes
    into ``form.errors``."""
    values, errors = form.values, form.errors
    read = _Reader(values, errors)
    tz = values["tz"] or default_tz
    options: dict[str, Any] = {
        "tz": tz,
        "args": read.json("args", []),
        "kwargs": read.json("kwargs", None),
        "owner": values["owner"] or None,
        "enabled": values["enabled"] == "on",
        "start_at": read.instant("start_at", tz),
        "end_at": read.instant("end_at", tz),
        "max_runs": read.number("max_runs", None, whole=True),
        "exclude": [day.strip() for day in values["exclude"].split(",") if day.strip()],
        "tolerance": read.number("tolerance", AUTO, words=(AUTO,)),
        "timebox": read.number("timebox", AUTO, words=(AUTO, "none")),
        "overlap": values["overlap"] or None,
        "catchup": values["catchup"] or None,
        "catchup_window": read.number("catchup_window", None, words=("none",)),
        "expires": read.number("expires", AUTO, words=(AUTO, "none")),
        "jitter": read.number("jitter", 0.0),
        "alert_after": read.number("alert_after", AUTO, words=(AUTO, "none")),
        "failure_threshold": read.number(
            "failure_threshold", DEFAULT_FAILURE_THRESHOLD, whole=True
        ),
        "pause_on_failure": values["pause_on_failure"] == "on",
    }
    message = read.json("options", None)
    if values["queue"]:
        if isinstance(message, dict):
            message = {**message, "queue": values["queue"]}
        elif message is None:
            message = {"queue": values["queue"]}
    options["options"] = message
    try:
        kind, spec = schedule_option(values["schedule"], tz)
    except ScheduleError as error:
        errors.setdefault(schedule_field(error), str(error))
    else:
        options[kind] = spec
    return options


class _Reader:
    """Reads fields' text as JSON, numbers and instants; errors go beside their field."""

    def __init__(self, values: Mapping[str, str], errors: dict[str, str]) -> None:
        self.values, self.errors = values, errors

    def json(self, name: str, empty: Any) -> Any:
        text = self.values[name]
        if not text:
            return empty
        try:
            return json.loads(text)
        except ValueError as error:
            self.errors[name] = f"{name}: not JSON ({error})"
            return empty

    def number(
        self, name: str, empty: Any, *, whole: bool = False, words: tuple[str, ...] = ()
    ) -> Any:
        text = self.values[name].lower()
        if not text:
            return empty
        if text in words:
            return None if text == "none" else text
        try:
            return int(text) if whole else float(text)
        except ValueError:
            allowed = "a whole number" if whole else "a number of seconds"
            allowed = ", ".join([allowed, *(repr(word) for word in words)])
            self.errors[name] = f"{name}={self.values[name]!r} is invalid (allowed: {allowed})"
            return empty

    def instant(self, name: str, tz: str) -> datetime | None:
        text = self.values[name]
        if not text:
            return None
        try:
            return _aware(text, tz)
        except ValueError as error:
            self.errors[schedule_field(error, name)] = f"{name}: {error}"
            return None


def _aware(text: str, tz: str) -> datetime:
    """An ISO 8601 instant; without an offset, read in ``tz``.

    Raises:
        ValueError: not ISO 8601 (ScheduleError: ``tz`` is no zone).
    """
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO 8601 instant (allowed: 2026-12-01T09:00:00+01:00; "
            "without an offset it is read in the entry's time zone)"
        ) from None
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=zone(tz))


def schedule_option(text: str, tz: str) -> tuple[str, str | datetime]:
    """Which option of ``add`` the schedule field's text is, and its value: ``@every``
    intervals are ``every=``, ISO instants (``2026-12-01T09:00``) ``at=``, calendar
    events ``calendar=``, the rest ``cron=``.

    Raises:
        ScheduleError: the text is empty, or an instant in a zone that is none.
    """
    spec = " ".join(text.split())
    if not spec:
        raise ScheduleError(
            "schedule: empty (allowed: cron '*/15 * * * *', '@every 30s', a calendar event "
            "'Mon..Fri 09:00', or an instant '2026-12-01T09:00')"
        )
    if spec.lower().startswith("@every"):
        return "every", spec
    if "T" in spec and " " not in spec:
        try:
            return "at", _aware(spec, tz)
        except ScheduleError:
            raise
        except ValueError:
            pass  # not an instant: a cron or calendar form says why
    return ("calendar" if looks_like_calendar(spec) else "cron"), spec


def preview(
    schedule: str, tz: str, now: datetime, count: int = 5, *, name: str | None = None
) -> dict[str, Any]:
    """What the schedule field's text means: ``{"description": str | None, "next":
    [iso8601 str, ...], "error": str | None}`` (``next``: its first ``count`` fires after
    ``now``; ``name``: the key of Jenkins ``H``, as the entry's name will be)."""
    try:
        parsed = _parsed(schedule, tz or "UTC", name or "entry")
        fires = parsed.upcoming(now, count)
    except ScheduleError as error:
        return {"description": None, "next": [], "error": str(error)}
    return {"description": parsed.describe(), "next": [iso(fire) for fire in fires], "error": None}


def _parsed(schedule: str, tz: str, key: str) -> Schedule:
    kind, spec = schedule_option(schedule, tz)
    if isinstance(spec, datetime):
        return parse_form(spec.isoformat(), "at", tz=tz, key=key)
    return parse_form(spec, kind, tz=tz, key=key)  # type: ignore[arg-type]


def task_choices(app: Celery) -> list[str]:
    """The app's registered task names, sorted (Celery's own ``celery.*`` left out), once
    its task modules are imported as a worker imports them."""
    import_task_modules(app)
    try:
        names = list(app.tasks)
    except Exception:  # an app that cannot finalize here: nothing to offer
        return []
    return sorted(name for name in names if not name.startswith("celery."))


def unknown_task(tasks: list[str], task: str) -> str | None:
    """The warning beside a task name the app does not register (``tasks``: its
    :func:`task_choices`); None when it does, or when there is nothing to compare with.
    Such a name is allowed, as ``add`` allows it."""
    if not task or not tasks or task in tasks:
        return None
    return (
        f"{task!r} is not a task of this app: check its name, or that the workers' code "
        "defines it (runs of an unknown task fail on the worker)"
    )
