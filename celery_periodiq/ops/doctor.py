"""What ``periodiq(app).diagnose()`` and ``celery periodiq doctor`` check: each finding
about the schedule's health (Redis, scripts, beats, clock, broker, entries, alerts,
tasks, runs) as a :class:`Check`; nothing here raises. The checks of the entries are
in :mod:`~celery_periodiq.ops.doctor_entries`.
"""

from __future__ import annotations

import re
import time

import redis

from celery_periodiq.beat.stage_scripts import staged_messages
from celery_periodiq.config import redacted
from celery_periodiq.ops.checks import Check, Scope
from celery_periodiq.ops.doctor_entries import (
    DEFAULT_SAMPLE,
    ENTRY_CHECKS,
    WAITING_FLOOR,
    WAITING_INTERVALS,
    check_entries,
)
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.summary import index_report
from celery_periodiq.store.views import BeatInfo

__all__ = [
    "CLOCK_FAIL",
    "CLOCK_WARN",
    "DEFAULT_SAMPLE",
    "MIN_REDIS",
    "WAITING_FLOOR",
    "WAITING_INTERVALS",
    "Check",
    "Scope",
    "diagnose",
]

MIN_REDIS = (6, 2)
"""The oldest Redis the Lua scripts run on."""
CLOCK_WARN = 1.0
CLOCK_FAIL = 10.0
"""Seconds between this host's clock and Redis's that :meth:`Periodiq.diagnose` warns / fails at."""


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = re.match(r"\d+", part)
        parts.append(int(digits.group()) if digits else 0)
    return tuple(parts)


def diagnose(runtime: Runtime, sample: int | None = DEFAULT_SAMPLE) -> list[Check]:
    """Check what periodiq needs; never raises, every problem is a :class:`Check`.

    In order: Redis reachable and at least 6.2, the Lua scripts load, at
    least one live beat, this host's clock against Redis's, the broker
    reachable, no quarantined entries, every entry that should run due or in flight
    (one in neither would never run again), none overdue or failing, every entry's
    task known to the app, and no entry whose sent runs no worker started for
    several intervals, and the read side's indexes (what a scrape and a page read)
    built, of the right types, naming every entry. The entries are read in one
    pass, a page at a time: every one when ``sample`` is None or the schedule
    holds at most ``sample``, else every one a beat quarantined and about
    ``sample`` others drawn at random (the
    checks of the entries then say so, and carry their :class:`Scope`).
    """
    first = _check_redis(runtime)
    if first.status == "fail":
        unchecked = [
            Check(name, "skip", "not checked: Redis is unreachable")
            for name in ("scripts", "beats", "clock", *ENTRY_CHECKS)
        ]
        unread = Check("indexes", "skip", "not checked: Redis is unreachable")
        return [first, *unchecked[:3], _check_broker(runtime), *unchecked[3:], unread]
    checks = [
        first,
        _check_scripts(runtime),
        _check_beats(runtime),
        _check_clock(runtime),
        _check_broker(runtime),
    ]
    if runtime.settings.redis_url.startswith("sentinel://"):
        checks.insert(1, Check("sentinel", *runtime.store.sentinel_report()))
    replicas = _check_replicas(runtime)
    if replicas is not None:
        checks.insert(checks.index(first) + 1, replicas)
    try:
        entries = check_entries(runtime, sample)
    except redis.RedisError as error:
        problem = f"cannot read the entries: {error}"
        entries = [Check(name, "fail", problem) for name in ENTRY_CHECKS]
    return [*checks, *entries, _check_indexes(runtime, sample)]


def _check_indexes(runtime: Runtime, sample: int | None) -> Check:
    """The read side's indexes: built, of the right types, naming every entry; and the
    timed pauses' index, holding each timed pause (of ``sample`` paused entries)."""
    try:
        return Check("indexes", *index_report(runtime.store, sample))
    except redis.RedisError as error:
        return Check("indexes", "fail", f"cannot read the indexes: {error}")


def _check_replicas(runtime: Runtime) -> Check | None:
    """What ``periodiq_replica_acks`` can count on; None with no replica and no acks."""
    try:
        found = runtime.store.replica_report()
    except redis.RedisError as error:
        return Check("replicas", "warn", f"cannot read INFO replication: {error}")
    return None if found is None else Check("replicas", *found)


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
    cut_off = [f"{beat.host}:{beat.pid}" for beat in beats if not beat.publishing]
    if len(cut_off) == len(beats):
        return Check(
            "beats", "fail", f"{found}; none can reach the broker: nothing is sent meanwhile"
        )
    if cut_off:
        return Check(
            "beats",
            "warn",
            f"{found}; cannot reach the broker, the others claim their share: "
            f"{', '.join(sorted(cut_off))}",
        )
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
    staged, most = (
        staged_messages(runtime.app, runtime.settings.key_prefix),
        runtime.settings.stage_max,
    )
    if not staged:
        return Check("broker", "ok", f"broker reachable at {where}")
    detail = (
        f"broker reachable at {where}; {staged} messages staged for their instant (at most {most})"
    )
    return Check("broker", "warn" if staged >= 0.9 * most else "ok", detail)
