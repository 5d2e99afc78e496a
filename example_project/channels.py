"""Seed 000: entries made at run time by the code that owns them, and deleted by owner.

When a user connects a POP3 channel, the channel creates its own polling
entry, tagged with an ``owner``; when the channel is deleted, it deletes every
entry it created in one call, without having to remember their names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from celery import Celery

from celery_periodiq import periodiq
from example_project.inbox import poll_mailbox
from example_project.settings import when

if TYPE_CHECKING:  # what periodiq(app).add() returns; not exported by celery_periodiq yet
    from celery_periodiq.store.views import StoredEntry

__all__ = ["connect_channel", "disconnect_channel", "owner_tag"]


def owner_tag(channel_id: int) -> str:
    """The owner tag of every entry a channel creates."""
    return f"channel:{channel_id}"


def connect_channel(app: Celery, channel_id: int, address: str) -> StoredEntry:
    """Start polling ``address`` for channel ``channel_id``; beats pick it up within a second."""
    return periodiq(app).add(
        f"pop3-channel-{channel_id}",
        poll_mailbox,
        every=when(60, demo=5),
        kwargs={"address": address},
        owner=owner_tag(channel_id),
        tolerance=when(10, demo=1),
        timebox=when(30, demo=2),
    )


def disconnect_channel(app: Celery, channel_id: int) -> list[str]:
    """Delete every entry channel ``channel_id`` created; returns their names."""
    return periodiq(app).delete_owner(owner_tag(channel_id))
