"""A beat's declared entries, reconciled with Redis and with what other live beats declare.

A beat writes the entries declared in code and ``beat_schedule`` when it starts, after
Redis failed, and whenever the declaration sets of the live beats change (a beat of
another version of the code came or went). During a rolling deploy two versions run
side by side, so the rule is:

- an entry declared in code or config is removed only when no live beat declares it;
- a declaration set's *generation* is when it was first declared, so a deploy's new
  code is newer than the old, and an old pod restarting mid-deploy stays older;
- an older generation never overwrites a definition a newer one wrote while a beat
  of that one lives (put.lua), nor removes an entry while a beat of the generation
  that wrote it lives (remove.lua): both decided atomically in the entry's partition,
  whatever this beat's view of the others. Once the newer beats are gone (a rollback),
  the older definitions are written again;
- a view of the live beats taken less than a lease after Redis failed, or after the beat
  started (it may meet Redis as it comes back from an outage it never saw), is not
  trusted: their heartbeats may have run out while no beat could reach Redis. Until a
  lease has passed, a beat only writes its declared entries that are missing (Redis may
  have lost them, or they are new), and replaces and removes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery_periodiq.declare import registry
from celery_periodiq.model.entry import Entry
from celery_periodiq.protocol.audit import Audit
from celery_periodiq.store.beat_scripts import Pulse
from celery_periodiq.store.store import Store

__all__ = ["Declarations"]

logger = logging.getLogger("celery_periodiq.reconcile")

_CHUNK = 500


class Declarations:
    """What one beat declares, and when it must reconcile it again."""

    def __init__(self, store: Store, entries: list[Entry], beat_id: str = "") -> None:
        self.store = store
        self.entries = entries
        self.beat_id = beat_id
        """Who reconciles, as the entries' audit trails record it."""
        self.digest, self.names = registry.declaration_of(entries)
        self.generation: int | None = None
        """When this beat's declaration set was first declared (ms); None until it is."""
        self._live: frozenset[str] = frozenset()
        """The declaration sets of the live beats, as the last heartbeat saw them."""
        self._reconciled: frozenset[str] | None = None
        """The sets live when the last reconciliation began; None: reconcile again."""

    def heard(self, pulse: Pulse) -> bool:
        """Take a heartbeat's answer (from the heartbeat thread); True when the live
        declaration sets changed since the last reconciliation, or this beat's own set
        was lost from Redis: reconcile again."""
        self._live = frozenset(pulse.declarations.values())
        if self.generation is not None and not pulse.registered:
            self._reconciled = None  # declared again, with the generation it had
        return self.due()

    def audit(self) -> Audit:
        """This beat's writes as the audit trail records them: by its id, noting its
        declaration set and generation."""
        note = f"declaration set {self.digest[:12]}, generation {self.generation}"
        return Audit(self.beat_id, "reconcile", note)

    def due(self) -> bool:
        """Whether the live declaration sets changed since the last reconciliation."""
        return self._live != self._reconciled

    def reconcile(self, publish: Callable[[int], None], unsure: float = 0.0) -> float | None:
        """Declare this beat's set, write its entries, and remove the declared entries
        no live beat declares. ``publish(generation)`` tells every partition that a beat
        of that generation lives; it is called before anything is written with it.
        ``unsure``: seconds before the live beats can be told (Redis failed less than a
        lease ago); meanwhile only missing entries are written.

        Returns the seconds after which to reconcile again when a partition still held
        a generation whose beats are gone (one that stopped a moment ago), or the view
        of the live beats was not trusted yet; else None.

        Raises:
            redis.RedisError: Redis failed; nothing is lost by reconciling again.
        """
        seen = self._live
        self.generation = self.store.declare(self.digest, self.names, self.generation)
        publish(self.generation)
        if unsure > 0:
            return self._write_missing(unsure)
        statuses: dict[str, int] = {}
        newer: list[str] = []
        audit = self.audit()
        for start in range(0, len(self.entries), _CHUNK):
            chunk = self.entries[start : start + _CHUNK]
            written = self.store.put("reconcile", chunk, generation=self.generation, audit=audit)
            for entry, status in zip(chunk, written, strict=True):
                statuses[status] = statuses.get(status, 0) + 1
                if status == "runtime":
                    logger.warning(
                        "periodiq: entry %r exists as a runtime entry; its declaration is ignored",
                        entry.name,
                    )
                elif status == "newer":
                    newer.append(entry.name)
        newest, removed, kept = self._remove_undeclared()
        logger.info("periodiq: reconciled %d declared entries %s", len(self.entries), statuses)
        if newer:
            logger.info(
                "periodiq: %d declared entries keep the definition a newer deployment wrote "
                "while its beats run: %s",
                len(newer),
                ", ".join(sorted(newer)),
            )
        if removed:
            logger.warning(
                "periodiq: removed %d entries no longer declared in code or beat_schedule: %s",
                len(removed),
                ", ".join(removed),
            )
        self._reconciled = seen
        lagging = kept or (newer and (newest is None or newest <= self.generation))
        if not lagging:
            return None
        # A partition still holds the generation of beats that are gone (stopped
        # cleanly a moment ago): its copy runs out within a lease.
        self._reconciled = None
        lease = self.store.settings.claim_lease
        logger.info(
            "periodiq: %d declared entries wait for a beat that is gone to run out; "
            "reconciling again in %.1f s",
            len(kept) + len(newer),
            lease,
        )
        return lease

    def _write_missing(self, unsure: float) -> float:
        """Write the declared entries Redis lost ("add" leaves every other one as it is);
        returns when to reconcile in full."""
        created = 0
        for start in range(0, len(self.entries), _CHUNK):
            chunk = self.entries[start : start + _CHUNK]
            written = self.store.put("add", chunk, generation=self.generation, audit=self.audit())
            created += written.count("created")
        self._reconciled = None
        logger.info(
            "periodiq: this beat started or Redis failed less than a lease ago, so the live "
            "beats cannot be told yet: %d missing declared entries written; the rest is "
            "reconciled in %.1f s",
            created,
            unsure,
        )
        return unsure

    def _remove_undeclared(self) -> tuple[int | None, list[str], list[str]]:
        """Remove the declared entries that no live beat declares (read afresh now);
        returns the newest live generation, the names removed and those kept."""
        beats = self.store.beats()
        sets = self.store.declaration_sets(beat.declared for beat in beats if beat.declared)
        wanted = set(self.names)
        unknown = False
        for beat in beats:
            found = sets.get(beat.declared)
            if found is not None and found.names is not None:
                wanted |= set(found.names)
                continue
            unknown = True
            if found is None and beat.declared:  # it is starting: it removes what it may
                logger.info("periodiq: beat %s has not declared its entries yet", beat.id)
            else:
                logger.warning(
                    "periodiq: cannot tell what beat %s declares (%s); declared entries are "
                    "not removed while it lives",
                    beat.id,
                    found.problem if found else "it runs a version that does not say",
                )
        generations = [found.generation for found in sets.values() if found.generation]
        newest = max(generations, default=None)
        if unknown:
            return newest, [], []
        vanished = sorted(self.store.declared_names() - wanted)
        if not vanished:
            return newest, [], []
        removed, kept = self.store.remove_declared(vanished, self.audit())
        return newest, removed, kept
