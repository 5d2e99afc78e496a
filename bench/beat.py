"""Beat benchmark: celery_periodiq against celery-redbeat and against Celery's own limit.

    .venv/bin/python bench/beat.py [--scenario NAME] [--quick] [--json FILE]
    .venv/bin/python bench/beat.py --scenario boundary [--due 100000] [--lead 60]
    .venv/bin/python bench/beat.py --scenario boundary --due 100000 --cluster-total 1000000

NAME is one of rest, burst, replicated, spread, spread-large, scale, failover, slow, all (the
default), or boundary, which ``all`` leaves out (it takes about 10 minutes: N ticks due at
one instant, a minute ahead, for five systems; see bench/_boundary.py; with
``--cluster-total`` celery_periodiq alone, 1 and 2 beats, on a 3-master Redis Cluster
holding that many entries: see bench/_boundary_cluster.py).

celery-redbeat is never a dependency of the project: the first run creates a
separate venv, ``.venv-bench`` (or ``$BENCH_VENV``), with
``pip install -e .[embedded] celery-redbeat`` and re-runs itself there. Every scenario
runs both schedulers as real ``celery beat`` processes, one after the other,
on identical workloads, each against its own private ``redis-server`` pair
(schedule and broker, ``celery_periodiq.localredis.LocalRedis``). A listener
process drains the broker's ``celery`` list and stamps each message's
arrival; lateness is arrival minus the tick's due instant. The "limit" is
``app.send_task`` in a loop with one reused producer, measured the same way.
Figures are printed, never asserted; the last thing printed is a markdown
table. See bench/README.md for the scenarios and recorded figures.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from _venv import bootstrap

NAMES = ("rest", "burst", "replicated", "spread", "spread-large", "scale", "failover", "slow")
"""What ``all`` runs."""
LONG = ("boundary",)
"""Scenarios run only when named."""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="all", choices=[*NAMES, *LONG, "all"])
    parser.add_argument("--quick", action="store_true", help="shorter runs, smaller workloads")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--loglevel", default="WARNING", help="the beats' --loglevel")
    parser.add_argument("--keep", action="store_true", help="keep logs in the temporary dir")
    parser.add_argument(
        "--due", type=int, help="boundary: ticks due at the instant (100000; --quick: 5000)"
    )
    parser.add_argument(
        "--lead", type=float, help="boundary: s from storing them to the instant (60; --quick: 20)"
    )
    parser.add_argument(
        "--cluster-total", type=int,
        help="boundary: celery_periodiq alone, its schedule on a 3-master Redis Cluster "
        "holding this many entries, --due of them due at the instant",
    )  # fmt: skip
    parser.add_argument(
        "--only", help="boundary: only these runs, comma-separated (limit, periodiq-1, "
        "periodiq-2, periodiq-amqp, periodiq-2-behind, redbeat)",
    )  # fmt: skip # one call reads better than a help string split in three
    parser.add_argument(
        "--no-staging", action="store_true",
        help="celery_periodiq's beats stage nothing (periodiq_stage_horizon=0): each tick "
        "goes the lean per-tick path, as on RabbitMQ or at short notice",
    )  # fmt: skip # one call reads better than a help string split in three
    args = parser.parse_args()
    if args.no_staging:  # read by _periodiq_app.py in each beat
        os.environ["BENCH_STAGE_HORIZON"] = "0"
    bootstrap(__file__, sys.argv[1:])

    from _report import run_all

    run_all(
        names=list(NAMES) if args.scenario == "all" else [args.scenario],
        quick=args.quick,
        json_path=args.json,
        loglevel=args.loglevel,
        keep=args.keep,
        due=args.due,
        lead=args.lead,
        cluster_total=args.cluster_total,
        only=args.only,
    )


if __name__ == "__main__":
    main()
