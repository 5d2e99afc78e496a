"""Loaded by every process the tests run under ``faketime`` with its monotonic clock real
(``FAKETIME_DONT_FAKE_MONOTONIC=1``: a host whose wall clock is off, nothing else).

libfaketime 0.9.10 then fails every ``time.sleep`` with EINVAL (it shifts the absolute
CLOCK_MONOTONIC deadline of ``clock_nanosleep`` by the wall clock's offset). A host whose
clock is off sleeps fine, so the tests give these processes a ``time.sleep`` that waits
on a timed lock, which libfaketime leaves alone: Celery's beat sleeps between failed
passes, redis-py and kombu between retries, and a beat would otherwise die on its first
fault instead of showing how it survives it.
"""

import threading
import time

_NEVER = threading.Event()


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    _NEVER.wait(seconds)


time.sleep = _sleep
