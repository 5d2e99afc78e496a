"""Limited runs (``max_runs``): the beat publishes at most N ticks of an entry, then it
has ended.

Beats are the real Dispatcher running the real claim.lua/ack.lua against a private
Redis with "now" injected, publishing to an in-memory broker. Entries tick every
minute from ``start``, a day after the Redis clock, so a first tick computed from
the real clock (``add``, ``update``) is always ``start``.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery

from celery_periodiq import Periodiq, periodic
from celery_periodiq.declare.registry import declared
from celery_periodiq.errors import EntryError
from celery_periodiq.model.plan import to_ms
from celery_periodiq.present.shapes import Details, entry_json
from celery_periodiq.present.terminal import Style
from celery_periodiq.present.text import list_text, show_text
from tests.test_cli import cli
from tests.test_decorator import clean_registry  # noqa: F401 (autouse: restores the declarations)
from tests.test_one_off import Beat, snapshot


@pytest.fixture
def start(api: Periodiq) -> datetime:
    return api.now().replace(microsecond=0) + timedelta(days=1)


def minute(start: datetime, k: float) -> datetime:
    return start + timedelta(minutes=k)


def run_minutes(beat: Beat, start: datetime, minutes: range) -> list[int]:
    return [tick for k in minutes for tick in beat.run(minute(start, k))]


# validation


@pytest.mark.parametrize("value", [0, -1, True, 1.5, 10**9 + 1, "3"])
def test_a_bad_max_runs_is_refused_naming_it_and_nothing_is_written(
    api: Periodiq, redis_client: redis.Redis, start: datetime, value: Any
) -> None:
    api.add("job", "proj.t", every=60, start_at=start)
    before = snapshot(redis_client)
    allowed = "(allowed: a whole number from 1 to 1000000000, or None for no limit)"

    for attempt in (
        lambda: api.add("new", "proj.t", every=60, max_runs=value),
        lambda: api.update("job", max_runs=value),
        lambda: api.add_many([{"name": "new", "task": "proj.t", "every": 60, "max_runs": value}]),
    ):
        with pytest.raises(EntryError) as caught:
            attempt()
        assert "max_runs=" in str(caught.value)
        assert allowed in str(caught.value)
    assert snapshot(redis_client) == before


def test_max_runs_on_a_cluster_event_entry_is_refused(api: Periodiq) -> None:
    with pytest.raises(EntryError, match=r"max_runs=2 is invalid \(allowed: None for @reboot"):
        api.add("boot", "proj.t", cron="@reboot", max_runs=2)


def test_an_unlimited_entry_stores_no_max_runs_and_keeps_its_digest(api: Periodiq) -> None:
    plain = api.add("plain", "proj.t", every=60).entry
    limited = api.add("limited", "proj.t", every=60, max_runs=5).entry

    assert plain is not None
    assert limited is not None
    assert "max_runs" not in json.loads(plain.to_json())
    assert json.loads(limited.to_json())["max_runs"] == 5


# the beat


def test_the_beat_publishes_max_runs_ticks_then_the_entry_has_ended(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=3)
    beat = Beat(app, api)

    sent = run_minutes(beat, start, range(6))

    assert sent == [to_ms(minute(start, k)) for k in range(3)]
    stored = api.get("job")
    assert (stored.status, stored.next_run, stored.runs, stored.runs_left) == ("ended", None, 3, 0)


def test_two_beats_racing_publish_exactly_max_runs_ticks(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=4)
    beats = [Beat(app, api, "beat-1"), Beat(app, api, "beat-2")]
    sent: list[int] = []
    lock = threading.Lock()

    def race(beat: Beat, now: datetime) -> None:
        ticks = beat.run(now)
        with lock:
            sent.extend(ticks)

    for k in range(8):
        for offset in (0, 0.5):  # each tick claimed by both at once, then again
            threads = [threading.Thread(target=race, args=(beat, minute(start, k + offset / 60)))
                       for beat in beats]  # fmt: skip
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    assert sorted(sent) == [to_ms(minute(start, k)) for k in range(4)]
    assert api.get("job").status == "ended"


def test_a_tick_rescheduled_while_a_claim_is_in_flight_waits_for_it(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    """A beat claimed the second tick and has not settled it when the entry is updated
    (which schedules a tick afresh): another beat must not publish that tick on the
    old count of runs; once the first claim is settled (here: taken over after its
    lease, late but more than half an interval before the next tick: a catch-up run) the
    entry has its two runs and has ended."""
    api.add("job", "proj.t", every=60, start_at=start, max_runs=2)
    beat = Beat(app, api, "beat-b")
    assert beat.run(start) == [to_ms(start)]
    parts = api.store.keys.all()
    lease = int(api.settings.claim_lease * 1000)
    (claimed,) = [claim for batch in api.store.scripts.claim_many(
        parts, "beat-a", 10, lease, to_ms(minute(start, 1))) for claim in batch.claims]  # fmt: skip

    api.update("job", args=[1])  # schedules the entry at `start` again (a tick of the past)

    assert beat.run(minute(start, 1) + timedelta(seconds=1)) == []
    taken_over = minute(start, 1) + timedelta(milliseconds=lease + 1)
    assert beat.run(taken_over) == [to_ms(minute(start, 1))]  # the claim, taken over
    assert api.get("job").status == "ended"  # its second run ended the entry at once
    assert beat.run(minute(start, 2)) == []
    assert claimed.nominal_ms == to_ms(minute(start, 1))
    assert beat.run(minute(start, 10)) == []
    stored = api.get("job")
    assert (stored.status, stored.runs) == ("ended", 2)


def test_catchup_all_publishes_no_more_than_the_runs_left(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=4, catchup="all")
    beat = Beat(app, api)
    assert beat.run(start) == [to_ms(start)]

    sent = beat.run(minute(start, 6))  # six ticks due, three runs left

    assert sent == [to_ms(minute(start, k)) for k in (4, 5, 6)]
    stored = api.get("job")
    assert (stored.status, stored.runs, stored.counters["missed"]) == ("ended", 4, 3)


def test_a_run_standing_for_missed_ticks_counts_once(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=2)
    beat = Beat(app, api)

    assert beat.run(minute(start, 5)) == [to_ms(minute(start, 5))]  # stands for six

    stored = api.get("job")
    assert (stored.status, stored.runs, stored.runs_left) == ("active", 1, 1)


def test_manual_runs_do_not_count(app: Celery, api: Periodiq, start: datetime) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=2)
    beat = Beat(app, api)

    api.trigger("job")
    api.trigger("job")
    beat.run(start - timedelta(hours=1))  # drains the manual messages
    sent = run_minutes(beat, start, range(4))

    assert sent == [to_ms(minute(start, k)) for k in range(2)]
    assert api.get("job").counters["enqueued"] == 4


def test_raising_max_runs_makes_an_ended_entry_tick_again_and_lowering_ends_it(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=2)
    beat = Beat(app, api)
    run_minutes(beat, start, range(3))

    raised = api.update("job", max_runs=3)
    assert (raised.status, raised.next_run, raised.runs_left) == ("active", start, 1)
    assert beat.run(minute(start, 5)) == [to_ms(minute(start, 5))]
    assert api.get("job").status == "ended"

    api.update("job", max_runs=10)
    lowered = api.update("job", max_runs=3)
    assert (lowered.status, lowered.next_run, lowered.runs_left) == ("ended", None, 0)
    assert beat.run(minute(start, 9)) == []

    cleared = api.update("job", max_runs=None)
    assert (cleared.status, cleared.runs_left, cleared.runs) == ("active", None, 3)


def test_resume_does_not_revive_an_entry_with_no_runs_left(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=1)
    Beat(app, api).run(start)

    api.pause("job")
    resumed = api.resume("job")

    assert (resumed.status, resumed.next_run) == ("ended", None)


# display and the other ways in


def test_list_show_and_json_say_how_many_runs_were_sent(
    app: Celery, api: Periodiq, start: datetime
) -> None:
    api.add("job", "proj.t", every=60, start_at=start, max_runs=3)
    run_minutes(Beat(app, api), start, range(2))
    stored = api.get("job")
    now = minute(start, 1.5)
    details = Details(upcoming=[], checkpoint=False, events=[], default_grace=10.0, now=now)

    listed = list_text([stored], now, Style(False), 100)
    shown = show_text(stored, details, now=now, style=Style(False), width=100)
    shape = entry_json(stored)

    assert "2 of 3 runs sent" in listed
    assert "  runs        2 of 3 runs sent (max_runs)\n" in shown
    assert (shape["runs"], shape["max_runs"], shape["runs_left"]) == (2, 3, 1)


def test_the_decorator_and_add_many_take_max_runs(api: Periodiq) -> None:
    app = Celery("limited-code", set_as_current=False)

    @periodic(every=60, max_runs=7, app=app, name="limited-code-job")
    def job() -> None: ...

    (entry,) = [entry for entry in declared() if entry.name == "limited-code-job"]
    assert entry.max_runs == 7
    api.add_many([{"name": "many", "task": "proj.t", "every": 60, "max_runs": 2}])
    many = api.get("many").entry
    assert many is not None
    assert many.max_runs == 2


def test_the_cli_sets_and_clears_max_runs(api: Periodiq, start: datetime) -> None:
    added = cli(api.app, "add", "job", "proj.t", "--every", "60", "--max-runs", "5")
    assert added.exit_code == 0, added.stderr
    assert api.get("job").runs_left == 5
    listed = json.loads(cli(api.app, "list", "--json").stdout)
    assert (listed[0]["max_runs"], listed[0]["runs_left"], listed[0]["runs"]) == (5, 5, 0)

    cleared = cli(api.app, "update", "job", "--max-runs", "none")

    assert cleared.exit_code == 0, cleared.stderr
    entry = api.get("job").entry
    assert entry is not None
    assert entry.max_runs is None
