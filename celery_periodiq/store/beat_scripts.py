"""The beat's scripts: claim.lua and ack.lua (the pass over due ticks), beat.lua (the
heartbeat), declare.lua (declaration sets) and alerts.lua (alert transitions to send),
with their typed results."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import redis

from celery_periodiq.protocol.keys import Partition
from celery_periodiq.protocol.records import Settlement
from celery_periodiq.store.scripts import INDEXES, ScriptCalls, ScriptKeys, _warn_now_and_then

__all__ = [
    "ACK",
    "ALERTS",
    "BEAT",
    "CLAIM",
    "DECLARE",
    "RELEASE",
    "Acked",
    "BeatScripts",
    "Claim",
    "ClaimBatch",
    "Pulse",
]

DECLARATION_TTL_MS = 24 * 3600 * 1000
"""How long a declaration set (and its generation) is kept after its last beat: an old
version's beat that comes back within it is still older than the code deployed since."""

CLAIM = ScriptKeys(
    "claim",
    (
        "due",
        "inflight",
        "ticks",
        "entries",
        "state",
        "quarantine",
        "alive",
        "alerts",
        "stats",
        *INDEXES,
        "pauses",
        "audit",
        "audit_newest",
    ),
)
ACK = ScriptKeys(
    "ack",
    ("due", "inflight", "ticks", "entries", "state", "quarantine"),
    each=("history:name", "failures:name"),
    tail=("alerts", "stats", *INDEXES, "audit", "audit_newest"),
)
BEAT = ScriptKeys("beat", ("beats", "beat:beat_id", "declarers", "declaration:declared", "muted"))
RELEASE = ScriptKeys("release", ("inflight", "ticks", "alive"))
DECLARE = ScriptKeys("declare", ("declaration:digest", "generation"))
ALERTS = ScriptKeys("alerts", ("alerts", "sending"))


class Claim(NamedTuple):
    """One claimed tick, as claim.lua recorded it (a tuple: the beat decodes one per tick,
    and a frozen dataclass's fields cost an ``object.__setattr__`` each)."""

    id: str
    name: str
    nominal_ms: int
    due_ms: int
    """When it is due (jitter applied); may be a little after the claim (claimed ahead)."""
    claimed_ms: int
    running: bool
    queued: bool
    version: int
    prev_ms: int | None
    """The entry's previous scheduled tick; None when unknown."""
    taken: int
    definition: str | None
    """The entry's JSON at claim time; None when the entry has vanished."""
    rebuilt: bool = False
    """The entry's state had no readable next tick: ``nominal_ms`` is its due instant,
    which the beat must check against the schedule."""
    runs: int = 0
    """Ticks the beat had published for the entry before this claim (what ``max_runs``
    counts)."""
    owed: int = 0
    """Ticks folded into the entry's next run by earlier claims (it stands for them)."""
    inc: str | None = None
    """The entry's incarnation when it was claimed (None: written before there were)."""


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """What one claim.lua call returned, for one partition."""

    partition: int
    now_ms: int
    now_us: int
    """Microseconds of the Redis clock past ``now_ms``."""
    next_due_ms: int | None
    next_recheck_ms: int | None
    claims: list[Claim]
    vanished: list[str] = field(default_factory=list)
    """Due entries whose definition was gone (deleted outside periodiq)."""
    ended: list[str] = field(default_factory=list)
    """Entries whose timed pause came to its end, for the caller to resume."""


