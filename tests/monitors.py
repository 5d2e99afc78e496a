"""Real local monitors for the check-in tests: an HTTP server that keeps what Sentry's SDK
and the pings send it, and a socket that accepts connections and never answers."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    """What the monitor server was sent: Sentry's check-in items and the pings."""

    checkins: list[dict[str, Any]] = field(default_factory=list)
    pings: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    """(path, query) of each ping."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def checkins_of(self, slug: str) -> list[dict[str, Any]]:
        with self.lock:
            return [item for item in self.checkins if item.get("monitor_slug") == slug]

    def pings_of(self, rid: str) -> list[str]:
        with self.lock:
            return [path for path, query in self.pings if query.get("rid") == rid]


def envelope_items(body: bytes, encoding: str) -> list[tuple[dict[str, Any], bytes]]:
    """The (item header, payload) pairs of a Sentry envelope, decompressed."""
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "br":
        import brotli  # type: ignore[import-not-found]

        body = brotli.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    items: list[tuple[dict[str, Any], bytes]] = []
    position = body.index(b"\n") + 1  # after the envelope's header
    while position < len(body):
        line_end = body.find(b"\n", position)
        if line_end < 0 or not body[position:line_end].strip():
            break
        header = json.loads(body[position:line_end])
        position = line_end + 1
        length = header.get("length")
        if length is None:
            length = (body.find(b"\n", position) % (len(body) + 1)) - position
        items.append((header, body[position : position + length]))
        position += length + 1
    return items


@contextmanager
def monitor_server() -> Iterator[tuple[int, Received]]:
    """A threaded HTTP server on a free loopback port; yields (port, what it received)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            url = urlsplit(self.path)
            with received.lock:
                if url.path.endswith("/envelope/"):
                    encoding = self.headers.get("Content-Encoding", "")
                    for header, payload in envelope_items(body, encoding):
                        if header.get("type") == "check_in":
                            received.checkins.append(json.loads(payload))
                else:
                    query = {key: values[0] for key, values in parse_qs(url.query).items()}
                    received.pings.append((url.path, query))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_monitor() -> Iterator[int]:
    """A port that accepts connections (the kernel completes them) and never answers."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
