"""A TCP proxy on loopback whose connections a test can cut at any moment.

Put it between a process and its Redis to inject the faults of a flaky network:
``cut()`` closes every open connection at once (mid-command, wherever the
client is), ``refuse()``/``accept()`` turn new connections away and back,
``blackhole()`` answers nothing any more, as a network partition with no reset does
(connections are accepted and what crosses is dropped, in both directions); a
``delay`` holds what clients send that long before it goes on (a slow network);
``hold_next(pattern, seconds)`` holds only the next chunk that carries ``pattern``
(one slow request among quick ones), and sets ``holding`` when it does;
``lose_next_reply(pattern)`` lets the next chunk that carries ``pattern`` reach Redis
and cuts its connection when Redis answers, so the command ran and its reply is
lost (sets ``lost`` when it did); ``drop_replies()`` drops what the server sends from
then on, on connections that stay open (a replica behind it stays attached to its
primary and hears nothing more), and ``drop_replies_after(pattern)`` does so from the
next chunk that carries ``pattern`` on: that request arrives, its reply never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType


class Proxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream``."""

    def __init__(self, upstream: int, delay: float = 0.0) -> None:
        self.upstream = upstream
        self.delay = delay
        self.port = 0
        self.cuts = 0
        self._refusing = False
        self._blackholed = False
        self._slow: tuple[bytes, float] | None = None
        self._replies_dropped = False
        self._drop_after: bytes | None = None
        self.unanswered: bytes | None = None
        """The chunk ``drop_replies_after`` found: the last request that arrived."""
        self.holding = threading.Event()
        """Set once the chunk carrying the ``hold_next`` pattern is being held."""
        self._lose: bytes | None = None
        self.lost = threading.Event()
        """Set once the reply to the ``lose_next_reply`` chunk was dropped."""
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proxy", daemon=True)

    def __enter__(self) -> Proxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut(self) -> None:
        """Close every open connection, both ways, now."""
        done = threading.Event()

        def close_all() -> None:
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()
            done.set()

        self._loop.call_soon_threadsafe(close_all)
        done.wait(5)
        self.cuts += 1

    def refuse(self) -> None:
        """Close new connections as soon as they are accepted (and cut the open ones)."""
        self._refusing = True
        self.cut()

    def accept(self) -> None:
        """Forward new connections again (and what crosses open ones, after a blackhole or
        dropped replies)."""
        self._refusing = False
        self._blackholed = False
        self._replies_dropped = False
        self._drop_after = None

    def blackhole(self) -> None:
        """Answer nothing: connections, open and new, stay up and what crosses them is
        dropped both ways, so a client waits for replies that never come (until
        :meth:`accept`, or :meth:`cut`)."""
        self._blackholed = True

    def _dropping(self) -> bool:
        return self._blackholed

    def hold_next(self, pattern: bytes, seconds: float) -> None:
        """Hold the next chunk a client sends that contains ``pattern`` for ``seconds``
        (on top of ``delay``); every other chunk passes as before."""
        self.holding.clear()
        self._slow = (pattern, seconds)

    def lose_next_reply(self, pattern: bytes) -> None:
        """Forward the next chunk a client sends that contains ``pattern``, then cut that
        connection, both ways, as soon as Redis answers it: the reply never arrives."""
        self.lost.clear()
        self._lose = pattern

    def drop_replies(self) -> None:
        """From now on, deliver nothing the server sends: it is read and dropped, no
        connection closes, and what clients send still goes through."""
        self._replies_dropped = True

    def drop_replies_after(self, pattern: bytes) -> None:
        """:meth:`drop_replies` from the next chunk a client sends that contains
        ``pattern`` on (that chunk goes through; its reply is the first dropped)."""
        self._drop_after = pattern

    def _hold(self, chunk: bytes) -> float:
        """How long to hold what a client sent."""
        slow = self._slow
        if slow is not None and slow[0] in chunk:
            self._slow = None
            self.holding.set()
            return self.delay + slow[1]
        return self.delay

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(
                    asyncio.gather(*pending, server.wait_closed(), return_exceptions=True)
                )
            self._loop.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self._refusing:
            client_w.transport.abort()
            return
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        self._writers.update((client_w, server_w))
        doomed = threading.Event()  # this connection's next reply is to be lost

        def forward(chunk: bytes) -> float:
            lose, after = self._lose, self._drop_after
            if lose is not None and lose in chunk:
                self._lose = None
                doomed.set()
            if after is not None and after in chunk:
                self._drop_after = None
                self._replies_dropped = True
                self.unanswered = chunk
            return self._hold(chunk)

        def answer(chunk: bytes) -> bool:
            if doomed.is_set():
                self.lost.set()
                return False
            return True

        await asyncio.gather(
            _pipe(client_r, server_w, hold=forward, dropping=self._dropping),
            _pipe(
                server_r,
                client_w,
                keep=answer,
                dropping=lambda: self._dropping() or self._replies_dropped,
            ),
        )
        self._writers.discard(client_w)
        self._writers.discard(server_w)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    hold: Callable[[bytes], float] | None = None,
    keep: Callable[[bytes], bool] | None = None,
    dropping: Callable[[], bool] | None = None,
) -> None:
    """Copy ``reader`` to ``writer``, each chunk held ``hold(chunk)`` seconds first; stop
    (closing ``writer``) at a chunk that ``keep`` says not to forward; drop chunks while
    ``dropping()`` says so."""
    try:
        while chunk := await reader.read(65536):
            if dropping is not None and dropping():
                continue
            if keep is not None and not keep(chunk):
                break
            pause = hold(chunk) if hold is not None else 0.0
            if pause:
                await asyncio.sleep(pause)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.transport.abort()
