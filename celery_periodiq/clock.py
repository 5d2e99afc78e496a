"""The clock a beat measures its leases with.

A claim is a beat's for a lease counted on Redis' clock; the beat can only tell how long
ago it asked for it on its own clock. That clock must go on while the process is
stopped (SIGSTOP, a debugger, a VM paused) and while the host is suspended (a laptop
lid): ``time.monotonic()`` is Linux's CLOCK_MONOTONIC, which does not count a suspend,
so a beat woken from one would think its claims still fresh. CLOCK_BOOTTIME counts it.
"""

from __future__ import annotations

import time

__all__ = ["SAFE_SHARE", "elapsed", "sleep_until"]

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)

SAFE_SHARE = 0.8
"""The share of a lease (or of a heartbeat's TTL) a beat counts on: the rest is slack
for the rates of two clocks (the beat's and Redis') and for the call itself."""


def elapsed() -> float:
    """Seconds on a clock that never goes back and counts every moment since boot,
    suspends included (CLOCK_BOOTTIME; ``time.monotonic()`` where there is none)."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


def sleep_until(moment: float) -> None:
    """Sleep until :func:`elapsed` reaches ``moment`` (a few ms at most where the beat
    does)."""
    remaining = moment - elapsed()
    if remaining > 0:
        time.sleep(remaining)
