"""Bulk load alone: ``Periodiq.add_many`` against RedBeat's keys in a bare pipeline.

    .venv/bin/python bench/load.py [--entries 100000] [--rounds 3]

Each round stores the same entries (every 24 h, none due for an hour, each with a
``start_at`` of its own) twice, each time into a fresh private ``redis-server``:
first RedBeat's keys the way ``bench/beat.py --scenario scale`` writes them (what
``RedBeatSchedulerEntry.save()`` writes, 1,000 entries per pipeline), then with
``add_many`` (50,000 entries per call). The ratio of one round compares two loads
made back to back on this machine, whose speed drifts. Printed, never asserted.
Runs in the bench venv (bench/_venv.py) so that RedBeat is importable.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _venv import bootstrap


def main() -> None:
    bootstrap(__file__, sys.argv[1:])
    from _harness import Spec, _load_periodiq, _load_redbeat
    from _scenarios import _t0

    import celery_periodiq
    from celery_periodiq.localredis import LocalRedis

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the bench task is not one the app knows
    print(f"celery_periodiq from {Path(celery_periodiq.__file__).parent}")
    first = _t0(3600)
    specs = [Spec(f"scale-{i:06d}", first + i, 86400) for i in range(args.entries)]
    ratios = []
    with tempfile.TemporaryDirectory(prefix="periodiq-load-bench-") as tmp:
        for round_ in range(args.rounds):
            took = {}
            for system, load in (("redbeat", _load_redbeat), ("periodiq", _load_periodiq)):
                folder = Path(tmp) / f"{system}-{round_}"
                with LocalRedis(folder / "schedule") as schedule, LocalRedis(folder / "b") as b:
                    began = time.perf_counter()
                    load(schedule.url, b.url, specs)
                    took[system] = time.perf_counter() - began
            ratios.append(took["periodiq"] / took["redbeat"])
            print(f"round {round_ + 1}: add_many {took['periodiq']:.2f} s, RedBeat pipeline "
                  f"{took['redbeat']:.2f} s: {ratios[-1]:.2f}x", flush=True)  # fmt: skip
    print(f"median {statistics.median(ratios):.2f}x over {len(ratios)} rounds")


if __name__ == "__main__":
    main()
