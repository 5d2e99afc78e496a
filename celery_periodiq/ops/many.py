"""Deleting and running many entries at once, as the dashboard's and the admin's bulk
actions do, and what a change of many entries did (:class:`BulkResult`, which
:mod:`celery_periodiq.ops.pauses` returns too): a selection
(:func:`~celery_periodiq.ops.pauses.select`) deleted in one
script call per partition per ``periodiq_batch_size``, or run now with one broker
connection and the runs recorded in pipelines, not one round trip per entry.

The functions run inside the caller's
:meth:`Runtime.guard <celery_periodiq.runtime.Runtime.guard>`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from celery_periodiq.beat.publish import send
from celery_periodiq.beat.publish_errors import broker_failure
from celery_periodiq.errors import BrokerUnavailableError, DeclaredEntryError, MessageError
from celery_periodiq.model import policy
from celery_periodiq.model.plan import from_ms
from celery_periodiq.ops.steer import declared_in, some_names
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.store import Store
from celery_periodiq.worker.plain import is_plain

__all__ = ["CHUNK", "BulkResult", "delete_many", "trigger_many"]

CHUNK = 500
"""Runs sent in one round trip to the broker by :func:`trigger_many` (kombu 5.7+)."""


class BulkResult(list[str]):
    """What a change of many entries did: the names changed, in the order selected (a
    ``list``), and in :attr:`skipped` the others selected, each with why it was left as
    it was (``"paused already"``, ``"not paused"``, ``"deleted meanwhile"``, ...)."""

    skipped: dict[str, str]
    """The entries selected but not changed: name -> why."""
    task_ids: dict[str, str]
    """For :meth:`~celery_periodiq.api.Periodiq.trigger_many`: name -> the task id of its run."""

    def __init__(
        self,
        done: Iterable[str] = (),
        skipped: dict[str, str] | None = None,
        task_ids: dict[str, str] | None = None,
    ) -> None:
        super().__init__(done)
        self.skipped = skipped or {}
        self.task_ids = task_ids or {}

    def __repr__(self) -> str:
        return f"BulkResult({list(self)!r}, skipped={self.skipped!r})"


def delete_many(
    store: Store, names: list[str], force: bool, audit: Audit | None = None
) -> BulkResult:
    """Delete the entries ``names`` and everything stored under each, each recorded by
    ``audit``; without ``force``, none when one of them is declared in code or
    beat_schedule.

    Raises:
        DeclaredEntryError: without ``force``, some are declared (nothing is deleted).
    """
    if not force:
        declared = [
            item.name for item in store.load(names) if declared_in(store, item.name, item.entry)
        ]
        if declared:
            raise DeclaredEntryError(
                f"{some_names(declared)} {'is' if len(declared) == 1 else 'are'} declared in "
                "code or beat_schedule: the next deploy (a beat starting) restores the "
                "declarations; to delete them anyway pass force=True (nothing was deleted)"
            )
    removed = set(store.remove(names, audit=audit))
    return BulkResult(
        [name for name in names if name in removed],
        {name: "deleted meanwhile" for name in names if name not in removed},
    )


def trigger_many(runtime: Runtime, names: list[str], audit: Audit | None = None) -> BulkResult:
    """Run each of ``names`` now, outside its schedule, over one broker connection (where
    kombu can, :data:`CHUNK` messages a round trip), each recorded by ``audit``; a
    quarantined entry, or one whose message cannot be encoded, is skipped and said why.

    Raises:
        BrokerUnavailableError: the broker failed; the runs sent before it are recorded
            and the message says how many.
    """
    store, app = runtime.store, runtime.app
    loaded = {item.name: item for item in store.load(names)}
    now = from_ms(store.now_ms())
    sent: list[tuple[str, str]] = []
    skipped: dict[str, str] = {}
    plain: dict[str, bool] = {}
    try:
        with app.producer_or_acquire() as producer:
            for start in range(0, len(names), CHUNK):
                chunk: list[tuple[str, str]] = []
                try:
                    with _batch(producer):  # sends what it buffered on leaving
                        for name in names[start : start + CHUNK]:
                            item = loaded.get(name)
                            if item is None or item.entry is None:
                                skipped[name] = "quarantined" if item else "deleted meanwhile"
                                continue
                            entry = item.entry
                            if entry.task not in plain:
                                plain[entry.task] = bool(is_plain(app, entry.task))
                            grace = runtime.settings.default_grace
                            limits = policy.now_limits(entry, now, grace, plain[entry.task])
                            try:
                                task_id = send(app, entry, None, producer, manual=limits)
                            except MessageError as error:
                                skipped[name] = f"its message cannot be sent: {error}"
                                continue
                            chunk.append((name, task_id))
                except BrokerUnavailableError:
                    raise
                except Exception as error:  # the buffer's flush: the broker's, if anyone's
                    failure = broker_failure(error, getattr(producer, "connection", None))
                    if failure is None:
                        raise
                    raise failure from error
                sent += chunk
    except BrokerUnavailableError as error:
        raise BrokerUnavailableError(
            f"{error}; {len(sent)} of the {len(names)} runs were sent before it failed"
        ) from error
    finally:
        store.published_many(sent, "triggered", audit)
    return BulkResult([name for name, _ in sent], skipped, dict(sent))


def _batch(producer: Any) -> contextlib.AbstractContextManager[Any]:
    """kombu's batch of ``producer`` (5.7 and later), or publishing one by one."""
    batch = getattr(producer, "batch", None)
    return batch(max_size=CHUNK) if batch else contextlib.nullcontext()
