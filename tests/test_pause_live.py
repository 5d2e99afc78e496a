"""A timed pause ends on time: real beats and a real worker resume the entry at its end,
and when no beat ran at its end, the first beat after it does (the ticks missed since
follow the entry's catch-up policy)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.processes import api_for, cluster, wait_for
from tests.test_beat_live import runs_after, started

pytestmark = pytest.mark.slow


def test_a_timed_pause_ends_on_time_with_beats_running(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=2)
        api = api_for(redis_url, broker_url)
        api.add("timed", "record", every=1)
        wait_for(lambda: runs_after(running, "timed", time.time() - 2), 10, "a first run")

        paused_at = time.time()
        end = api.pause("timed", note="window", until=3).paused_until
        assert end is not None
        after = wait_for(lambda: runs_after(running, "timed", end.timestamp() - 0.001), 8,
                         "a run after the pause's end")  # fmt: skip

        assert runs_after(running, "timed", paused_at + 1) == after  # none during the pause
        assert after[0]["tick"] / 1000 - end.timestamp() <= 1.0  # its first tick after it
        assert after[0]["at"] - after[0]["tick"] / 1000 < 1.0  # sent on time
        stored = api.get("timed")
        assert (stored.status, stored.note, stored.paused_until) == ("active", None, None)


def test_a_timed_pause_whose_end_no_beat_saw_ends_at_the_next_beat(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url) as running:
        started(running, beats=1)
        api = api_for(redis_url, broker_url)
        api.add("timed", "record", every=1)
        wait_for(lambda: runs_after(running, "timed", time.time() - 2), 10, "a first run")
        paused_at = time.time()
        end = api.pause("timed", until="2s").paused_until
        assert end is not None
        beat = next(p for p in running.processes if p.log.name == "beat0.log")
        beat.stop()
        wait_for(lambda: time.time() > end.timestamp() + 2, 5, "two seconds past the end")

        stale = api.get("timed")  # no beat: still paused, its end passed
        assert (stale.status, stale.paused_until) == ("paused", end)
        assert runs_after(running, "timed", paused_at + 1) == []

        restarted = time.time()
        running.beat("beat-again")
        after = wait_for(lambda: runs_after(running, "timed", end.timestamp() - 0.001), 30,
                         "a run once a beat is back")  # fmt: skip

        # catch-up "last": the first run stands for the ticks missed since the end
        assert after[0]["tick"] / 1000 >= end.timestamp()
        assert (after[0]["missed"] or 0) >= 1, after[0]
        assert after[0]["at"] >= restarted
        assert api.get("timed").status == "active"
