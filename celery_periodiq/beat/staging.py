"""Staged release: a burst of ticks claimed, planned and rendered ahead of its instant,
staged in the broker's Redis, and pushed into the queues at the instant by one script
(stage_scripts.py; docs/deployment/scaling.md tells the whole of it).

Nothing staged is in a queue before its instant (the release pushes only instants the
beat's lower bound of the Redis clock has reached), each task id goes once, and a
message whose entry a writer changed after its claim is dropped (the partitions' change
log). The claims stay in flight until the instant; then the beat settles those released
and sends the usual way those that were not (over the cap, not stageable, decided at the
instant, lost by the broker). Any live beat releases; a takeover sends nothing released.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from celery_periodiq.beat import redis_publish
from celery_periodiq.beat.partitions import HORIZON_MS, Claimed
from celery_periodiq.beat.publish import Publisher
from celery_periodiq.beat.redis_publish import NotStagedError
from celery_periodiq.beat.settle import Settler
from celery_periodiq.beat.stage_horizon import Horizon
from celery_periodiq.beat.stage_scripts import (
    FIRST_CLAIM,
    RELEASE,
    STAGE,
    global_prefix,
    on_broker,
    whole_keys,
)
from celery_periodiq.beat.watchers import watched
from celery_periodiq.clock import elapsed
from celery_periodiq.errors import BrokerRefusedError
from celery_periodiq.model.plan import Tick
from celery_periodiq.protocol.headers import task_id_for
from celery_periodiq.protocol.keys import Partition
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.beat_scripts import Claim
from celery_periodiq.store.store import Store

__all__ = ["Stager"]

logger = logging.getLogger("celery_periodiq.dispatch")

# Messages moved one by one per release call, and how long an ids set is kept (ms).
_RELEASE_MOST = 5000
_RELEASED_KEPT_MS = 3_600_000
_ASK_EVERY = 1.0  # how often the broker is asked for the first staged instant (s)


@dataclass(slots=True)
class _Held:
    """A claim of this beat waiting for its instant."""

    claim: Claim
    got: Claimed
    settlement: Settlement
    staged: bool
    """Its messages wait in the broker; False: sent the usual way at the instant."""
    task_ids: list[str]


class Stager:
    """One beat's staged release: what it staged, and the scripts in its broker."""

    def __init__(
        self,
        store: Store,
        publisher: Publisher,
        settler: Settler,
        progress: Callable[[], None] = lambda: None,
    ) -> None:
        """``progress()``: the work under way with the broker advanced (the beat's watchdog
        takes a broker call without progress for half a lease for a hung broker)."""
        self.store = store
        self._progress = progress
        self.settings = store.settings
        self._publisher = publisher
        self._settler = settler
        self._prefix = f"{self.settings.key_prefix}:staged:"
        self._pending: dict[int, list[_Held]] = {}
        """Instant (ms) -> this beat's claims waiting for it."""
        self._held: set[tuple[str, int]] = set()
        """Those claims' ids and versions: claim.lua hands a claim back to its owner once
        its lease ran out (a claim of the same tick after its entry changed is another)."""
        self.horizon = Horizon(store, self.settings)
        self.usable: bool | None = None
        """Whether the broker is a Redis this beat can stage in (None: not known yet)."""
        self._theirs = math.inf
        """The first instant with a message staged by any beat, when last read (ms)."""
        self._asked = -math.inf
        self._reading = (0.0, 0.0)
        """A Redis clock reading (ms) from a claim's reply, and ``elapsed()`` after it."""
        self.staged_count = 0
        """Messages this beat staged (for the log and tests)."""
        self._released_to = -math.inf
        """The instant (ms) up to which this beat last released everything staged (and
        none staged before ``_theirs`` waits)."""

    def horizon_ms(self, parts: list[Partition], estimate_ms: float) -> int:
        """How far ahead to claim now (ms; 0: not at all; see :mod:`.stage_horizon`)."""
        watching = watched(self._publisher.app)  # its ticks are sent at their instant
        return 0 if self.usable is False or watching else self.horizon.ms(parts, estimate_ms)

    def can_stage(self, producer: Any) -> bool:
        """Whether ``producer``'s channel is kombu's Redis channel (learnt once)."""
        if self.usable is None:
            self.usable = redis_publish.usable(producer.channel)
        return self.usable

    def stage(
        self, ahead: list[tuple[Claim, Claimed]], producer: Any, check: Callable[[], None]
    ) -> list[tuple[int, Settlement]]:
        """Plan and render ``ahead`` (claims whose instant is ahead), stage their messages
        and keep the claims until then; returns the settlements to write now (nothing
        to send: a tick missed, an entry quarantined). ``check()`` raises unless the
        claims are still this beat's.

        Raises:
            BrokerUnavailableError: the broker failed (what was staged stays staged).
        """
        now: list[tuple[int, Settlement]] = []
        by_instant: dict[int, list[tuple[_Held, list[tuple[str, str]]]]] = {}
        started = elapsed()
        channel = producer.channel
        if not self.can_stage(producer) or watched(self._publisher.app):  # sent when due
            for claim, got in ahead:
                bare = _bare(claim)
                self._keep(_Held(claim, got, bare, False, []))
            return now
        with self._publisher.batch(producer):  # nothing is sent: _put stages instead
            self._render(ahead, producer, now, by_instant)
        check()  # stopped meanwhile: none of it may be this beat's any more
        client, prefix = whole_keys(channel), global_prefix(channel)
        stage = client.register_script(STAGE)
        for instant, items in by_instant.items():
            values: list[int | str] = []
            for held, rendered in items:
                if held.staged:
                    for task_id, (key, message) in zip(held.task_ids, rendered, strict=True):
                        values += (held.claim.claimed_ms, task_id, held.claim.name, prefix + key)
                        values.append(message)
            taken = 0
            if values:
                base = self._key(prefix, f"{instant}:")
                keys = [self._key(prefix, "at"), self._key(prefix, "count")]
                keys += [self._key(prefix, "claimed"), f"{base}queues", f"{base}names"]
                keys.append(f"{base}ids")
                try:
                    with on_broker():
                        taken = int(stage(keys, [instant, self.settings.stage_max, base, *values]))
                except BrokerRefusedError as error:  # out of memory: sent when due instead
                    logger.warning("periodiq: %d messages not staged: %s", len(values) // 5, error)
                self._progress()
                self.staged_count += taken
            left = taken
            for held, _ in items:
                if held.staged:
                    held.staged = left >= len(held.task_ids)
                    left -= min(left, len(held.task_ids))
                self._keep(held)
            # nobody looks at these claims again before their instant (and a lease)
            ids: dict[int, list[str]] = {}
            for held, _ in items:
                ids.setdefault(held.got.batch.partition, []).append(held.claim.id)
            self.store.hold(ids, instant + int(self.settings.claim_lease * 1000))
        if ahead:
            self.horizon.measured(elapsed() - started, len(ahead))
        return now

    def _render(
        self,
        ahead: list[tuple[Claim, Claimed]],
        producer: Any,
        now: list[tuple[int, Settlement]],
        by_instant: dict[int, list[tuple[_Held, list[tuple[str, str]]]]],
    ) -> None:
        """Plan and render each claim ahead: its messages by instant into ``by_instant``,
        its settlement into ``now`` when there is nothing to send."""
        channel = producer.channel
        for index, (claim, got) in enumerate(ahead):
            if index % 64 == 0:
                self._progress()  # rendering is work of its own, not a broker waited on
            if claim.running or claim.queued:  # whether it may run is decided at its instant
                bare = _bare(claim)
                self._keep(_Held(claim, got, bare, False, []))
                continue
            rendered: list[tuple[str, str]] = []
            sent: list[tuple[str, Tick]] = []
            self._publisher.staged = rendered
            try:
                with redis_publish.diverting(channel, rendered):
                    settlement = self._settler.settle(claim, producer, claim.due_ms, sent)
                staged = len(rendered) == len(sent)
            except NotStagedError:
                settlement = _bare(claim)
                staged, sent = False, []
            finally:
                self._publisher.staged = None
            if staged and not sent:  # nothing to send: settled now
                now.append((got.batch.partition, settlement))
                continue
            held = _Held(claim, got, settlement, staged, [tick.task_id for _, tick in sent])
            by_instant.setdefault(claim.due_ms, []).append((held, rendered))

    def _keep(self, held: _Held) -> None:
        self._pending.setdefault(held.claim.due_ms, []).append(held)
        self._held.add((held.claim.id, held.claim.version))

    @property
    def next_at(self) -> float:
        """The first instant (ms) with something staged, as last read (inf: none)."""
        return min(min(self._pending, default=math.inf), self._theirs)

    def due(self, moment: float) -> bool:
        """Whether a pass should look at the staged messages: one is due by ``moment``,
        or the broker was last asked more than a second ago (another beat may stage)."""
        if self.next_at <= moment:
            return True
        if self.usable is False or not self.settings.stage_horizon:
            return False
        return elapsed() - self._asked >= _ASK_EVERY

    def refresh(self, channel: Any) -> int | None:
        """Read the first instant with something staged, any beat's, from the broker
        (None: this beat's only)."""
        if channel is not None:
            prefix = global_prefix(channel)
            with on_broker():
                first = whole_keys(channel).zrange(self._key(prefix, "at"), 0, 0, withscores=True)
            self._theirs = float(first[0][1]) if first else math.inf
        self._asked = elapsed()
        moment = self.next_at
        return None if math.isinf(moment) else int(moment)

    def sort(
        self, batches: list[Claimed], producer: Any, sleep_until: Callable[[float], None]
    ) -> tuple[list[Claimed], list[tuple[Claim, Claimed]], list[tuple[int, Settlement]]]:
        """Release what is staged for now (any beat's) and sort this pass's claims: those
        to send now (with this beat's staged claims that were not released), those ahead
        of their instant, to stage, and the settlements to write."""
        now, ahead = self.split(batches)
        resend, taken = self.release_due(producer, batches, sleep_until)
        now, written = self._released_already(now, producer)  # after what was due went out
        return now + resend, ahead, written + taken

    def _released_already(
        self, now: list[Claimed], producer: Any
    ) -> tuple[list[Claimed], list[tuple[int, Settlement]]]:
        """Of the claims taken over from another beat, those whose staged message a
        release pushed are settled, planned as of their instant, and not sent again."""
        # an instant not released yet: its ids set holds what is staged, not released
        released = max(self._released_to, self._theirs - 1)
        taken = [
            (claim, got)
            for got in now
            for claim in got.batch.claims
            if claim.taken and claim.due_ms <= released
        ]
        if not taken or not self.can_stage(producer):
            return now, []
        channel = producer.channel
        prefix = global_prefix(channel)
        pipe = whole_keys(channel).pipeline(transaction=False)
        for claim, _ in taken:
            task_id = task_id_for(self.settings.key_prefix, claim.name, claim.nominal_ms)
            pipe.sismember(self._key(prefix, f"{claim.due_ms}:ids"), task_id)
        with on_broker():
            found = pipe.execute()
        self._progress()
        done: set[str] = set()
        written: list[tuple[int, Settlement]] = []
        for (claim, got), hit in zip(taken, found, strict=True):
            if not hit:
                continue
            rendered: list[tuple[str, str]] = []
            self._publisher.staged = rendered
            try:
                with redis_publish.diverting(channel, rendered):  # rendered, not sent
                    settlement = self._settler.settle(claim, producer, claim.due_ms, [])
            except NotStagedError:
                continue
            finally:
                self._publisher.staged = None
            done.add(claim.id)
            written.append((got.batch.partition, settlement))
        if done:
            logger.info(
                "periodiq: %d claims taken over were released already; not sent again",
                len(done),
            )
        kept = [
            got._replace(
                batch=replace(got.batch, claims=[c for c in got.batch.claims if c.id not in done])
            )
            for got in now
        ]
        return kept, written

    def split(self, batches: list[Claimed]) -> tuple[list[Claimed], list[tuple[Claim, Claimed]]]:
        """The claims to send now, and those whose instant is more than a few ms ahead."""
        now: list[Claimed] = []
        ahead: list[tuple[Claim, Claimed]] = []
        for got in batches:
            far = got.clock + HORIZON_MS
            claims = [
                claim for claim in got.batch.claims if (claim.id, claim.version) not in self._held
            ]
            later = [claim for claim in claims if claim.due_ms > far]
            if later or len(claims) < len(got.batch.claims):
                ahead += [(claim, got) for claim in later]
                soon = [claim for claim in claims if claim.due_ms <= far]
                got = got._replace(batch=replace(got.batch, claims=soon))
            now.append(got)
        return now, ahead

    def release_due(
        self, producer: Any, batches: list[Claimed], sleep_until: Callable[[float], None]
    ) -> tuple[list[Claimed], list[tuple[int, Settlement]]]:
        """When an instant with something staged is due within a few ms, wait for it and
        :meth:`release` it. The Redis clock is read from a claim's reply (``batches``, or
        an earlier one): a lower bound, so that the wait never ends before the instant.

        Raises:
            redis.RedisError: the broker's or the schedule's Redis failed.
        """
        for got in batches:
            if got.clock - got.received_at * 1000 > self._reading[0] - self._reading[1] * 1000:
                self._reading = (got.clock, got.received_at)
        channel = producer.channel if self.can_stage(producer) else None
        instant = self.refresh(channel)
        clock, received = self._reading
        if instant is None or not received:
            return [], []
        lower = clock + (elapsed() - received) * 1000
        if instant > lower + HORIZON_MS:
            return [], []
        sleep_until(received + (instant - clock) / 1000)  # never before it
        return self.release(int(clock + (elapsed() - received) * 1000), channel)

    def release(
        self, now_ms: int, channel: Any | None
    ) -> tuple[list[Claimed], list[tuple[int, Settlement]]]:
        """Push every message staged for an instant up to ``now_ms`` into its queue (any
        beat's), then take this beat's claims of those instants: returns the claims to
        send the usual way now, and the settlements to write.

        Raises:
            redis.RedisError: the broker's or the schedule's Redis failed.
        """
        # only changes after the earliest claim of what is released can drop a message
        due = [held for at, items in self._pending.items() if at <= now_ms for held in items]
        since = min((held.claim.claimed_ms for held in due), default=math.inf)
        if channel is None:  # not a Redis broker: nothing was staged
            changed = {} if math.isinf(since) else self.store.changed_since(int(since) - 1)
            return self._take(now_ms, channel, "", changed)
        prefix = global_prefix(channel)
        keys = [self._key(prefix, "at"), self._key(prefix, "count"), self._key(prefix, "claimed")]
        client = whole_keys(channel)
        with on_broker():
            earliest = int(client.register_script(FIRST_CLAIM)(keys[::2], [now_ms]))
        if earliest == 0:  # staged by a version that did not say: as far back as may be
            earliest = now_ms - int(self.settings.stage_horizon * 1000) - 60_000
        since = min(since, math.inf if earliest < 0 else earliest)
        changed = {} if math.isinf(since) else self.store.changed_since(int(since) - 1)
        redecided = {} if math.isinf(since) else self.store.changed_since(int(since) - 1, True)
        if redecided:  # windows added over staged entries: left out, decided at the instant
            self._settler.windows.reread(self.store)
        release = client.register_script(RELEASE)
        args: list[int | str] = [now_ms, _RELEASE_MOST, json.dumps({**redecided, **changed})]
        args += [prefix + self._prefix, _RELEASED_KEPT_MS]
        pushed = dropped = 0
        while True:
            with on_broker():
                done = release(keys, args)
            self._progress()
            pushed, dropped = pushed + int(done[0]), dropped + int(done[1])
            if not int(done[2]):
                break
        self._released_to = now_ms
        if pushed or dropped:
            logger.info(
                "periodiq: released %d staged messages (%d dropped: their entries changed "
                "after they were staged)",
                pushed,
                dropped,
            )
        return self._take(now_ms, channel, prefix, changed)

    def _take(
        self, now_ms: int, channel: Any, prefix: str, changed: dict[str, int]
    ) -> tuple[list[Claimed], list[tuple[int, Settlement]]]:
        resend: dict[int, tuple[Claimed, list[Claim]]] = {}
        settle: list[tuple[int, Settlement]] = []
        for instant in sorted(moment for moment in self._pending if moment <= now_ms):
            held = self._pending.pop(instant)
            self._held.difference_update((item.claim.id, item.claim.version) for item in held)
            # a tick claimed again after its entry changed: its newest claim stands for it
            newest: dict[str, int] = {}
            for item in held:
                newest[item.claim.id] = max(newest.get(item.claim.id, 0), item.claim.version)
            held = [item for item in held if item.claim.version == newest[item.claim.id]]
            released_key = self._key(prefix, f"{instant}:ids")
            ids = [task_id for item in held if item.staged for task_id in item.task_ids]
            with on_broker():
                hits = whole_keys(channel).smismember(released_key, ids) if ids else []
            found = dict(zip(ids, hits, strict=True))
            self._progress()
            for item in held:
                claim, partition = item.claim, item.got.batch.partition
                if changed.get(claim.name, -1) > claim.claimed_ms:
                    # changed since its claim: the writer scheduled it afresh
                    settle.append((partition, _bare(claim)))
                elif item.staged and all(found.get(task_id) for task_id in item.task_ids):
                    settle.append((partition, item.settlement))
                else:  # never staged, or lost with the broker's data: sent now
                    _, claims = resend.setdefault(id(item.got), (item.got, []))
                    claims.append(claim)
        # an earlier run unfinished or waiting at the claim: as it is now, at the instant
        named = [c.name for _, claims in resend.values() for c in claims if c.running or c.queued]
        markers = self.store.markers(named, now_ms) if named else {}
        again = [
            got._replace(batch=replace(got.batch, claims=[_marked(c, markers) for c in claims]))
            for got, claims in resend.values()
        ]
        return again, settle

    def _key(self, prefix: str, what: object) -> str:
        return f"{prefix}{self._prefix}{what}"


def _bare(claim: Claim) -> Settlement:
    """The settlement of a claim that sends nothing (its next tick is decided elsewhere)."""
    return Settlement(claim.id, claim.name, claim.version, claim.inc)


def _marked(claim: Claim, markers: dict[str, tuple[bool, bool]]) -> Claim:
    if claim.name not in markers:
        return claim
    running, queued = markers[claim.name]
    return claim._replace(running=running, queued=queued)
