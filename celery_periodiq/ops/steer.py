"""Steering one entry, as the runtime API does it: the checks of what a caller gives
(names, owners, counts, a ``schedule=`` object), reading an entry (refusing a
quarantined one), the guard of declared entries, and adding, changing, deleting,
pausing, resuming and triggering it.

The functions that take a :class:`Store` run inside the caller's
:meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

import getpass
import logging
import socket
from typing import Any

import redis
from celery import Celery

from celery_periodiq.beat.publish import send
from celery_periodiq.declare import registry
from celery_periodiq.errors import (
    DeclaredEntryError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PeriodiqError,
    did_you_mean,
    shown,
)
from celery_periodiq.model import policy
from celery_periodiq.model.build import build_entry, changed_entry, refuse_past, task_name
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.plan import from_ms, next_tick_ms
from celery_periodiq.model.policy import Defaults, check_group
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.worker.plain import is_plain
from celery_periodiq.worker.task_modules import import_task_modules

__all__ = [
    "add",
    "audit_of",
    "build",
    "check_count",
    "check_name",
    "check_owner",
    "declared_in",
    "delete",
    "not_found",
    "pause",
    "readable",
    "resume",
    "some_names",
    "stored",
    "trigger",
    "update",
    "warn_unknown_task",
    "with_schedule",
]

# The API's logger: these warnings are the API's, whichever module words them.
logger = logging.getLogger("celery_periodiq.api")


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise EntryError(f"entry name {shown(name)} is invalid (allowed: a non-empty string)")
    return name


def check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        raise EntryError(f"owner={shown(owner)} is invalid (allowed: a non-empty string)")
    return owner


_ACTOR_MOST = 200


def os_actor() -> str:
    """This process's OS user and host, ``user@host``: who acts when no actor is named."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def audit_of(actor: object, via: str, note: str = "") -> Audit:
    """The audit context of a write by ``actor`` (None: :func:`os_actor`), come ``via``.

    Raises:
        EntryError: ``actor`` is not non-empty text of at most 200 characters.
    """
    if actor is None:
        return Audit(os_actor(), via, note)
    if not isinstance(actor, str) or not actor.strip() or len(actor) > _ACTOR_MOST:
        raise EntryError(
            f"actor={shown(actor)} is invalid (allowed: who makes the change, as non-empty "
            f"text of at most {_ACTOR_MOST} characters)"
        )
    return Audit(actor, via, note)


