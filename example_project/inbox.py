"""Seed 000: poll a POP3 mailbox every minute, timeboxed, resuming from a checkpoint.

The tolerance keeps two polls at least ``interval - tolerance`` apart, even
when a late message and a punctual one start close together. The timebox (a
soft time limit) keeps a big download from overlapping the next poll: the
task checks ``time_left()`` after every message, stops cleanly, and saves how
far it got; the next run resumes from there.
"""

from __future__ import annotations

from typing import Any

from celery_periodiq import PeriodicTask, periodic
from example_project import audit
from example_project.pop3 import Mailbox
from example_project.settings import KEY_PREFIX, when

__all__ = ["poll_mailbox"]


def mailbox(task: PeriodicTask, address: str) -> Mailbox:
    """The (simulated) POP3 mailbox of ``address``."""
    return Mailbox(
        client=audit.client(task),
        key=f"example:{KEY_PREFIX}:pop3:{address}",
        backlog=when(500, demo=30),
        arrival_every=when(20.0, demo=1.0),
        download_seconds=when(0.5, demo=0.15),
    )


@periodic(
    every=when(60, demo=4),
    name="poll-mailbox",
    kwargs={"address": "support@example.com"},
    tolerance=when(10, demo=1),
    timebox=when(30, demo=2),
    bind=True,
)
def poll_mailbox(self: PeriodicTask, address: str) -> dict[str, Any]:
    """Download new messages of ``address`` until none is left or the timebox is nearly spent."""
    run = self.periodiq
    audit.record(self)
    server = mailbox(self, address)
    done = int(run.checkpoint.load(0))  # every message up to this number is downloaded
    resumed_from, newest = done, server.newest()
    while done < newest and run.time_left() > server.download_seconds * 2:
        server.retrieve(done + 1)  # a real task would store the message here
        done += 1
        run.checkpoint.save(done)
    result = {"address": address, "from": resumed_from, "to": done, "left": newest - done}
    audit.record(self, kind="mail", **result)
    return result
