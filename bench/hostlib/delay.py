"""A userspace delaying TCP proxy: what ``tc qdisc ... netem delay`` does to a link, for one TCP service, on a kernel
without ``netem``.

Each connection to the proxy gets its own connection to the target; every chunk read in either direction is written
to the other side ``delay`` seconds after it was read, in order (so a round trip through the proxy takes ``2 × delay``
more). Bandwidth is not limited (``Hosts.limit`` does that, with a token bucket). Runs on an asyncio loop in a daemon
thread; :meth:`DelayProxy.close` ends every connection.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class DelayProxy:
    """Listens on ``host`` (an OS-assigned port: :attr:`port`) and forwards to ``target`` with ``delay`` seconds each
    way."""

    def __init__(self, target: tuple[str, int], delay: float, host: str = "127.0.0.1") -> None:
        self.target, self.delay = target, delay
        self.loop = asyncio.new_event_loop()
        self._tasks: set[asyncio.Task[Any]] = set()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(host, started), name="delay-proxy", daemon=True)
        self._thread.start()
        started.wait(30)
        self.port: int = self._server.sockets[0].getsockname()[1]

    def _run(self, host: str, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self._server = self.loop.run_until_complete(asyncio.start_server(self._connection, host, 0))
        started.set()
        self.loop.run_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.ensure_future(self._pump(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Read ``source`` as it comes; write each chunk to ``sink`` ``delay`` seconds after it was read (an empty
        chunk: the end, passed on as a close)."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        writing = asyncio.ensure_future(self._write(queue, sink))
        try:
            while data := await source.read(1 << 16):
                queue.put_nowait((self.loop.time() + self.delay, data))
            queue.put_nowait((self.loop.time() + self.delay, b""))
            await writing
        except OSError:
            pass
        finally:
            writing.cancel()
            sink.close()

    async def _write(self, queue: "asyncio.Queue[tuple[float, bytes]]", sink: asyncio.StreamWriter) -> None:
        while True:
            due, data = await queue.get()
            wait = due - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                return
            sink.write(data)
            await sink.drain()

    def close(self) -> None:
        """Stop listening and cut every connection."""
        async def stop() -> None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