def check_count(what: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PeriodiqError(f"{what}={shown(value)} is invalid (allowed: a whole number >= {low})")
    return value


def some_names(names: list[str], shown_at_most: int = 5) -> str:
    more = len(names) - shown_at_most
    return ", ".join(map(shown, names[:shown_at_most])) + (f" and {more} more" if more > 0 else "")


def with_schedule(options: dict[str, Any], app: Celery) -> dict[str, Any]:
    """``options`` with a ``schedule=`` object turned into the options that mean the same
    (``cron=``/``every=``/``calendar=``/``at=``, and its zone and bounds where it has them)."""
    value = options.pop("schedule", None)
    if value is None:
        return options
    if any(options.get(key) is not None for key in ("cron", "every", "calendar", "at")):
        raise EntryError("give schedule= or one of cron=, every=, calendar=, at=, not both")
    converted = {
        key: item for key, item in registry.schedule_options(value, app).items() if item is not None
    }
    if options.get("tz") is not None:
        converted.pop("tz", None)  # a zone given with it wins
    return {**options, **converted}


def not_found(store: Store, name: str) -> EntryNotFoundError:
    """The error that no entry is named ``name``, offering the stored names closest to it
    (``make_report``: did you mean ``proj.make_report``?)."""
    try:
        hint = did_you_mean(name, store.names_like(name))
    except redis.RedisError:  # the entry is missing all the same; say that
        hint = ""
    return EntryNotFoundError(f"no entry named {shown(name)}{hint}")


def stored(store: Store, name: str) -> StoredEntry:
    found = store.load([check_name(name)])
    if not found:
        raise not_found(store, name)
    return found[0]


def readable(store: Store, name: str) -> Entry:
    item = stored(store, name)
    if item.entry is None:
        raise EntryError(
            f"entry {shown(name)} is quarantined: {item.invalid}; its definition cannot be "
            "read, so delete it (and add it again, or let the next deploy restore it)"
        )
    return item.entry


def declared_in(store: Store, name: str, entry: Entry | None) -> str | None:
    """Where the entry is declared (``"code"``, ``"beat_schedule"``), or None."""
    if entry is None:
        return "code or beat_schedule" if store.is_declared(name) else None
    return {"code": "code", "config": "beat_schedule"}.get(entry.source)


def _may_change(store: Store, name: str, entry: Entry | None, force: bool, verb: str) -> None:
    where = declared_in(store, name, entry)
    if where is not None and not force:
        raise DeclaredEntryError(
            f"entry {shown(name)} is declared in {where}: the next deploy (a beat starting) "
            f"restores its declaration; to {verb} it anyway pass force=True (--force)"
        )


def _steered(store: Store, name: str, status: str) -> None:
    """Raise for what pause.lua answered instead of "ok"."""
    if status == "missing":
        raise not_found(store, name)
    if status != "ok":
        raise EntryError(
            f"entry {shown(name)} is {status.replace(': ', ' (', 1)}); update or delete repairs it"
        )


def warn_unknown_task(app: Celery, task: str, seen: set[str]) -> None:
    """Log once per task name (``seen`` holds those logged) when the app does not know it
    (a typo, or a task that only the workers' code defines), once its task modules are
    imported as a worker imports them."""
    if task in seen:
        return
    import_task_modules(app)
    try:
        known = task in app.tasks
    except Exception:  # an app that cannot finalize here: nothing to compare with
        return
    if not known:
        seen.add(task)
        logger.warning(
            "periodiq: task %r is not registered in app %r: check its name, or that the "
            "workers' code defines it (runs of an unknown task fail on the worker)",
            task,
            app.main,
        )


def build(runtime: Runtime, name: Any, task: Any, options: dict[str, Any]) -> Entry:
    """A runtime entry built from the keyword options of ``add()`` (no Redis)."""
    given = with_schedule(options, runtime.app)
    entry = build_entry(
        check_name(name),
        task_name(task),
        source="runtime",
        defaults=Defaults.of(runtime.settings),
        **given,
    )
    check_group(entry.name, entry.group, runtime.settings.group_limits)
    return entry


def add(store: Store, entry: Entry, audit: Audit | None = None) -> StoredEntry:
    """Write a new entry; refused when its one-off instant has passed or its name is taken."""
    refuse_past(entry, from_ms(store.now_ms()))
    (status,) = store.put("add", [entry], audit=audit)
    if status == "exists":
        raise EntryExistsError(f"an entry named {shown(entry.name)} already exists")
    return stored(store, entry.name)


def update(
    runtime: Runtime,
    name: str,
    force: bool,
    changes: dict[str, Any],
    audit: Audit | None = None,
) -> StoredEntry:
    """Change an entry's options (those of ``add()``): see ``Periodiq.update``."""
    store = runtime.store
    current = readable(store, name)
    _may_change(store, name, current, force, "update")
    changes = with_schedule(dict(changes), runtime.app)
    entry = changed_entry(current, dict(changes), Defaults.of(runtime.settings))
    if "group" in changes:
        check_group(entry.name, entry.group, runtime.settings.group_limits)
    if changes.get("at") is not None:  # a one-off kept as it was may well be past
        refuse_past(entry, from_ms(store.now_ms()))
    (status,) = store.put("update", [entry], audit=audit)
    if status == "missing":
        raise not_found(store, name)
    return stored(store, name)


def delete(store: Store, name: str, force: bool, audit: Audit | None = None) -> None:
    """Delete an entry and everything stored under its name, a damaged one too."""
    found = store.load([check_name(name)])
    _may_change(store, name, found[0].entry if found else None, force, "delete")
    if not store.remove([name], audit=audit):
        raise not_found(store, name)


def pause(
    store: Store,
    name: str,
    note: str | None,
    until_ms: int | None = None,
    audit: Audit | None = None,
) -> StoredEntry:
    """Stop an entry's ticks until it is resumed, or until ``until_ms`` (a beat then
    resumes it); ``note`` says why."""
    argument = store.audit_argument(audit)
    status = store.scripts.pause(check_name(name), note or "", until_ms, audit=argument)
    _steered(store, name, status)
    return stored(store, name)


def resume(store: Store, name: str, audit: Audit | None = None) -> StoredEntry:
    """Restart a paused entry from its next tick after now."""
    entry = readable(store, name)
    upcoming = next_tick_ms(entry, from_ms(store.now_ms()))
    next_ms, due_ms = (None, None) if upcoming is None else upcoming
    argument = store.audit_argument(audit)
    _steered(store, name, store.scripts.resume(name, next_ms, due_ms, audit=argument))
    return stored(store, name)


def trigger(runtime: Runtime, name: str, audit: Audit | None = None) -> str:
    """Run an entry now, outside its schedule; returns the task id of the run."""
    store = runtime.store
    entry = readable(store, name)
    now = from_ms(store.now_ms())
    plain = bool(is_plain(runtime.app, entry.task))
    limits = policy.now_limits(entry, now, runtime.settings.default_grace, plain)
    task_id = send(runtime.app, entry, None, manual=limits)
    store.published(name, "triggered", task_id, audit=audit)
    return task_id
