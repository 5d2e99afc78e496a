"""Maintenance windows with real beats and a real worker: a window added while the beats
run skips (or defers) the ticks inside it, each recorded; a defer window's catch-up run
goes at its end and stands for them; a beat killed inside a window leaves the catch-up
to another. The DST maths and the claim/settle path on an injected clock are in
``test_windows.py``."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.processes import api_for, cluster, wait_for
from tests.test_beat_live import runs_after, started

pytestmark = pytest.mark.slow


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def test_a_skip_window_added_while_beats_run_skips_the_ticks_inside(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_url, broker_url)
        api.add("windowed", "record", every=1, owner="team-a")
        wait_for(lambda: runs_after(running, "windowed", time.time() - 2), 10, "a first run")

        start, end = time.time() + 1.5, time.time() + 4.5
        api.add_window("deploy", scope="owner:team-a", start=iso(start), end=iso(end))
        after = wait_for(lambda: runs_after(running, "windowed", end + 0.5), 10,
                         "a run after the window")  # fmt: skip

        ticks = [run["tick"] / 1000 for run in running.runs_of("windowed")]
        assert [t for t in ticks if start <= t < end] == []  # none inside
        assert after[0]["at"] - after[0]["tick"] / 1000 < 1.0  # on time after it
        skipped = [e for e in api.history("windowed", limit=100) if e.kind == "skipped_window"]
        inside = {e.tick.timestamp() for e in skipped if e.tick is not None}
        assert len(inside) == len(skipped) >= 2  # each tick inside recorded once
        assert all(start <= t < end for t in inside)
        assert api.get("windowed").counters["skipped_window"] == len(skipped)
        assert running.twice() == []


def test_a_defer_window_sends_one_catch_up_run_at_its_end(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_url, broker_url)
        api.add("deferred", "record", every=4)
        first = wait_for(lambda: runs_after(running, "deferred", time.time() - 5), 10,
                         "a first run")  # fmt: skip
        tick = first[0]["tick"] / 1000
        # the next three ticks inside; the end 1 s after the third, 3 s before the fourth
        start, end = tick + 2, tick + 13
        api.add_window("deploy", policy="defer", start=iso(start), end=iso(end))

        after = wait_for(lambda: runs_after(running, "deferred", tick + 1), 25,
                         "the catch-up run")  # fmt: skip
        catchup = after[0]
        assert catchup["tick"] / 1000 == pytest.approx(tick + 12, abs=0.01)  # the newest
        assert catchup["missed"] == 3  # it stands for the three deferred ticks
        assert end <= catchup["at"] < end + 1.0  # sent at the window's end
        wait_for(lambda: runs_after(running, "deferred", tick + 13), 10, "the next tick")
        deferred = [e for e in api.history("deferred", limit=50) if e.kind == "deferred"]
        assert sorted(e.tick.timestamp() for e in deferred if e.tick) == pytest.approx(
            [tick + 4, tick + 8, tick + 12], abs=0.01
        )
        assert running.twice() == []


def test_a_beat_killed_inside_a_defer_window_leaves_the_catch_up_to_another(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_url, broker_url)
        api.add("deferred", "record", every=4)
        first = wait_for(lambda: runs_after(running, "deferred", time.time() - 5), 10,
                         "a first run")  # fmt: skip
        tick = first[0]["tick"] / 1000
        api.add_window("deploy", policy="defer", start=iso(tick + 2), end=iso(tick + 9))
        wait_for(lambda: time.time() > tick + 4.5, 6, "a tick inside the window")
        beat = next(p for p in running.processes if p.log.name == "beat0.log")
        beat.kill()

        after = wait_for(lambda: runs_after(running, "deferred", tick + 1), 25,
                         "the catch-up run")  # fmt: skip
        assert after[0]["tick"] / 1000 == pytest.approx(tick + 8, abs=0.01)
        assert after[0]["missed"] == 2
        assert running.twice() == []
