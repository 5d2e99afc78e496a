"""What ``periodiq(app).diagnose()`` and ``celery periodiq doctor`` check: each finding
about the schedule's health (Redis, scripts, beats, clock, broker, entries, alerts,
tasks, runs) as a :class:`Check`; nothing here raises.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import redis

from celery_periodiq.config import redacted
from celery_periodiq.errors import shown
from celery_periodiq.model import policy
from celery_periodiq.model.plan import from_ms
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.views import BeatInfo, StoredEntry
from celery_periodiq.worker.task import PeriodicTask

__all__ = [
    "CLOCK_FAIL",
    "CLOCK_WARN",
    "MIN_REDIS",
    "WAITING_FLOOR",
    "WAITING_INTERVALS",
    "Check",
    "diagnose",
]

MIN_REDIS = (6, 2)
"""The oldest Redis the Lua scripts run on."""
WAITING_INTERVALS = 3
WAITING_FLOOR = 10.0
"""A sent run that no worker started within this many intervals (and at least this many
seconds) makes :meth:`Periodiq.diagnose` warn."""
CLOCK_WARN = 1.0
CLOCK_FAIL = 10.0
"""Seconds between this host's clock and Redis's that :meth:`Periodiq.diagnose` warns / fails at."""


@dataclass(frozen=True, slots=True)
class Check:
    """One finding of :meth:`Periodiq.diagnose`."""

    name: str
    """``redis``, ``sentinel`` (behind Sentinel), ``scripts``, ``beats``, ``clock``,
    ``broker``, ``entries``, ``tasks`` or ``runs``."""
    status: str
    """``ok``, ``warn``, ``fail``, or ``skip`` (not checked: Redis is unreachable)."""
    detail: str
    """One sentence: what was found, and for a problem what it means."""


def _some(names: list[str], shown: int = 5) -> str:
    """``a, b, c`` or ``a, b, c and 7 more``: a list that stays one readable line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _check_entries(stored: list[StoredEntry]) -> Check:
    bad = [f"{item.name} ({item.invalid})" for item in stored if item.invalid]
    if bad:
        noun = "entry is" if len(bad) == 1 else "entries are"
        return Check("entries", "fail", f"{len(bad)} {noun} quarantined: {_some(bad, 3)}")
    noun = "entry" if len(stored) == 1 else "entries"
    return Check("entries", "ok", f"{len(stored)} {noun}, none quarantined")


def _check_alerts(stored: list[StoredEntry]) -> Check:
    overdue = [item.name for item in stored if item.overdue_since]
    failing = [item.name for item in stored if item.failing_since]
    if not overdue and not failing:
        return Check("alerts", "ok", "no entry is overdue or failing")
    parts = [
        f"{len(names)} {kind}: {_some(names, 3)}"
        for kind, names in (("overdue", overdue), ("failing", failing))
        if names
    ]
    return Check("alerts", "fail", "; ".join(parts))


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = re.match(r"\d+", part)
        parts.append(int(digits.group()) if digits else 0)
    return tuple(parts)


def diagnose(runtime: Runtime) -> list[Check]:
    """Check what periodiq needs; never raises, every problem is a :class:`Check`.

    In order: Redis reachable and at least 6.2, the Lua scripts load, at
    least one live beat, this host's clock against Redis's, the broker
    reachable, no quarantined entries, none overdue or failing, every entry's
    task known to the app, and no entry whose sent runs no worker started for several intervals.
    """
    first = _check_redis(runtime)
    if first.status == "fail":
        unchecked = [
            Check(name, "skip", "not checked: Redis is unreachable")
            for name in ("scripts", "beats", "clock", "entries", "alerts", "tasks", "runs")
        ]
        return [first, *unchecked[:3], _check_broker(runtime), *unchecked[3:]]
    checks = [
        first,
        _check_scripts(runtime),
        _check_beats(runtime),
        _check_clock(runtime),
        _check_broker(runtime),
    ]
    if runtime.settings.redis_url.startswith("sentinel://"):
        checks.insert(1, Check("sentinel", *runtime.store.sentinel_report()))
    try:
        stored = runtime.store.load()
        now_ms = runtime.store.now_ms()
    except redis.RedisError as error:
        problem = f"cannot read the entries: {error}"
        return [
            *checks,
            *(Check(name, "fail", problem) for name in ("entries", "alerts", "tasks", "runs")),
        ]
    return [
        *checks,
        _check_entries(stored),
        _check_alerts(stored),
        _check_tasks(runtime, stored),
        _check_runs(runtime, stored, now_ms),
    ]


def _check_redis(runtime: Runtime) -> Check:
    url = redacted(runtime.settings.redis_url)
    try:
        version = runtime.store.server_version()
    except redis.RedisError as error:
        return Check("redis", "fail", f"cannot reach Redis at {url}: {error}")
    if _version(version) < MIN_REDIS:
        needed = ".".join(map(str, MIN_REDIS))
        return Check("redis", "fail", f"Redis {version} at {url} is too old (needs {needed}+)")
    return Check("redis", "ok", f"Redis {version} at {url}")


def _check_scripts(runtime: Runtime) -> Check:
    try:
        names = runtime.store.load_scripts()
    except redis.RedisError as error:
        return Check("scripts", "fail", f"the Lua scripts do not load: {error}")
    return Check("scripts", "ok", f"{len(names)} Lua scripts load")


