"""doctor's checks of the entries themselves (quarantined, neither due nor in flight,
overdue or failing, unknown task, sent runs nobody started), made in one pass over the
entries, a page at a time: every entry, or on a schedule larger than the sample the
quarantined ones and a random sample. Each check is a :class:`Finding` that sees every
page and then says what it found; a new one joins :data:`FINDINGS`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from celery_periodiq.errors import shown
from celery_periodiq.model import policy
from celery_periodiq.model.plan import from_ms
from celery_periodiq.ops.checks import Check, Scope
from celery_periodiq.runtime import Runtime
from celery_periodiq.store import walk
from celery_periodiq.store.store import Store
from celery_periodiq.store.unscheduled import (
    claim_keys_report,
    looks_unscheduled,
    unscheduled,
)
from celery_periodiq.store.views import StoredEntry
from celery_periodiq.worker.task import PeriodicTask
from celery_periodiq.worker.task_modules import import_task_modules

__all__ = [
    "DEFAULT_SAMPLE",
    "ENTRY_CHECKS",
    "FINDINGS",
    "WAITING_FLOOR",
    "WAITING_INTERVALS",
    "Finding",
    "check_entries",
]

DEFAULT_SAMPLE = 10_000
"""How many entries :meth:`Periodiq.diagnose` reads by default: a schedule up to this
size is read whole, a larger one sampled."""
WAITING_INTERVALS = 3
WAITING_FLOOR = 10.0
"""A sent run that no worker started within this many intervals (and at least this many
seconds) makes :meth:`Periodiq.diagnose` warn."""
_PAGE = 500


class _Few:
    """How many names a check found, and the first few of them by name."""

    def __init__(self, shown: int) -> None:
        self.shown = shown
        self.count = 0
        self._kept: list[tuple[str, str]] = []

    def add(self, name: str, label: str) -> None:
        self.count += 1
        self._kept.append((name, label))
        if len(self._kept) > 8 * self.shown:
            self._kept = sorted(self._kept)[: self.shown]

    def text(self) -> str:
        """``a, b, c`` or ``a, b, c and 7 more``: a list that stays one readable line."""
        labels = [label for _, label in sorted(self._kept)[: self.shown]]
        more = self.count - len(labels)
        return ", ".join(labels) + (f" and {more} more" if more > 0 else "")


class Finding(Protocol):
    """One check of the entries: sees each page read, then says what it found."""

    def see(self, page: list[StoredEntry]) -> None: ...

    def check(self, scope: Scope) -> Check: ...


class _Quarantined:
    def __init__(self, context: _Context) -> None:
        self.bad = _Few(3)
        self.seen = 0

    def see(self, page: list[StoredEntry]) -> None:
        self.seen += len(page)
        for item in page:
            if item.invalid:
                self.bad.add(item.name, f"{item.name} ({item.invalid})")

    def check(self, scope: Scope) -> Check:
        if self.bad.count:
            noun = "entry is" if self.bad.count == 1 else "entries are"
            detail = f"{self.bad.count} {noun} quarantined: {self.bad.text()}"
            return Check("entries", "fail", scope.said(detail), scope)
        if scope.sampled:
            return Check("entries", "ok", scope.said("none quarantined"), scope)
        noun = "entry" if self.seen == 1 else "entries"
        return Check("entries", "ok", f"{self.seen} {noun}, none quarantined", scope)


class _Unscheduled:
    def __init__(self, context: _Context) -> None:
        self.context = context
        self.lost = _Few(5)

    def see(self, page: list[StoredEntry]) -> None:
        looked = [item for item in page if looks_unscheduled(item)]
        for name in unscheduled(self.context.store, looked) if looked else ():
            self.lost.add(name, name)

    def check(self, scope: Scope) -> Check:
        said = claim_keys_report(self.context.store)
        if self.lost.count:
            noun = "entry is" if self.lost.count == 1 else "entries are"
            said.append(
                f"{self.lost.count} {noun} neither due nor in flight, so no beat will run "
                f"them again: {self.lost.text()}"
            )
        if said:
            detail = "; ".join(said) + " (doctor --reindex repairs them)"
            return Check("due", "fail", scope.said(detail, short=True), scope)
        detail = "every entry that should run is due or in flight"
        return Check("due", "ok", scope.said(detail, short=True), scope)


class _Alerts:
    def __init__(self, context: _Context) -> None:
        self.overdue, self.failing = _Few(3), _Few(3)

    def see(self, page: list[StoredEntry]) -> None:
        for item in page:
            if item.overdue_since:
                self.overdue.add(item.name, item.name)
            if item.failing_since:
                self.failing.add(item.name, item.name)

    def check(self, scope: Scope) -> Check:
        found = [
            f"{names.count} {kind}: {names.text()}"
            for kind, names in (("overdue", self.overdue), ("failing", self.failing))
            if names.count
        ]
        if not found:
            detail = "no entry is overdue or failing"
            return Check("alerts", "ok", scope.said(detail, short=True), scope)
        return Check("alerts", "fail", scope.said("; ".join(found), short=True), scope)


class _Tasks:
    def __init__(self, context: _Context) -> None:
        self.context = context
        self.unknown = _Few(5)

    def see(self, page: list[StoredEntry]) -> None:
        tasks = self.context.tasks
        for item in page:
            if tasks is not None and item.entry is not None and item.entry.task not in tasks:
                label = f"{item.name} ({item.entry.task})"
                self.unknown.add(label, label)

    def check(self, scope: Scope) -> Check:
        if self.context.tasks is None:
            return Check("tasks", "skip", "not checked: the app's tasks could not be imported")
        if self.unknown.count:
            detail = (
                f"app {shown(self.context.app_name)} does not know the task of "
                f"{self.unknown.text()}: a typo, or a task only the workers' code defines "
                "(runs of a task no worker knows fail)"
            )
            return Check("tasks", "warn", scope.said(detail, short=True), scope)
        detail = "every entry's task is registered in the app"
        return Check("tasks", "ok", scope.said(detail, short=True), scope)


class _Runs:
    def __init__(self, context: _Context) -> None:
        self.context = context
        self.waiting, self.unguarded = _Few(5), _Few(5)

    def see(self, page: list[StoredEntry]) -> None:
        tasks, now_ms = self.context.tasks or {}, self.context.now_ms
        for item in page:
            since = item.state.get("waiting_since")
            if item.entry is None or not since or not since.isdigit():
                continue
            interval = policy.interval_at(item.entry.parsed_schedule(), from_ms(int(since)))
            if (now_ms - int(since)) / 1000 <= max(
                WAITING_INTERVALS * (interval or 0.0), WAITING_FLOOR
            ):
                continue
            task = tasks.get(item.entry.task)
            if task is not None and not isinstance(task, PeriodicTask):
                self.unguarded.add(item.name, f"{item.name} ({item.entry.task})")
            else:
                queue = item.entry.options.get("queue") or self.context.default_queue
                self.waiting.add(item.name, f"{item.name} (queue {queue})")

    def check(self, scope: Scope) -> Check:
        if not self.waiting.count and not self.unguarded.count:
            detail = "every entry's sent runs were started by a worker"
            return Check("runs", "ok", scope.said(detail, short=True), scope)
        found = []
        if self.waiting.count:
            found.append(
                f"runs of {self.waiting.text()} were sent but no worker started one for "
                f"{WAITING_INTERVALS} intervals: is a worker consuming that queue? is the task "
                "a PeriodicTask (only those record that they started)?"
            )
        if self.unguarded.count:
            found.append(
                f"the tasks of {self.unguarded.text()} are not PeriodicTasks: their runs are "
                "not guarded, and periodiq cannot see them start (use @periodic or "
                "base=PeriodicTask)"
            )
        return Check("runs", "warn", scope.said("; ".join(found), short=True), scope)


@dataclass(frozen=True, slots=True)
class _Context:
    """What the findings need besides the entries."""

    tasks: dict[str, Any] | None
    """The app's tasks by name; None when they cannot be imported here."""
    app_name: str | None
    default_queue: str
    now_ms: int
    store: Store


