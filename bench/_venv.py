"""Run a bench script in the bench venv, which has celery-redbeat beside celery_periodiq.

celery-redbeat is never a dependency of the project: the first run creates a
separate venv, ``.venv-bench`` (or ``$BENCH_VENV``), with
``pip install -e .[embedded] celery-redbeat`` and re-runs the script there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / ".venv-bench"


def _have_packages() -> bool:
    try:
        import redbeat  # noqa: F401

        import celery_periodiq  # noqa: F401
    except ImportError:
        return False
    return True


def bootstrap(script: str, argv: list[str]) -> None:
    """Re-run ``script`` in the bench venv (created on first use) unless redbeat is here."""
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
    os.execv(str(python), [str(python), str(Path(script).resolve()), *argv])
