"""Run the chosen scenarios of bench/beat.py and print the markdown table."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from _boundary import boundary
from _machine import machine as _machine
from _scenarios import SCENARIOS, Config, Row

RUNNERS = {**SCENARIOS, "boundary": boundary}

HEADER = ["scenario", "metric", "celery_periodiq", "RedBeat", "limit", "ratio", "target"]


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def run_all(
    names: list[str],
    quick: bool,
    json_path: Path | None,
    loglevel: str,
    keep: bool,
    due: int | None = None,
    lead: float | None = None,
    cluster_total: int | None = None,
    only: str | None = None,
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="periodiq-beat-bench-"))
    began = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - began:6.1f}s] {text}", flush=True)

    machine = _machine()
    log(f"machine: {json.dumps(machine)}")
    cfg = Config(quick=quick, tmp=tmp, loglevel=loglevel, log=log, due=due, lead=lead,
                 cluster_total=cluster_total, only=only)  # fmt: skip
    rows: list[Row] = []
    failed = []
    try:
        for name in names:
            log(f"--- {name}{' (quick)' if quick else ''}")
            try:
                rows += RUNNERS[name](cfg)
            except Exception:  # one broken scenario must not hide the others' figures
                failed.append(name)
                log(f"scenario {name} FAILED:\n{traceback.format_exc()}")
    finally:
        if keep or failed:
            log(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    machine["loadavg_after"] = os.getloadavg()
    machine["seconds"] = round(time.monotonic() - began, 1)
    log(f"done in {machine['seconds']} s; load average after: {machine['loadavg_after']}")
    command = "bench/beat.py " + " ".join(sys.argv[1:])
    print()
    print(
        f"`{command.strip()}` at {machine['commit']} — {machine['when']}, "
        f"{machine['cores']} cores ({machine['cpu']}), {machine['seconds']} s,"
    )
    print(
        f"load average before {machine['loadavg'][0]:.2f}, after "
        f"{machine['loadavg_after'][0]:.2f}; Redis {machine['redis_server']}, "
        f"celery {machine['celery']}, kombu {machine['kombu']}, "
        f"celery-redbeat {machine['celery_redbeat']}"
    )
    print()
    print(table(rows))
    if failed:
        print(f"\nscenarios that failed: {', '.join(failed)}")
    if json_path is not None:
        json_path.write_text(
            json.dumps(
                {"machine": machine, "details": cfg.details, "rows": [r.cells() for r in rows]},
                indent=2,
                default=str,
            )
        )
