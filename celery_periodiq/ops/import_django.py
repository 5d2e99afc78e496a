"""Import from django-celery-beat: a ``manage.py dumpdata django_celery_beat`` dump
converted into an export document (:mod:`celery_periodiq.ops.transfer`), without Django.

The dump is a JSON list of ``{"model", "pk", "fields"}`` records. Every
``periodictask`` becomes one entry; the schedule records are read through its
foreign keys (``crontab``, ``interval``, ``solar``, ``clocked``: exactly one is set);
``periodictasks`` (django-celery-beat's change tracker) is ignored.

What each field becomes:

- ``crontab``: a cron expression in the crontab's OWN ``timezone``, meaning exactly the
  days and times Celery's ``crontab`` computes (fields Celery reads otherwise than cron,
  such as wrapping ranges ``22-2``, are written out as lists). When both
  ``day_of_month`` and ``day_of_week`` are restricted, Celery runs only on days
  matching both, which cron cannot say: such a crontab becomes the equivalent systemd
  calendar event (``calendar=``), with a note.
- ``interval``: ``every=`` (days, hours, minutes, seconds; microseconds must make whole
  milliseconds). It is anchored at ``start_time`` when given, else at the import.
- ``solar``: ``@solar EVENT LAT LON``.
- ``clocked``: a one-off entry (``form="at"``) at ``clocked_time``.
- ``one_off`` with another schedule: ``max_runs=1``; a one-off task that already ran
  (``total_run_count`` > 0) is imported disabled, as django-celery-beat would disable it.
- ``args``/``kwargs`` (JSON text) as they are; ``queue``, ``exchange``,
  ``routing_key``, ``priority`` become options.
- ``expires`` (after it the schedule no longer triggers) becomes ``end_at``;
  ``expire_seconds`` (how long a sent message may wait) becomes ``expires``.
- ``start_time`` becomes ``start_at``; ``enabled`` stays ``enabled``; ``last_run_at``
  becomes ``state.last_run`` (informational: an import does not write it).
- ``headers`` and ``description`` have no place in an entry: dropped, with a note.

Datetimes with an offset (``USE_TZ=True`` dumps them in UTC with ``Z``) are kept;
naive ones (``USE_TZ=False``) are read in ``naive_tz`` (Django's ``TIME_ZONE``:
give it; default the Celery app's ``timezone``).
"""

from __future__ import annotations

import calendar
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery
from celery.schedules import crontab

from celery_periodiq.config import Settings
from celery_periodiq.errors import EntryError, ScheduleError, shown
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.policy import Defaults
from celery_periodiq.ops.transfer import FORMAT, VERSION
from celery_periodiq.schedules.cron import compile_cron
from celery_periodiq.schedules.interval import every_spec
from celery_periodiq.schedules.zones import zone

__all__ = ["APP_LABEL", "MODELS", "django_document"]

APP_LABEL = "django_celery_beat"
SCHEDULE_KINDS = ("crontab", "interval", "solar", "clocked")
MODELS = (
    "periodictask",
    "crontabschedule",
    "intervalschedule",
    "solarschedule",
    "clockedschedule",
    "periodictasks",
)
"""The models of a ``dumpdata django_celery_beat`` dump (without the app label)."""
PERIODS = ("days", "hours", "minutes", "seconds", "microseconds")
BACKEND_CLEANUP = "celery.backend_cleanup"
_CRON_PARTS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
_FULL = {
    "minute": range(60),
    "hour": range(24),
    "day_of_month": range(1, 32),
    "month_of_year": range(1, 13),
    "day_of_week": range(7),
}
_WEEKDAY_NAMES = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
_SOLAR_CHECK = ("event", "latitude", "longitude")


class _RecordError(Exception):
    """Why one periodictask record cannot be converted."""


