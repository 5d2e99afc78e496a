"""The records the beat hands to ack.lua are encoded exactly as the (pinned) Lua reads them."""

from __future__ import annotations

from celery_periodiq.protocol.records import EventRow, Settlement


def test_an_event_row_is_the_array_ack_lua_reads_with_empty_text_for_defaults() -> None:
    rows = [
        EventRow("enqueued", 1000),
        EventRow("enqueued", 2000, "", 3),
        EventRow("missed", 3000, "-", note="2 earlier not listed"),
        EventRow("rebuilt", None, "-", note="rebuilt"),
    ]

    encoded = [row.to_lua() for row in rows]

    assert encoded == [
        ["enqueued", 1000, "", "", ""],
        ["enqueued", 2000, "", 3, ""],
        ["missed", 3000, "-", "", "2 earlier not listed"],
        ["rebuilt", "", "-", "", "rebuilt"],
    ]


def test_a_published_tick_settles_as_the_compact_json_ack_lua_decodes() -> None:
    settlement = Settlement(
        "t1", "job", 3, "17.1", 120_000, 120_500,
        counts={"enqueued": 1}, events=(EventRow("enqueued", 60_000),), owed=0, late=(4,),
        runs=1, prev_ms=60_000, queued=("id-1", 120_000), last_enqueued=60_004,
        last_tick=60_000,
    )  # fmt: skip

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
