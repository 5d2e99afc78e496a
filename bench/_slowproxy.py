"""A slow broker: a TCP proxy that holds every client write for a while.

    python bench/_slowproxy.py --upstream PORT --delay 0.005

Listens on a free loopback port (printed as ``port N`` on stdout) and
forwards to ``127.0.0.1:UPSTREAM``. Each chunk a client sends is delayed by
``--delay`` seconds before it is forwarded; replies pass at once. kombu sends
one ``LPUSH`` per published message and waits for its reply, so a publisher
behind this proxy manages at most about ``1 / delay`` messages per second per
connection. Used by the ``slow`` scenario to make publishing a claimed batch
take longer than the claim lease.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while chunk := await reader.read(65536):
            if delay:
                await asyncio.sleep(delay)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(upstream: int, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, server_w, delay), _pipe(server_r, client_w, 0.0))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"port {port}", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    async with server:
        await stopped.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upstream", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.005)
    args = parser.parse_args()
    asyncio.run(_serve(args.upstream, args.delay))


if __name__ == "__main__":
    main()
