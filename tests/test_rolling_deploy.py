"""A rolling deploy: beats of two versions of one app (``tests/apps/deploy_old.py`` and
``deploy_new.py``, one schedule) run side by side. An entry declared by a live beat is
never removed; where both declare a name, the newest deployment's definition stays
however often the older beats start or reconcile; once a version's last beat is gone,
what only it declared is removed (with a WARNING) and the other's definitions apply.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from celery_periodiq import Periodiq
from celery_periodiq.localredis import LocalRedis
from tests.processes import Celery, Cluster, api_for, cluster, wait_for
from tests.test_faults import let_pass

pytestmark = pytest.mark.slow

REMOVED = "removed 1 entries no longer declared in code or beat_schedule: {}"


def ready(process: Celery, times: int = 1) -> None:
    """Wait until the beat has reconciled and is ready ``times`` times in all."""
    wait_for(lambda: process.output().count(" ready; ") >= times, 60,
             f"{process.log.stem} to be ready ({times})")  # fmt: skip


def old_and_new(running: Cluster) -> tuple[Celery, Celery]:
    """A beat of the old version, ready; then one of the new (the deploy begins), ready."""
    old = running.beat("old", app="deploy_old")
    ready(old)
    new = running.beat("new", app="deploy_new")
    ready(new)
    return old, new


def names(api: Periodiq) -> set[str]:
    return {stored.name for stored in api.list()}


def args_of(api: Periodiq, name: str) -> list[object]:
    entry = api.get(name).entry
    assert entry is not None
    return list(entry.args)


def more_runs(running: Cluster, entry: str, more: int) -> list[dict[str, object]]:
    """Wait until ``entry`` ran ``more`` more times; its runs."""
    count = len(running.runs_of(entry))
    return wait_for(
        lambda: (runs := running.runs_of(entry)) and len(runs) >= count + more and runs,
        30, f"{more} more runs of {entry}\n{running.logs()}",
    )  # fmt: skip


def pid_of(process: Celery) -> int:
    assert process.process is not None
    return process.process.pid


def deployed_and_running(running: Cluster, api: Periodiq) -> tuple[Celery, Celery, Any]:
    """Mid deploy (an old beat, then a new one) with a worker, once ``acc.y`` ran: the
    beats, and ``acc.y`` as stored then."""
    old, new = old_and_new(running)
    worker = running.worker()
    wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
    more_runs(running, "acc.y", 1)
    return old, new, api.get("acc.y")


def runs_since(running: Cluster, api: Periodiq) -> tuple[list[dict[str, object]], Any]:
    """Two more runs of ``acc.y`` and ``acc.x``: those of ``acc.x``, and ``acc.y`` as
    stored then."""
    x_runs_from = len(running.runs_of("acc.x"))
    more_runs(running, "acc.y", 2)
    return more_runs(running, "acc.x", 2)[x_runs_from:], api.get("acc.y")


def test_an_old_beat_restarting_mid_deploy_keeps_the_new_entries_and_definitions(
    tmp_path: Path, redis_server: LocalRedis, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new") as running:
        api = api_for(redis_url, broker_url, "deploy")
        old = running.beat("old-1", app="deploy_old")
        ready(old)
        new = running.beat("new", app="deploy_new")  # the deploy begins
        ready(new)
        worker = running.worker()
        wait_for(lambda: "ready" in worker.output(), 60, "the worker to be ready")
        more_runs(running, "acc.y", 2)
        before = api.get("acc.y")

        old.stop()  # an old pod restarts mid-deploy
        old = running.beat("old-2", app="deploy_old")
        ready(old)
        more_runs(running, "acc.y", 3)
        during = api.get("acc.y")
        listed = names(api)
        x_during = args_of(api, "acc.x")
        x_runs = more_runs(running, "acc.x", 2)

        readied = {beat: beat.output().count(" ready; ") for beat in (old, new)}
        redis_server.stop()  # every beat reconciles again after a Redis error
        time.sleep(3)  # the Redis outage: every beat fails a pass meanwhile
        redis_server.start()
        for beat, times in readied.items():
            ready(beat, times + 1)
        more_runs(running, "acc.y", 2)
        after_error = api.get("acc.y")
        x_after_error = args_of(api, "acc.x")

        new.stop()  # the deploy rolls back: only old beats are left
        wait_for(lambda: "acc.y" not in names(api), 20, f"acc.y to go\n{running.logs()}")
        wait_for(lambda: args_of(api, "acc.x") == ["old"], 20, "the old acc.x back")
        old_log = old.output()

    assert listed == {"acc.x", "acc.y", "acc.old"}
    assert during.state["created"] == before.state["created"]
    assert during.runs > before.runs
    assert during.version == before.version
    assert x_during == ["new"]
    assert x_runs[-1]["args"] == ["new"]
    assert after_error.state["created"] == before.state["created"]
    assert after_error.runs > during.runs
    assert x_after_error == ["new"]
    assert REMOVED.format("acc.y") in old_log


def test_a_beat_back_from_a_redis_outage_waits_a_lease_before_it_replaces_or_removes(
    tmp_path: Path, redis_server: LocalRedis, redis_url: str, broker_url: str
) -> None:
    """The worst order after an outage longer than the lease: every heartbeat ran out,
    the old beat reaches Redis first and the new one later (frozen meanwhile). The old
    one writes what Redis lost and nothing else until the new one was seen again."""
    lease = 4
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new", lease=lease) as running:
        api = api_for(redis_url, broker_url, "deploy")
        old, new, before = deployed_and_running(running, api)
        redis_server.stop()
        os.killpg(pid_of(new), signal.SIGSTOP)  # the new beat reaches Redis last
        time.sleep(lease + 1)  # the outage: longer than the lease, every heartbeat runs out
        readied = old.output().count(" ready; ")
        redis_server.start()
        wait_for(lambda: "cannot be told yet" in old.output(), 30, f"old to wait\n{old.output()}")
        os.killpg(pid_of(new), signal.SIGCONT)
        ready(old, readied + 2)  # the cautious pass, then the full one a lease later
        x_runs, after = runs_since(running, api)
        old_log = old.output()

    assert after.state["created"] == before.state["created"]
    assert after.runs > before.runs
    assert {tuple(run["args"]) for run in x_runs} == {("new",)}  # type: ignore[arg-type]
    assert "no longer declared" not in old_log
    assert "missing declared entries written" in old_log


def test_a_beat_that_starts_as_redis_returns_from_an_outage_replaces_and_removes_nothing(
    tmp_path: Path, redis_server: LocalRedis, redis_url: str, broker_url: str
) -> None:
    """Mid deploy, Redis stops for longer than the lease; the new beat is frozen through
    it, and the old pod restarts: its fresh beat, which never saw the outage, meets
    Redis first as it returns. It cannot tell the new beat (alive, its heartbeat ran
    out meanwhile) from a gone one, so for a lease it writes what is missing only."""
    lease = 4
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new", lease=lease) as running:
        api = api_for(redis_url, broker_url, "deploy")
        old, new, before = deployed_and_running(running, api)
        redis_server.stop()
        os.killpg(pid_of(new), signal.SIGSTOP)  # the new beat reaches Redis last
        old.kill()  # the old pod restarts
        let_pass(lease + 1)  # the outage: longer than the lease, every heartbeat runs out
        redis_server.start()
        fresh = running.beat("old-2", app="deploy_old")  # meets Redis first
        ready(fresh)  # it reconciled
        os.killpg(pid_of(new), signal.SIGCONT)
        ready(fresh, 2)  # and again a lease later
        x_runs, after = runs_since(running, api)
        fresh_log = fresh.output()

    assert after.state["created"] == before.state["created"]
    assert after.state["inc"] == before.state["inc"]
    assert {tuple(run["args"]) for run in x_runs} == {("new",)}  # type: ignore[arg-type]
    assert "no longer declared" not in fresh_log
    assert "{'replaced'" not in fresh_log
    assert "cannot be told yet" in fresh_log


def test_a_beat_frozen_past_its_lease_declares_again_what_was_removed_meanwhile(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    """Frozen longer than its lease, the new beat is taken for gone and the old one
    removes what only it declared; resumed, it finds its heartbeat lapsed and declares
    its entries again (nothing else would: no pass of its own failed)."""
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new") as running:
        api = api_for(redis_url, broker_url, "deploy")
        old, new = old_and_new(running)
        assert new.process is not None
        # started less than a lease ago, it reconciles in full a lease later: stopped
        # before that, its start's reconcile and its resume's would be one
        wait_for(lambda: "reconciled 2 declared entries" in new.output(), 30,
                 "the new beat's full reconcile")  # fmt: skip

        os.killpg(new.process.pid, signal.SIGSTOP)
        wait_for(lambda: "acc.y" not in names(api), 30, f"acc.y to go\n{running.logs()}")
        os.killpg(pid_of(new), signal.SIGCONT)
        wait_for(lambda: "acc.y" in names(api), 30, f"acc.y to come back\n{running.logs()}")
        wait_for(lambda: args_of(api, "acc.x") == ["new"], 30, "the new acc.x back")
        # the beat logs its reconcile after writing it: the entries may be back first
        wait_for(lambda: new.output().count("reconciled 2 declared entries") >= 2, 30,
                 f"the resumed beat to log its reconcile\n{running.logs()}")  # fmt: skip
        new_log = new.output()

    assert REMOVED.format("acc.y") in old.output()
    assert new_log.count("reconciled 2 declared entries") == 2  # at start, and on resuming


def test_entries_the_new_code_dropped_are_removed_once_the_last_old_beat_is_gone(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new") as running:
        api = api_for(redis_url, broker_url, "deploy")
        old, new = old_and_new(running)
        while_old_lives = names(api)

        old.kill()  # the last old pod dies at the end of the deploy
        wait_for(lambda: "acc.old" not in names(api), 20, f"acc.old to go\n{running.logs()}")
        left = names(api)
        new_log = new.output()

    assert while_old_lives == {"acc.x", "acc.y", "acc.old"}
    assert left == {"acc.x", "acc.y"}
    assert REMOVED.format("acc.old") in new_log


def test_a_declaration_set_no_beat_can_read_removes_nothing_and_a_lost_one_is_declared_again(
    tmp_path: Path, redis_url: str, broker_url: str
) -> None:
    with cluster(tmp_path, redis_url, broker_url, app="deploy_new") as running:
        api = api_for(redis_url, broker_url, "deploy")
        old = running.beat("old", app="deploy_old")
        ready(old)
        old.stop()
        # someone else's live beat, whose declaration set holds garbage of another type
        keys, client = api.store.keys, api.store.client
        api.store.scripts.heartbeat("elsewhere:1:feed", "start", 60_000, {"host": "elsewhere"},
                               declared="feedfacefeedface")  # fmt: skip
        client.rpush(keys.declaration("feedfacefeedface"), "garbage")
        new = running.beat("new", app="deploy_new")
        ready(new)
        wait_for(lambda: api.get("acc.y").state.get("last_enqueued"), 20, "acc.y to be sent")
        kept = names(api)
        # its own declaration set lost (a failover): declared again, with its generation
        (own,) = {digest for beat, digest in client.hgetall(keys.declarers).items()
                  if beat != "elsewhere:1:feed"}  # fmt: skip
        generation = client.hget(keys.declaration(own), "gen")
        client.delete(keys.declaration(own))
        regained = wait_for(lambda: client.hget(keys.declaration(own), "gen"), 20,
                            "the beat to declare its set again")  # fmt: skip
        # the full reconcile comes a lease after the beat starts (it cannot tell live
        # beats sooner): it keeps what the unreadable set may declare, and says so
        unreadable = "cannot tell what beat elsewhere:1:feed declares"
        wait_for(lambda: unreadable in new.output(), 30, f"the warning\n{new.output()}")

        api.store.scripts.heartbeat("elsewhere:1:feed", "stop", 0, {})
        wait_for(lambda: "acc.old" not in names(api), 20, f"acc.old to go\n{running.logs()}")
        new_log = new.output()

    assert kept == {"acc.x", "acc.y", "acc.old"}
    assert regained == generation
    assert unreadable in new_log
    assert REMOVED.format("acc.old") in new_log