FINDINGS: list[Callable[[_Context], Finding]] = [_Quarantined, _Unscheduled, _Alerts, _Tasks, _Runs]
"""The entry checks, in the order doctor shows them."""
ENTRY_CHECKS = ("entries", "due", "alerts", "tasks", "runs")
"""Their names, in that order."""


def check_entries(runtime: Runtime, sample: int | None) -> list[Check]:
    """The entry checks, from one pass over the entries (all of them when ``sample`` is
    None or the schedule holds at most ``sample``, else a sample); a Redis error
    raises."""
    store = runtime.store
    context = _Context(
        _tasks(runtime),
        runtime.app.main,
        runtime.app.conf.task_default_queue,
        store.now_ms(),
        store,
    )
    findings = [make(context) for make in FINDINGS]
    total = store.count()
    sampled = sample is not None and total > sample
    checked = 0
    for page in _sampled(runtime, sample) if sample is not None and sampled else _every(runtime):
        checked += len(page)
        for finding in findings:
            finding.see(page)
    scope = Scope(checked, total if sampled else checked, sampled)
    return [finding.check(scope) for finding in findings]


def _every(runtime: Runtime) -> Iterator[list[StoredEntry]]:
    store = runtime.store
    for names in store.scan(_PAGE):
        yield store.load(names)


def _sampled(runtime: Runtime, sample: int) -> Iterator[list[StoredEntry]]:
    """The entries a beat quarantined (up to ``sample``), then about ``sample`` others
    drawn at random, a page at a time."""
    store = runtime.store
    names = walk.quarantined_names(store, sample) + walk.random_names(store, sample)
    names = list(dict.fromkeys(names))
    for start in range(0, len(names), _PAGE):
        yield store.load(names[start : start + _PAGE])


def _tasks(runtime: Runtime) -> dict[str, Any] | None:
    """The app's tasks by name, with its task modules imported as a worker imports
    them; None when the app cannot list them here."""
    if not import_task_modules(runtime.app):
        return None
    try:
        return dict(runtime.app.tasks)
    except Exception:  # an app that cannot finalize here: nothing to compare
        return None
