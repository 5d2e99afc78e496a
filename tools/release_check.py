"""The package as a user gets it: built, checked, and installed alone in a fresh venv.

Run by ``make test`` (``make release-check``) with the dev venv's Python::

    .venv/bin/python tools/release_check.py [--keep]

1. ``python -m build``: the sdist, then the wheel built from that sdist.
2. ``twine check --strict``: the metadata and the README render as PyPI would show them.
3. Both archives carry LICENSE (the wheel under ``.dist-info/licenses/``, declared as
   ``License-Expression: MIT``), the sdist CHANGELOG.md, the wheel both Celery entry points.
4. The wheel installs into a fresh venv (its dependencies from the package registry),
   and ``pip check`` finds them consistent.
5. In that venv, with a tiny app module in an empty directory: ``celery -A app periodiq
   --help`` and ``periodiq next`` work, and Celery's beat resolves the scheduler both
   ways the README gives (``-S periodiq`` and ``celery_periodiq:Scheduler``).

Each step prints what it checked; the first that fails stops the check with exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "celery_periodiq"

APP = """\
from celery import Celery

from celery_periodiq import periodic

app = Celery("release_app", broker="redis://127.0.0.1:9/0")  # never reached
app.conf.beat_scheduler = "celery_periodiq:Scheduler"


@periodic(every=60, app=app)
def ping():
    return "pong"
"""

# Run by the fresh venv's Python in the app's directory: how `celery beat` finds its
# scheduler (celery.beat.Service.get_scheduler, lazy as beat's introspection builds it).
RESOLVE = """\
import importlib.metadata, json, sys
from celery.beat import Service
import celery_periodiq
from release_app import app

found = {}
for name in ("periodiq", "celery_periodiq:Scheduler", app.conf.beat_scheduler):
    scheduler = Service(app, scheduler_cls=name).get_scheduler(lazy=True)
    assert isinstance(scheduler, celery_periodiq.Scheduler), (name, type(scheduler))
    found[name] = type(scheduler).__module__ + "." + type(scheduler).__qualname__
