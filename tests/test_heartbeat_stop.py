"""A beat that stops is gone, even when its heartbeat thread was caught mid-refresh.

The heartbeat thread may be stopped (a GC pause, the OS) between deciding to refresh and
sending the refresh, while the beat's ``close()`` sends its last word (beat.lua "stop").
If the refresh then lands after the stop, the beat is alive again for a whole lease: other
beats leave its partitions alone until that runs out. Unregistering waits for a refresh
in progress to end, so the stop is always the last word.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.beat.heartbeat import Heartbeat
from celery_periodiq.store.store import Store


def test_a_refresh_caught_mid_way_when_the_beat_stops_does_not_bring_it_back(
    redis_url: str,
) -> None:
    app = Celery("heartbeat-stop", broker="memory://", set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    store: Store = periodiq(app).store
    refreshing, resume = threading.Event(), threading.Event()
    calls = [0]

    def info() -> dict[str, Any]:  # read right before each refresh is sent
        calls[0] += 1
        if calls[0] == 2:  # the thread's first refresh: held here, as if frozen
            refreshing.set()
            resume.wait(10)
        return {"host": "h"}

    heartbeat = Heartbeat(store, "stopping-beat", lease=0.3, info=info)
    heartbeat.beat_once("start")
    heartbeat.start()
    assert refreshing.wait(10)
    heartbeat.stop()
    unregistering = threading.Thread(target=heartbeat.unregister)
    unregistering.start()
    # An unregister that does not wait has its stop land now; one that waits, nothing.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and "stopping-beat" in beats(store):
        time.sleep(0.01)
    resume.set()
    unregistering.join(10)
    heartbeat.join(10)

    assert not unregistering.is_alive()
    assert not heartbeat.is_alive()
    assert "stopping-beat" not in beats(store)


def beats(store: Store) -> set[str]:
    return {beat.id for beat in store.beats()}
