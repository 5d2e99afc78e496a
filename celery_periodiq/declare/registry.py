"""Entries declared in code (``@periodic``) and in ``app.conf.beat_schedule``.

The beat reconciles these into Redis when it starts, and says which set it declares
(:func:`declaration_of`), so that beats of two versions of the code can run side by side.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.schedules import schedule as every_schedule
from celery.schedules import solar as celery_solar

from celery_periodiq.config import Settings, app_zone
from celery_periodiq.errors import ConfigurationError, EntryError, shown
from celery_periodiq.model.build import build_entry, task_name
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.options import OPTION_KEYS
from celery_periodiq.model.policy import Defaults, check_group
from celery_periodiq.schedules import Schedule

__all__ = ["Declaration", "declaration_of", "declare", "declared", "from_beat_schedule"]

logger = logging.getLogger("celery_periodiq.registry")


@dataclass(frozen=True)
class Declaration:
    """One ``@periodic`` declaration; its task may be a proxy until the app finalizes."""

    name: str | None
    """The entry name; None means the task's name."""
    task: Any
    options: dict[str, Any]
    """``build_entry`` keyword options; overlap/catchup None means the app's defaults."""

    def entry(self, settings: Settings | None = None) -> Entry:
        """The entry, with the app's default policies filled in."""
        task = task_name(self.task)
        return build_entry(
            self.name or task, task, source="code", defaults=Defaults.of(settings), **self.options
        )


_DECLARED: list[Declaration] = []


def declare(declaration: Declaration) -> None:
    """Record a ``@periodic`` declaration; the beat writes it to Redis on start."""
    _DECLARED.append(declaration)


def declared(settings: Settings | None = None) -> list[Entry]:
    """Every entry declared with ``@periodic`` in imported modules.

    Raises:
        ConfigurationError: two declarations of one entry name differ (two tasks, or
            one task with two schedules).
        EntryError: a ``group=`` that ``periodiq_group_limits`` does not name (while it
            names some).
    """
    entries: dict[str, Entry] = {}
    for declaration in _DECLARED:
        entry = declaration.entry(settings)
        if settings is not None:
            check_group(entry.name, entry.group, settings.group_limits)
        previous = entries.get(entry.name)
        if previous is not None and previous != entry:
            tasks = (
                f"tasks {shown(previous.task)} and {shown(entry.task)}"
                if previous.task != entry.task
                else f"task {shown(entry.task)}, with two definitions"
            )
            raise ConfigurationError(
                f"entry {shown(entry.name)} is declared twice with @periodic, by {tasks} "
                "(allowed: one declaration per entry name; give one of them name=)"
            )
        entries[entry.name] = entry
    return list(entries.values())


def schedule_options(value: Any, app: Celery) -> dict[str, Any]:
    """The ``cron=``/``every=``/``calendar=``/``at=`` (and ``tz``, bounds) options that mean
    what a Celery schedule object means: ``crontab`` (in the app's ``timezone``),
    ``solar``, ``schedule``, a ``timedelta`` or seconds, an aware ``datetime`` (run once
    then, as ``at=``), or a celery_periodiq ``Schedule``.

    Raises:
        EntryError: any other value.
    """
    if isinstance(value, Schedule):
        options: dict[str, Any] = {
            "tz": value.timezone,
            "start_at": value.start_at,
            "end_at": value.end_at,
        }
        key = {"interval": "every", "calendar": "calendar", "once": "at"}.get(value.kind, "cron")
        options[key] = value.spec
        return options
    if isinstance(value, crontab):
        attributes = vars(value)
        fields = [
            _cron_field(attributes[f"_orig_{part}"])
            for part in ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
        ]
        if not fields[2].startswith("*") and not fields[4].startswith("*"):
            logger.warning(
                "crontab %s: Celery requires day-of-month AND day-of-week to match; "
                "as a cron expression (crontab(5)) either one matching is enough",
                " ".join(fields),
            )
        return {"cron": " ".join(fields), "tz": app_zone(app)}
    if isinstance(value, datetime):
        return {"at": value}
    if isinstance(value, celery_solar):
        return {"cron": f"@solar {value.event} {value.lat} {value.lon}"}
    if isinstance(value, every_schedule):
        return {"every": vars(value)["run_every"]}
    if isinstance(value, timedelta | int | float) and not isinstance(value, bool):
        return {"every": value}
    raise EntryError(
        f"schedule {shown(value)} is not supported (allowed: celery_periodiq schedules, "
        "crontab, solar, schedule/timedelta/seconds, an aware datetime)"
    )


def _cron_field(value: Any) -> str:
    if isinstance(value, str | int):
        return str(value)
    return ",".join(str(item) for item in sorted(value))


def from_beat_schedule(app: Celery, settings: Settings) -> list[Entry]:
    """Entries for ``app.conf.beat_schedule``; invalid ones are logged and left out."""
    entries = []
    for name, spec in (app.conf.beat_schedule or {}).items():
        try:
            options = dict(spec.get("options") or {})
            dropped = sorted(set(options) - set(OPTION_KEYS))
            if dropped:
                logger.warning(
                    "beat_schedule %r: options %s are not kept by periodiq", name, dropped
                )
            entries.append(
                build_entry(
                    name,
                    spec["task"],
                    args=list(spec.get("args") or ()),
                    kwargs=dict(spec.get("kwargs") or {}),
                    options={key: value for key, value in options.items() if key in OPTION_KEYS},
                    source="config",
                    defaults=Defaults.of(settings),
                    **schedule_options(spec.get("schedule"), app),
                )
            )
        except (EntryError, KeyError, TypeError, AttributeError) as error:
            logger.error("beat_schedule %r is skipped: %s", name, error)
    return entries


def declaration_of(entries: list[Entry]) -> tuple[str, dict[str, str]]:
    """A beat's declaration set: its digest, and each entry's name with its definition's
    digest. Beats running the same code declare the same set; the digest is a hash of
    the names and definitions, so any change to either makes another set."""
    names = {entry.name: entry.digest for entry in sorted(entries, key=lambda e: e.name)}
    text = json.dumps(names, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha1(text, usedforsecurity=False).hexdigest()[:16], names
