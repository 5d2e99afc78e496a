"""A stand-in for a POP3 server, so the example runs without one.

Each address holds a backlog of messages when it is first opened, and one
more arrives every ``arrival_every`` seconds; downloading one takes
``download_seconds``. Message numbers only grow, so "everything up to number
N" is a complete checkpoint. Replace it with ``poplib.POP3_SSL`` in real life.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

__all__ = ["Mailbox"]


@dataclass
class Mailbox:
    """One simulated mailbox, its arrival clock kept in Redis."""

    client: redis.Redis
    key: str
    backlog: int
    arrival_every: float
    download_seconds: float

    def newest(self) -> int:
        """The highest message number on the server now."""
        self.client.set(self.key, time.time(), nx=True)
        opened = float(self.client.get(self.key) or time.time())
        return self.backlog + int((time.time() - opened) / self.arrival_every)

    def retrieve(self, number: int) -> bytes:
        """Download message ``number``."""
        time.sleep(self.download_seconds)
        return f"Subject: message {number}\r\n\r\nhello\r\n".encode()
