"""The records the beat hands to ack.lua are encoded exactly as the (pinned) Lua reads them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from celery_periodiq.protocol.records import EventRow, Settlement

COMPACT = (",", ":")


def test_an_event_row_is_the_array_ack_lua_reads_with_empty_text_for_defaults() -> None:
    rows = [
        EventRow("enqueued", 1000),
        EventRow("enqueued", 2000, "", 3),
        EventRow("missed", 3000, "-", note="2 earlier not listed"),
        EventRow("rebuilt", None, "-", note="rebuilt"),
    ]

    encoded = [json.loads(row.to_lua()) for row in rows]

    assert encoded == [
        ["enqueued", 1000, "", "", ""],
        ["enqueued", 2000, "", 3, ""],
        ["missed", 3000, "-", "", "2 earlier not listed"],
        ["rebuilt", "", "-", "", "rebuilt"],
    ]


def test_a_published_tick_settles_as_the_compact_json_ack_lua_decodes() -> None:
    settlement = Settlement(
        "t1",
        "job",
        3,
        "17.1",
        120_000,
        120_500,
        counts={"enqueued": 1},
        events=(EventRow("enqueued", 60_000),),
        owed=0,
        late=(4,),
        runs=1,
        prev_ms=60_000,
        queued=("id-1", 120_000),
        last_enqueued=60_004,
        last_tick=60_000,
    )

    encoded = settlement.to_lua()

    assert encoded == (
        '{"id":"t1","name":"job","version":3,"next":120000,"due":120500,"inc":"17.1",'
        '"counts":{"enqueued":1},"events":[["enqueued",60000,"","",""]],"owed":0,"late":[4],'
        '"runs":1,"prev":60000,"queued":["id-1",120000],'
        '"last":{"last_enqueued":60004,"last_tick":60000}}'
    )


def test_a_settlement_sends_null_next_and_due_and_leaves_out_what_is_not_given() -> None:
    settlement = Settlement("t2", "gone", 1, quarantine="bad data")

    encoded = settlement.to_lua()

    assert encoded == (
        '{"id":"t2","name":"gone","version":1,"next":null,"due":null,"quarantine":"bad data"}'
    )


def _as_dict(settlement: Settlement) -> dict[str, Any]:
    """The settlement as the beat built it before the records: a dict in this order."""
    fields: dict[str, Any] = {
        "id": settlement.id,
        "name": settlement.name,
        "version": settlement.version,
        "next": settlement.next_ms,
        "due": settlement.due_ms,
    }
    given = {
        "inc": settlement.inc,
        "quarantine": settlement.quarantine,
        "counts": settlement.counts,
        "events": None
        if settlement.events is None
        else [
            [
                e.kind,
                "" if e.tick_ms is None else e.tick_ms,
                e.task_id,
                "" if e.missed == 1 else e.missed,
                e.note,
            ]
            for e in settlement.events
        ],
        "owed": settlement.owed,
        "late": settlement.late,
        "runs": settlement.runs,
        "prev": settlement.prev_ms,
        "queued": settlement.queued,
        "last": None
        if settlement.last_tick is None
        else {
            "last_enqueued": settlement.last_enqueued,
            "last_tick": settlement.last_tick,
        },
    }
    fields.update({key: value for key, value in given.items() if value is not None})
    return fields


texts = st.text(max_size=12)
ms = st.integers(min_value=-(2**50), max_value=2**50)
events = st.builds(
    EventRow, texts, st.none() | ms, texts, st.integers(min_value=1, max_value=10**6), texts
)


@given(
    st.builds(
        Settlement,
        texts,
        texts,
        st.integers(min_value=0, max_value=2**40),
        st.none() | texts,
        st.none() | ms,
        st.none() | ms,
        quarantine=st.none() | texts,
        counts=st.none() | st.dictionaries(texts, ms, max_size=3),
        events=st.none() | st.lists(events, max_size=3).map(tuple),
        owed=st.none() | ms,
        late=st.none() | st.lists(ms, max_size=3).map(tuple),
        runs=st.none() | ms,
        prev_ms=st.none() | ms,
        queued=st.none() | st.tuples(texts, ms),
        last_enqueued=st.none() | ms,
        last_tick=st.none() | ms,
    )
)
def test_a_settlement_encodes_as_json_dumps_of_the_dict_the_beat_built_before(
    settlement: Settlement,
) -> None:
    assert settlement.to_lua() == json.dumps(_as_dict(settlement), separators=COMPACT)