def django_document(
    records: Any, app: Celery, *, naive_tz: str | None = None, now: datetime | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Convert a ``dumpdata django_celery_beat`` dump into an export document.

    Args:
        records: the parsed JSON of the dump (a list of records).
        app: the Celery app: its ``timezone`` is the default ``naive_tz``, its
            ``periodiq_default_*`` settings the entries' policies.
        naive_tz: the zone naive datetimes are in (Django's ``TIME_ZONE`` when the
            dump was made with ``USE_TZ=False``).
        now: the current instant (default this host's clock), to note clocked tasks
            whose time has passed.

    Returns:
        The document (as :func:`celery_periodiq.ops.transfer.import_schedule` reads it), the
        problems (one per record that cannot be converted, naming it and why) and the
        notes (what a converted task lost or how it was read).

    Raises:
        EntryError: the dump is not a list, or ``naive_tz`` is not a time zone.
    """
    if not isinstance(records, list):
        raise EntryError(
            f"the django-celery-beat dump {shown(records)} is not a JSON list (allowed: the "
            f"output of 'manage.py dumpdata {APP_LABEL}')"
        )
    naive = naive_tz if naive_tz is not None else str(app.conf.timezone or "UTC")
    try:
        zone(naive)
    except ScheduleError as error:
        raise EntryError(f"naive_tz: {error}") from None
    converter = _Converter(app, naive, now or datetime.now(UTC))
    tasks = converter.read(records)
    entries = []
    for pk, fields in tasks:
        try:
            entries.append(converter.task(pk, fields))
        except _RecordError as error:
            converter.problems.append(f"{_task_label(pk, fields)}: {error}")
    document = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "entries": entries,
    }
    return document, converter.problems, converter.notes


def _task_label(pk: Any, fields: dict[str, Any]) -> str:
    name = fields.get("name")
    return f"periodictask {shown(pk)}" + (f" ({shown(name)})" if isinstance(name, str) else "")


class _Converter:
    def __init__(self, app: Celery, naive_tz: str, now: datetime) -> None:
        self.app = app
        self.naive_tz = naive_tz
        self.now = now
        self.defaults = Defaults.of(Settings.from_app(app))
        self.schedules: dict[str, dict[Any, dict[str, Any]]] = {kind: {} for kind in MODELS}
        self.problems: list[str] = []
        self.notes: list[str] = []

    def read(self, records: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        """The periodictask records; schedule records are kept by model and pk."""
        tasks = []
        for position, record in enumerate(records):
            label = f"record #{position}"
            if not isinstance(record, dict) or not isinstance(record.get("fields"), dict):
                self.problems.append(
                    f"{label}: {shown(record)} is not a dumpdata record (allowed: "
                    "{'model': ..., 'pk': ..., 'fields': {...}})"
                )
                continue
            model, pk = record.get("model"), record.get("pk")
            app_label, _, kind = str(model).partition(".")
            if app_label != APP_LABEL or kind not in MODELS:
                self.problems.append(
                    f"{label}: model {shown(model)} is not a django-celery-beat model (allowed: "
                    + ", ".join(f"{APP_LABEL}.{name}" for name in MODELS)
                    + ")"
                )
            elif isinstance(pk, bool) or not isinstance(pk, int | str):
                self.problems.append(f"{label} ({model}): pk={shown(pk)} is not a key")
            elif kind == "periodictask":
                tasks.append((pk, record["fields"]))
            else:
                self.schedules[kind][pk] = record["fields"]
        return tasks

    def task(self, pk: Any, fields: dict[str, Any]) -> dict[str, Any]:
        """One periodictask as an export record; its notes are added to ``self.notes``.

        Raises:
            _RecordError: why it cannot be converted.
        """
        name, label = fields.get("name"), _task_label(pk, fields)
        if not isinstance(name, str) or not name:
            raise _RecordError(f"name={shown(name)} is invalid (allowed: a non-empty string)")
        given = [kind for kind in SCHEDULE_KINDS if fields.get(kind) is not None]
        if len(given) != 1:
            raise _RecordError(
                f"has {len(given)} schedules ({', '.join(given) or 'none'}) (allowed: exactly "
                f"one of {', '.join(SCHEDULE_KINDS)})"
            )
        kind = given[0]
        schedule = self.schedules[f"{kind}schedule"].get(fields[kind])
        if schedule is None:
            raise _RecordError(f"{kind}schedule {shown(fields[kind])} is not in the dump")
        where = f"{kind}schedule {shown(fields[kind])}"
        notes: list[str] = []
        options = self._schedule(kind, schedule, where, notes)
        options.update(self._options(fields, notes))
        options.update(self._bounds(fields))
        enabled = fields.get("enabled", True)
        if not isinstance(enabled, bool):
            raise _RecordError(f"enabled={shown(enabled)} is invalid (allowed: true or false)")
        if fields.get("one_off") is True:
            runs = fields.get("total_run_count") or 0
            if kind != "clocked":
                options["max_runs"] = 1
            if enabled and isinstance(runs, int) and runs > 0:
                enabled = False
                notes.append(f"one_off and already run (total_run_count {runs}): imported disabled")
        if name == BACKEND_CLEANUP:
            notes.append(
                "Celery's result cleanup that django-celery-beat adds by itself: imported like "
                "the others (the periodiq beat does not add it; delete it if your result "
                "backend expires results itself)"
            )
        try:
            entry = build_entry(
                name, fields.get("task"), enabled=enabled, defaults=self.defaults, **options
            )
        except (EntryError, TypeError) as error:
            raise _RecordError(str(error)) from None
        last_run = self._instant(fields, "last_run_at")
        self.notes += [f"{label}: {note}" for note in notes]
        state = {
            "paused": False,
            "note": None,
            "last_run": None if last_run is None else last_run.astimezone(UTC).isoformat(),
        }
        return {"definition": entry.to_dict(), "state": state}

    # schedules

    def _schedule(
        self, kind: str, schedule: dict[str, Any], where: str, notes: list[str]
    ) -> dict[str, Any]:
        if kind == "crontab":
            return self._crontab(schedule, where, notes)
        if kind == "interval":
            every, period = schedule.get("every"), schedule.get("period")
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise _RecordError(
                    f"{where}: every={shown(every)} is invalid (allowed: a whole number >= 1)"
                )
            if period not in PERIODS:
                raise _RecordError(
                    f"{where}: period={shown(period)} is invalid (allowed: {', '.join(PERIODS)})"
                )
            try:
                return {"every": every_spec(timedelta(**{period: every}))}
            except ScheduleError as error:
                raise _RecordError(f"{where}: {error}") from None
        if kind == "solar":
            values = [schedule.get(key) for key in _SOLAR_CHECK]
            if not all(isinstance(value, str | int | float) for value in values):
                raise _RecordError(
                    f"{where}: {shown(schedule)} needs event, latitude and longitude"
                )
            return {"cron": "@solar " + " ".join(str(value) for value in values)}
        at = self._instant(schedule, "clocked_time", where)
        if at is None:
            raise _RecordError(f"{where}: clocked_time is missing")
        if at <= self.now:
            notes.append(
                f"{where}: clocked_time {at.astimezone(UTC).isoformat()} is past: "
                "django-celery-beat would still run it once (unless it ran), the imported "
                "one-off entry will not (trigger it to run it now)"
            )
        return {"at": at}

    def _crontab(self, schedule: dict[str, Any], where: str, notes: list[str]) -> dict[str, Any]:
        texts = {}
        for part in _CRON_PARTS:
            value = schedule.get(part, "*")
            if not isinstance(value, str):
                raise _RecordError(
                    f"{where}: {part}={shown(value)} is invalid (allowed: a cron field)"
                )
            texts[part] = value.replace(" ", "") or "*"  # as django-celery-beat reads it
            try:
                crontab(**{part: texts[part]})
            except ValueError as error:
                raise _RecordError(
                    f"{where}: {part}={shown(value)} is not accepted by Celery's crontab, so "
                    f"django-celery-beat cannot run it either ({error})"
                ) from None
        tz = schedule.get("timezone") or str(self.app.conf.timezone or "UTC")
        try:
            zone(tz)
        except ScheduleError as error:
            raise _RecordError(f"{where}: {error}") from None
        celery_crontab = crontab(**texts)
        sets = {part: sorted(getattr(celery_crontab, part)) for part in _CRON_PARTS}
        full = {part: sets[part] == list(_FULL[part]) for part in _CRON_PARTS}
        if not full["day_of_month"] and not full["day_of_week"]:
            spec = _calendar(sets, full)
            notes.append(
                f"{where} restricts both day_of_month {shown(texts['day_of_month'])} and "
                f"day_of_week {shown(texts['day_of_week'])}: Celery runs it only on days "
                "matching both (cron: either), so it is imported as the calendar event "
                f"{shown(spec)}, which means the same"
            )
            return {"calendar": spec, "tz": tz}
        return {"cron": _cron(texts, sets, full), "tz": tz}

    # the other fields

    def _options(self, fields: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, kind, default in (("args", list, "[]"), ("kwargs", dict, "{}")):
            text = fields.get(key) or default
            try:
                value = json.loads(text) if isinstance(text, str) else None
            except ValueError:
                value = None
            if not isinstance(value, kind):
                allowed = "a JSON list" if kind is list else "a JSON object"
                raise _RecordError(f"{key}={shown(text)} is invalid (allowed: {allowed}, as text)")
            result[key] = value
        options: dict[str, Any] = {}
        for key in ("queue", "exchange", "routing_key"):
            value = fields.get(key)
            if value not in (None, ""):
                options[key] = value
        if fields.get("priority") is not None:
            options["priority"] = fields["priority"]
        result["options"] = options
        seconds = fields.get("expire_seconds")
        if seconds:  # 0 or null: django-celery-beat sets no expiry
            result["expires"] = seconds
        headers = fields.get("headers")
        if headers not in (None, "", "{}"):
            notes.append(f"headers {shown(headers)} dropped (entries carry no message headers)")
        if fields.get("description"):
            notes.append(f"description {shown(fields['description'])} dropped")
        return result

    def _bounds(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {
            "start_at": self._instant(fields, "start_time"),
            "end_at": self._instant(fields, "expires"),
        }

    def _instant(
        self, fields: dict[str, Any], key: str, where: str | None = None
    ) -> datetime | None:
        value = fields.get(key)
        if value is None:
            return None
        try:
            parsed = datetime.fromisoformat(value)
        except (TypeError, ValueError):
            prefix = f"{where}: " if where else ""
            raise _RecordError(
                f"{prefix}{key}={shown(value)} is invalid (allowed: an ISO 8601 datetime)"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone(self.naive_tz))
        return parsed


def _cron(texts: dict[str, str], sets: dict[str, list[int]], full: dict[str, bool]) -> str:
    """A 5-field cron expression meaning what Celery's crontab means (at most one day field
    restricted): the fields as written when cron reads them the same, else as lists."""
    written = []
    for index, part in enumerate(_CRON_PARTS):
        alone = ["*"] * len(_CRON_PARTS)
        alone[index] = texts[part]
        only = {other: list(_FULL[other]) for other in _CRON_PARTS} | {part: sets[part]}
        keep = not full[part] and _cron_means(" ".join(alone), only)
        written.append(texts[part] if keep else "*" if full[part] else _listed(sets[part], "-"))
    candidate = " ".join(written)
    if _cron_means(candidate, sets):
        return candidate
    return " ".join("*" if full[part] else _listed(sets[part], "-") for part in _CRON_PARTS)


def _listed(values: list[int], through: str, width: int = 1) -> str:
    """``0,1,2,3,7`` as ``0-3,7`` (``through`` is the range mark: ``-`` or ``..``)."""
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ",".join(
        f"{run[0]:0{width}d}{through}{run[-1]:0{width}d}"
        if len(run) > 2
        else ",".join(f"{value:0{width}d}" for value in run)
        for run in runs
    )


def _cron_means(spec: str, sets: dict[str, list[int]]) -> bool:
    try:
        fields = compile_cron(spec)
    except ScheduleError:
        return False
    if (
        list(fields.minutes) != sets["minute"]
        or list(fields.hours) != sets["hour"]
        or list(fields.months) != sets["month_of_year"]
    ):
        return False
    # every (month length, first weekday) pair occurs in 28 years
    for year in range(2000, 2028):
        for month in range(1, 13):
            first, length = calendar.monthrange(year, month)
            wanted = {
                day
                for day in range(1, length + 1)
                if day in sets["day_of_month"] and (first + day) % 7 in sets["day_of_week"]
            }
            if fields.days.matching_days(year, month) != wanted:
                return False
    return True


def _calendar(sets: dict[str, list[int]], full: dict[str, bool]) -> str:
    """A systemd calendar event (weekday AND date must match, as in Celery)."""

    def listed(part: str) -> str:
        return "*" if full[part] else _listed(sets[part], "..", 2)

    weekdays = ",".join(_WEEKDAY_NAMES[day] for day in sets["day_of_week"])
    date = f"*-{listed('month_of_year')}-{listed('day_of_month')}"
    return f"{weekdays} {date} {listed('hour')}:{listed('minute')}:00"