def _decode_claims(partition: int, raw: list[Any]) -> ClaimBatch:
    now, next_due, recheck, micros = (int(value) for value in raw[:4])
    notices = json.loads(raw[4]) if raw[4] else {}
    claims = []
    # every claim's JSON in one call: one each cost more than decoding them
    records = json.loads(f"[{','.join(raw[6::3])}]") if len(raw) > 5 else []
    for index, record in zip(range(5, len(raw), 3), records, strict=True):
        claims.append(
            Claim(
                id=raw[index],
                name=record["name"],
                nominal_ms=int(record["nominal"]),
                due_ms=int(record.get("due", record["nominal"])),
                claimed_ms=int(record["claimed"]),
                running=bool(record["running"]),
                queued=bool(record["queued"]),
                version=int(record["version"]),
                prev_ms=None if int(record.get("prev", -1)) < 0 else int(record["prev"]),
                taken=int(record.get("taken", 0)),
                definition=raw[index + 2] or None,
                rebuilt=bool(record.get("rebuilt", False)),
                runs=int(record.get("runs", 0)),
                owed=int(record.get("owed") or 0),
                inc=record.get("inc"),
            )
        )
    return ClaimBatch(
        partition=partition,
        now_ms=now,
        now_us=micros,
        next_due_ms=None if next_due < 0 else next_due,
        next_recheck_ms=None if recheck < 0 else recheck,
        claims=claims,
        vanished=list(notices.get("vanished") or []),
        ended=list(notices.get("ended") or []),
    )


class Acked(NamedTuple):
    """What ack.lua answered for settlements of claimed ticks."""

    settled: int
    """Settled: claims the caller still owned."""
    refused: int
    """Refused: another beat took the claims over (it holds them, or took them from the
    caller and settled them since). Those neither settled nor refused were settled
    already: by the caller's own earlier call whose reply it did not get."""


def _acked(reply: Any) -> Acked:
    settled, refused = reply
    return Acked(int(settled), int(refused))


def _summed(answers: Iterable[Acked]) -> Acked:
    settled = refused = 0
    for answer in answers:
        settled, refused = settled + answer.settled, refused + answer.refused
    return Acked(settled, refused)


@dataclass(frozen=True, slots=True)
class Pulse:
    """What a heartbeat (beat.lua) answered."""

    now_ms: int
    flag: bool
    """start: no other beat was alive; stop: no other beat is alive any more."""
    live: list[str]
    """The ids of the beats alive now."""
    declarations: dict[str, str] = field(default_factory=dict)
    """Each live beat's declaration set digest ("" for a beat that says none)."""
    registered: bool = False
    """This beat's declaration set is stored (False: declare it again)."""
    muted: frozenset[str] = frozenset()
    """The live beats that cannot publish (cut off from their broker): not in the ring."""

    @property
    def publishing(self) -> list[str]:
        """The live beats that can publish, among which the ring divides the partitions."""
        return [beat for beat in self.live if beat not in self.muted]


