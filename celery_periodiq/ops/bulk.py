"""``Periodiq.add_many``: many runtime entries built and checked as one batch (every
bad one listed by position, nothing written while one is bad), then written in
pipelined batches.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from celery_periodiq.errors import EntryError, EntryExistsError, shown
from celery_periodiq.model.build import EntryBuilder, refuse_past, task_name
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.options import NAMES
from celery_periodiq.model.plan import from_ms
from celery_periodiq.model.policy import Defaults
from celery_periodiq.ops.steer import check_name, some_names, with_schedule
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.store import Store

__all__ = ["TAKEN", "add_many", "build_many"]

TAKEN = frozenset({*NAMES, "schedule"})
_ALLOWED = "name, task, schedule and the options of add: " + ", ".join(NAMES)


def build_many(runtime: Runtime, entries: Iterable[dict[str, Any]]) -> list[Entry]:
    """The runtime entries of ``entries``, built and checked; no Redis. The first half of
    :meth:`Periodiq.add_many <celery_periodiq.api.Periodiq.add_many>`, whose docstring
    has the arguments and errors."""
    built, problems = [], []
    builder = EntryBuilder(source="runtime", defaults=Defaults.of(runtime.settings))
    for position, options in enumerate(entries):
        try:
            if not isinstance(options, dict):
                raise EntryError(f"{shown(options)} is not a dict of options")
            given = dict(options)
            name, task = given.pop("name", None), given.pop("task", None)
            unknown = sorted(map(str, set(given) - TAKEN))
            if unknown:
                raise EntryError(f"unknown option {shown(unknown[0])} (allowed: {_ALLOWED})")
            given = with_schedule(given, runtime.app)
            built.append(builder.build(check_name(name), task_name(task), given))
        except (EntryError, TypeError) as error:
            problems.append(f"#{position}: {error}")
    names = [entry.name for entry in built]
    twice = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    problems += [f"name {shown(name)} is given twice" for name in twice[:10]]
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise EntryError(
            f"{len(problems)} bad entries, nothing written: " + "; ".join(problems[:10]) + more
        )
    return built


def add_many(store: Store, built: list[Entry], audit: Audit | None = None) -> list[str]:
    """Write the entries :func:`build_many` built, in pipelined batches, inside the
    caller's guard: the second half of
    :meth:`Periodiq.add_many <celery_periodiq.api.Periodiq.add_many>`."""
    if any(entry.form == "at" for entry in built):
        now = from_ms(store.now_ms())
        past = []
        for position, entry in enumerate(built):
            try:
                refuse_past(entry, now)
            except EntryError as error:
                past.append(f"#{position}: {error}")
        if past:
            raise EntryError(f"{len(past)} bad entries, nothing written: " + "; ".join(past[:10]))
    names = [entry.name for entry in built]
    taken = store.existing(names)
    if taken:
        raise EntryExistsError(f"entries exist already: {some_names(taken)}")
    statuses = store.put("add", built, audit=audit)
    return [name for name, status in zip(names, statuses, strict=True) if status == "created"]
