"""Beat benchmark: celery_periodiq against celery-redbeat and against Celery's own limit.

    .venv/bin/python bench/beat.py [--scenario rest|burst|spread|scale|failover|slow|all]
                                   [--quick] [--json FILE]

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
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / ".venv-bench"
NAMES = ("rest", "burst", "spread", "scale", "failover", "slow")


def _have_packages() -> bool:
    try:
        import redbeat  # noqa: F401

        import celery_periodiq  # noqa: F401
    except ImportError:
        return False
    return True


def _bootstrap(argv: list[str]) -> None:
    """Re-run in the bench venv (created on first use) unless redbeat is importable here."""
    if _have_packages():
        return
    if os.environ.get("BENCH_REEXEC"):
        raise SystemExit(f"{sys.executable} lacks celery_periodiq or celery-redbeat")
    venv = Path(os.environ.get("BENCH_VENV", DEFAULT_VENV))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import redbeat, celery_periodiq"]
    if not python.exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        print(f"bench: creating {venv} with celery-redbeat (once)", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        (venv / ".gitignore").write_text("*\n")  # keep it out of git status
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        subprocess.run([*pip, "-e", f"{ROOT}[embedded]", "celery-redbeat"], check=True)
    os.environ["BENCH_REEXEC"] = "1"
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *argv])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="all", choices=[*NAMES, "all"])
    parser.add_argument("--quick", action="store_true", help="shorter runs, smaller workloads")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--loglevel", default="WARNING", help="the beats' --loglevel")
    parser.add_argument("--keep", action="store_true", help="keep logs in the temporary dir")
    args = parser.parse_args()
    _bootstrap(sys.argv[1:])

    from _report import run_all

    run_all(
        names=list(NAMES) if args.scenario == "all" else [args.scenario],
        quick=args.quick,
        json_path=args.json,
        loglevel=args.loglevel,
        keep=args.keep,
    )


if __name__ == "__main__":
    main()