print(json.dumps({
    "schedulers": found,
    "file": celery_periodiq.__file__,
    "prefix": sys.prefix,
    "version": celery_periodiq.__version__,
    "installed": importlib.metadata.version("celery-periodiq"),
    "tasks": sorted(name for name in app.tasks if name.startswith("release_app.")),
}))
"""


class ReleaseCheckError(Exception):
    """One check of the release did not hold."""


def say(message: str) -> None:
    print(f"release check: {message}", flush=True)


def run(
    command: Sequence[str | Path],
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> str:
    """Run ``command``; its stdout, or ReleaseCheckError with its output."""
    shown = " ".join(str(part) for part in command)
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseCheckError(f"{shown} exited {done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ReleaseCheckError(message)


def version() -> str:
    """The version the tree declares (``celery_periodiq/_version.py``, which hatch reads)."""
    found = re.search(
        r'^__version__ = "([^"]+)"$', (ROOT / PROJECT / "_version.py").read_text(), re.M
    )
    if found is None:
        raise ReleaseCheckError("celery_periodiq/_version.py declares no __version__")
    return found[1]


def build(dist: Path) -> tuple[Path, Path]:
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT])
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    say(f"ok  python -m build: {sdist.name}, {wheel.name} (the wheel built from the sdist)")
    return sdist, wheel


def twine_check(sdist: Path, wheel: Path) -> None:
    out = run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])
    expect(out.count("PASSED") == 2, f"twine check did not pass both:\n{out}")
    say("ok  twine check --strict: both archives PASSED")


def contents(sdist: Path, wheel: Path, expected: str) -> None:
    expect((ROOT / "LICENSE").is_file(), f"the tree has no LICENSE ({ROOT})")
    license_text = (ROOT / "LICENSE").read_text()
    with tarfile.open(sdist) as archive:
        top = f"{sdist.name.removesuffix('.tar.gz')}/"
        names = {name.removeprefix(top) for name in archive.getnames()}
        missing = {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} - names
        expect(not missing, f"the sdist lacks {sorted(missing)}")
    with zipfile.ZipFile(wheel) as archive:
        info = f"celery_periodiq-{expected}.dist-info"
        names = set(archive.namelist())
        expect(f"{info}/licenses/LICENSE" in names, f"the wheel has no {info}/licenses/LICENSE")
        expect(
            archive.read(f"{info}/licenses/LICENSE").decode() == license_text,
            "the wheel's LICENSE differs from the tree's",
        )
        headers = archive.read(f"{info}/METADATA").decode().partition("\n\n")[0].splitlines()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    for header in ("License-Expression: MIT", "License-File: LICENSE", f"Version: {expected}"):
        expect(header in headers, f"the wheel's METADATA lacks {header!r}")
    for line in ("periodiq = celery_periodiq:Scheduler", "periodiq = celery_periodiq.cli:periodiq"):
        expect(line in entry_points, f"the wheel's entry_points.txt lacks {line!r}")
    say(
        "ok  sdist has LICENSE and CHANGELOG.md; wheel has licenses/LICENSE, "
        "License-Expression: MIT, both Celery entry points"
    )


def fresh_venv(where: Path, wheel: Path) -> tuple[Path, dict[str, str]]:
    run([sys.executable, "-m", "venv", where / "venv"])
    python = where / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1", "NO_COLOR": "1"}
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    run([python, "-m", "pip", "install", "--quiet", wheel], env=env, cwd=where)
    run([python, "-m", "pip", "check"], env=env, cwd=where)
    say(f"ok  the wheel installs alone in a fresh venv ({where / 'venv'}); pip check is clean")
    return python, env


def in_the_venv(python: Path, env: dict[str, str], app_dir: Path, expected: str) -> None:
    celery = python.parent / "celery"
    (app_dir / "release_app.py").write_text(APP)
    helped = run([celery, "-A", "release_app", "periodiq", "--help"], cwd=app_dir, env=env)
    for word in ("See and steer the periodiq schedule", "list", "doctor", "serve"):
        expect(word in helped, f"celery -A release_app periodiq --help lacks {word!r}")
    say("ok  celery -A release_app periodiq --help lists the commands")

    out = run(
        [
            celery,
            "-A",
            "release_app",
            "periodiq",
            "next",
            "*/15 * * * *",
            "--from",
            "2026-01-01T00:01",
            "-n",
            "2",
            "--json",
        ],
        cwd=app_dir,
        env=env,
    )
    runs = [datetime.fromisoformat(fire) for fire in json.loads(out)["runs"]]
    expect(runs == [datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in (15, 30)], f"next: {out}")
    say("ok  celery -A release_app periodiq next '*/15 * * * *' gives 00:15 and 00:30")

    found = json.loads(run([python, "-c", RESOLVE], cwd=app_dir, env=env))
    expect(found["file"].startswith(found["prefix"]), f"imported from the tree: {found}")
    expect(found["version"] == found["installed"] == expected, f"version: {found}")
    expect(found["tasks"] == ["release_app.ping"], f"@periodic's task: {found}")
    names = ", ".join(sorted(found["schedulers"]))
    say(f"ok  celery beat resolves {names} to celery_periodiq.Scheduler (from the venv)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    started = time.monotonic()
    where = Path(tempfile.mkdtemp(prefix="periodiq-release-"))
    expected = version()
    say(f"celery-periodiq {expected}, in {where}")
    try:
        sdist, wheel = build(where / "dist")
        twine_check(sdist, wheel)
        contents(sdist, wheel, expected)
        python, env = fresh_venv(where, wheel)
        app_dir = where / "app"
        app_dir.mkdir()
        in_the_venv(python, env, app_dir, expected)
    except (ReleaseCheckError, subprocess.TimeoutExpired, ValueError, KeyError) as error:
        say(f"FAILED {error}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    say(f"passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