class BeatScripts(ScriptCalls):
    """The wrappers of claim.lua, ack.lua, beat.lua and declare.lua."""

    def claim(
        self,
        part: Partition,
        beat_id: str,
        batch: int,
        lease_ms: int,
        now_ms: int | None = None,
        horizon_ms: int = 0,
    ) -> ClaimBatch:
        """Claim up to ``batch`` of the partition's ticks due (or due within ``horizon_ms``)
        or orphaned. ``now_ms`` replaces the Redis clock (tests only)."""
        raw = self._run(
            CLAIM.script,
            CLAIM.keys(part),
            [
                beat_id,
                batch,
                lease_ms,
                "" if now_ms is None else now_ms,
                horizon_ms,
                self._audit_by(beat_id, "beat"),
            ],
        )
        return _decode_claims(part.index, raw)

    def claim_many(
        self,
        parts: list[Partition],
        beat_id: str,
        batch: int,
        lease_ms: int,
        now_ms: int | None = None,
        horizon_ms: int = 0,
    ) -> list[ClaimBatch]:
        """:meth:`claim` for several partitions in one round trip (a pipeline); one call
        after the other on a Redis Cluster, whose pipelines do not carry scripts."""
        args = [beat_id, batch, lease_ms, "" if now_ms is None else now_ms, horizon_ms]
        args.append(self._audit_by(beat_id, "beat"))
        if self.replica_acks:
            return self._replicated_claims(parts, args)
        if self._clustered or len(parts) < 2:
            return [
                self.claim(part, beat_id, batch, lease_ms, now_ms, horizon_ms) for part in parts
            ]
        pipe = self._client.pipeline(transaction=False)
        for part in parts:
            self._run(CLAIM.script, CLAIM.keys(part), args, client=pipe)
        return [
            _decode_claims(part.index, raw) for part, raw in zip(parts, pipe.execute(), strict=True)
        ]

    def _replicated_claims(self, parts: list[Partition], args: list[Any]) -> list[ClaimBatch]:
        """Claims that the replicas have (see ``_replicated_calls``), per partition: a node
        whose replicas fell behind gives no claims (they are taken over after their lease),
        the others go on; when no node's replicas kept up, :class:`ReplicasBehindError`."""
        replied = self._replicated_calls(
            CLAIM.script,
            [(CLAIM.keys(part), args) for part in parts],
            "claims",
            "none of them is published; they are taken over after their lease",
        )
        behind = [error for _, error in replied if error is not None]
        if behind and len(behind) == len(replied):
            raise behind[0]
        if behind:
            _warn_now_and_then(str(behind[0]))
        batches = []
        for part, (raw, error) in zip(parts, replied, strict=True):
            batch = _decode_claims(part.index, raw)
            batches.append(batch if error is None else replace(batch, claims=[], vanished=[]))
        return batches

    def ack(
        self, part: Partition, beat_id: str, history_length: int, settlements: list[Settlement]
    ) -> Acked:
        """Settle claimed ticks of one partition (see ack.lua); says how many were ours and
        how many another beat had taken over."""
        if not settlements:
            return Acked(0, 0)
        return _acked(self._run("ack", *self._ack_call(part, beat_id, history_length, settlements)))

    def ack_many(
        self,
        batches: list[tuple[Partition, list[Settlement]]],
        beat_id: str,
        history_length: int,
    ) -> Acked:
        """:meth:`ack` for several partitions in one round trip (a pipeline); one call
        after the other on a Redis Cluster. Says what they answered in all."""
        batches = [(part, items) for part, items in batches if items]
        if self._clustered or len(batches) < 2:
            return _summed(
                self.ack(part, beat_id, history_length, items) for part, items in batches
            )
        pipe = self._client.pipeline(transaction=False)
        for part, items in batches:
            self._run("ack", *self._ack_call(part, beat_id, history_length, items), client=pipe)
        return _summed(map(_acked, pipe.execute()))

    def ack_later(
        self,
        batches: list[tuple[Partition, list[Settlement]]],
        beat_id: str,
        history_length: int,
    ) -> Callable[[], Acked]:
        """:meth:`ack_many`, sent now and waited for when the returned function is called:
        Redis runs the scripts while the caller goes on. The function says what they
        answered in all, or raises what the calls raised."""
        batches = [(part, items) for part, items in batches if items]
        if self._clustered or not batches:
            acked = self.ack_many(batches, beat_id, history_length)
            return lambda: acked
        wait = self._later(
            "ack", [self._ack_call(part, beat_id, history_length, items) for part, items in batches]
        )
        return lambda: _summed(
            _acked(reply) if reply is not None else self.ack(part, beat_id, history_length, items)
            for reply, (part, items) in zip(wait(), batches, strict=True)
        )

    def claim_later(
        self,
        parts: list[Partition],
        beat_id: str,
        batch: int,
        lease_ms: int,
        horizon_ms: int = 0,
    ) -> Callable[[], list[ClaimBatch]]:
        """:meth:`claim_many`, sent now and read when the returned function is called."""
        if self._clustered or not parts or self.replica_acks:  # claimed (and waited for) now
            claimed = self.claim_many(parts, beat_id, batch, lease_ms, None, horizon_ms)
            return lambda: claimed
        args = [beat_id, batch, lease_ms, "", horizon_ms, self._audit_by(beat_id, "beat")]
        wait = self._later(CLAIM.script, [(CLAIM.keys(part), args) for part in parts])
        return lambda: [
            _decode_claims(part.index, raw)
            if raw is not None
            else self.claim(part, beat_id, batch, lease_ms, None, horizon_ms)
            for part, raw in zip(parts, wait(), strict=True)
        ]

    def _ack_call(
        self, part: Partition, beat_id: str, history_length: int, settlements: list[Settlement]
    ) -> tuple[list[str], list[Any]]:
        keys = ACK.keys(part)
        history, failures = ACK.item_makers(part)  # ack.lua's two keys per settlement
        for item in settlements:
            keys += (history(item.name), failures(item.name))
        keys += ACK.tail_keys(part)
        args: list[Any] = [beat_id, history_length, self._audit_by(beat_id, "beat")]
        args.extend(map(Settlement.to_lua, settlements))
        return keys, args

    def heartbeat(
        self, beat_id: str, action: str, ttl_ms: int, info: dict[str, Any], declared: str = ""
    ) -> Pulse:
        """Heartbeat ``start``/``alive``/``stop`` of a beat running with the declaration
        set ``declared`` (its digest; "" for none), whose TTL it refreshes."""
        args: list[Any] = [beat_id, action, ttl_ms, declared, DECLARATION_TTL_MS]
        for key, value in info.items():
            args.extend([key, value])
        keys = BEAT.keys(self.keys, beat_id=beat_id, declared=declared)
        now, flag, *rest = self._run(BEAT.script, keys, args)
        if not rest:  # "stop"
            return Pulse(int(now), bool(flag), [])
        registered, muted = bool(rest[0]), frozenset(json.loads(rest[1] or "[]"))
        pairs = [str(value) for value in rest[2:]]
        declarations = dict(zip(pairs[::2], pairs[1::2], strict=True))
        return Pulse(int(now), bool(flag), list(declarations), declarations, registered, muted)

    def release(self, beat_id: str, parts: list[Partition] | None = None) -> int:
        """Give up ``beat_id``'s claims in ``parts`` (every partition when None; see
        release.lua), for the other beats to take over now; returns how many it gave up."""
        parts = self.keys.all() if parts is None else parts
        if self._clustered or len(parts) < 2:
            return sum(
                int(self._run(RELEASE.script, RELEASE.keys(part), [beat_id])) for part in parts
            )
        pipe = self._client.pipeline(transaction=False)
        for part in parts:
            self._run(RELEASE.script, RELEASE.keys(part), [beat_id], client=pipe)
        return sum(int(given) for given in pipe.execute())

    def declare(self, digest: str, names: str, hint: int | None = None) -> int:
        """Store a declaration set (declare.lua) given its digest and its names' JSON;
        returns its generation (``hint``, the one this beat had, when it was lost)."""
        keys = DECLARE.keys(self.keys, digest=digest)
        args = [names, "" if hint is None else hint, DECLARATION_TTL_MS]
        return int(self._run(DECLARE.script, keys, args))

    def take_alerts(
        self, parts: list[Partition], most: int, lease_ms: int, now_ms: int | None = None
    ) -> list[list[str] | Exception]:
        """Take up to ``most`` alert transitions of each of ``parts`` to send, oldest first,
        for ``lease_ms`` (alerts.lua), in one round trip (one call after the other on a
        Redis Cluster). A partition whose call failed gives its error in its place."""
        args = ["take", most, lease_ms, "" if now_ms is None else now_ms]
        if self._clustered or len(parts) < 2:
            replies: list[Any] = []
            for part in parts:
                try:
                    replies.append(self._run(ALERTS.script, ALERTS.keys(part), args))
                except redis.RedisError as error:
                    replies.append(error)
        else:
            pipe = self._client.pipeline(transaction=False)
            for part in parts:
                self._run(ALERTS.script, ALERTS.keys(part), args, client=pipe)
            replies = pipe.execute(raise_on_error=False)
        return [reply if isinstance(reply, Exception) else list(reply) for reply in replies]

    def alerts_done(self, done: list[tuple[Partition, list[str]]], back: bool = False) -> None:
        """Say that transitions taken were sent, or, ``back``, put them back at the front of
        their lists, in their order, to be taken again at once (alerts.lua), in one round
        trip (one call after the other on a Redis Cluster)."""
        calls = [(ALERTS.keys(part), ["back" if back else "sent", *items]) for part, items in done]
        calls = [(keys, args) for keys, args in calls if len(args) > 1]
        if self._clustered or len(calls) < 2:
            for keys, args in calls:
                self._run(ALERTS.script, keys, args)
            return
        pipe = self._client.pipeline(transaction=False)
        for keys, args in calls:
            self._run(ALERTS.script, keys, args, client=pipe)
        pipe.execute()