def _check_beats(runtime: Runtime) -> Check:
    try:
        beats = runtime.store.beats()
    except redis.RedisError as error:
        return Check("beats", "fail", f"cannot read the beats: {error}")
    if not beats:
        return Check("beats", "fail", "no live beat: nothing is being scheduled")
    hosts = ", ".join(sorted({f"{beat.host}:{beat.pid}" for beat in beats}))
    noun = "beat" if len(beats) == 1 else "beats"
    found = f"{len(beats)} live {noun} ({hosts})"
    try:
        mixed = _declaration_sets(runtime, beats)
    except redis.RedisError as error:
        return Check("beats", "warn", f"{found}; cannot read their declarations: {error}")
    if mixed:
        return Check("beats", "warn", f"{found}; {mixed}")
    return Check("beats", "ok", found)


def _declaration_sets(runtime: Runtime, beats: list[BeatInfo]) -> str | None:
    """What the live beats declare, when they do not all declare the same (a rolling
    deploy, or beats running different code): each set with its beats, newest first,
    and how many names differ; None when one set is live."""
    by_set: dict[str, list[str]] = {}
    for beat in beats:
        by_set.setdefault(beat.declared, []).append(f"{beat.host}:{beat.pid}")
    if len(by_set) < 2:
        return None
    stored = runtime.store.declaration_sets(digest for digest in by_set if digest)
    order = sorted(
        by_set, key=lambda digest: -(stored[digest].generation or 0) if digest in stored else 0
    )
    described = []
    for digest in order:
        found = stored.get(digest)
        label = (digest[:8] if digest else "a version that says nothing") + (
            "" if found is None or found.names is not None else f" (unreadable: {found.problem})"
        )
        described.append(f"{label} by {', '.join(sorted(by_set[digest]))}")
    names = [found.names for found in stored.values() if found.names is not None]
    every: set[str] = set().union(*names)
    common = set.intersection(*(set(declared) for declared in names)) if names else set()
    differ = len(every - common)
    redefined = sum(len({found[name] for found in names if name in found}) > 1 for name in every)
    return (
        f"{len(by_set)} declaration sets are live (a rolling deploy, or beats running "
        f"different code), newest first: {'; '.join(described)}; {differ} "
        f"{'name is' if differ == 1 else 'names are'} declared by some sets only, "
        f"{redefined} defined differently (the newest set's definitions win while its "
        "beats live)"
    )


def _check_clock(runtime: Runtime) -> Check:
    try:
        before = time.time()
        server = runtime.store.now_ms() / 1000
        after = time.time()
    except redis.RedisError as error:
        return Check("clock", "fail", f"cannot read the Redis clock: {error}")
    offset = (before + after) / 2 - server
    side = "ahead of" if offset >= 0 else "behind"
    detail = f"this host's clock is {abs(offset):.3f} s {side} Redis's"
    if abs(offset) < CLOCK_WARN:
        return Check("clock", "ok", detail)
    detail += " (schedules follow Redis's clock; workers here judge message expiry by theirs)"
    return Check("clock", "warn" if abs(offset) < CLOCK_FAIL else "fail", detail)


def _check_broker(runtime: Runtime) -> Check:
    try:
        with runtime.app.connection_for_write() as connection:
            where = redacted(connection.as_uri(include_password=True))
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
    # Any transport error is a finding to report, not a crash.
    except Exception as error:
        return Check("broker", "fail", f"cannot reach the broker: {error}")
    return Check("broker", "ok", f"broker reachable at {where}")


def _tasks(runtime: Runtime) -> dict[str, Any] | None:
    """The app's tasks by name, with its configured modules imported; None when the
    app cannot list them here."""
    try:
        runtime.app.loader.import_default_modules()
        return dict(runtime.app.tasks)
    except Exception:  # an app that cannot import its modules here: nothing to compare
        return None


def _check_tasks(runtime: Runtime, stored: list[StoredEntry]) -> Check:
    tasks = _tasks(runtime)
    if tasks is None:
        return Check("tasks", "skip", "not checked: the app's tasks could not be imported")
    unknown = sorted(
        f"{item.name} ({item.entry.task})"
        for item in stored
        if item.entry is not None and item.entry.task not in tasks
    )
    if unknown:
        return Check(
            "tasks",
            "warn",
            f"app {shown(runtime.app.main)} does not know the task of {_some(unknown)}: a typo, "
            "or a task only the workers' code defines (runs of a task no worker knows fail)",
        )
    return Check("tasks", "ok", "every entry's task is registered in the app")


def _check_runs(runtime: Runtime, stored: list[StoredEntry], now_ms: int) -> Check:
    tasks = _tasks(runtime) or {}
    waiting, unguarded = [], []
    for item in stored:
        since = item.state.get("waiting_since")
        if item.entry is None or not since or not since.isdigit():
            continue
        interval = policy.interval_at(item.entry.parsed_schedule(), from_ms(int(since)))
        limit = max(WAITING_INTERVALS * (interval or 0.0), WAITING_FLOOR)
        if (now_ms - int(since)) / 1000 <= limit:
            continue
        task = tasks.get(item.entry.task)
        queue = item.entry.options.get("queue") or runtime.app.conf.task_default_queue
        if task is not None and not isinstance(task, PeriodicTask):
            unguarded.append(f"{item.name} ({item.entry.task})")
        else:
            waiting.append(f"{item.name} (queue {queue})")
    if not waiting and not unguarded:
        return Check("runs", "ok", "every entry's sent runs were started by a worker")
    found = []
    if waiting:
        found.append(
            f"runs of {_some(waiting)} were sent but no worker started one for "
            f"{WAITING_INTERVALS} intervals: is a worker consuming that queue? is the task "
            "a PeriodicTask (only those record that they started)?"
        )
    if unguarded:
        found.append(
            f"the tasks of {_some(unguarded)} are not PeriodicTasks: their runs are not "
            "guarded, and periodiq cannot see them start (use @periodic or "
            "base=PeriodicTask)"
        )
    return Check("runs", "warn", "; ".join(found))
