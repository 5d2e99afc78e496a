"""``python -m celery_periodiq.localredis``: a Redis for development, in the foreground."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from celery_periodiq.localredis.server import find_redis_server

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """``python -m celery_periodiq.localredis``: run a Redis for development, in the foreground.

    The server listens on loopback only and keeps its data in ``--dir`` (append-only
    file), so entries survive its restarts. Where no ``redis-server`` is installed it
    is the one the ``embedded`` extra bundles.
    """
    parser = argparse.ArgumentParser(
        prog="python -m celery_periodiq.localredis",
        description="Run a Redis server on 127.0.0.1 for development (Ctrl-C stops it).",
    )
    parser.add_argument("--port", type=int, default=6379, help="port (default 6379)")
    parser.add_argument("--dir", default=".periodiq-redis", help="data directory")
    args = parser.parse_args(argv)
    folder = Path(args.dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    server = find_redis_server()
    print(f"redis://127.0.0.1:{args.port}/0  ({server}, data in {folder})", flush=True)
    os.execv(
        server,
        [
            server,
            "--port",
            str(args.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(folder),
            "--appendonly",
            "yes",
            "--save",
            "",
        ],
    )
