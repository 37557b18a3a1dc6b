"""``Proxy``: a TCP proxy in front of an APIServer that can freeze one client's path.

`APIServer.freeze()` hangs a server for every client. Some faults hang only
one path: a replica whose network to the API server is black-holed while its
peers still reach it (the fault that makes two leaders). Point that client's
kubeconfig at a `Proxy` and freeze the proxy: connections stay open, bytes
stop flowing both ways, new connections are accepted and go nowhere. TLS
passes through untouched. ``latency`` slows that one path down instead: a
slow network between one client and its API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import threading
from typing import Any

from mcruntime.envtest import _loop
from mcruntime.envtest._server import HOST, APIServer

__all__ = ["Proxy"]

_CHUNK = 1 << 16

log = logging.getLogger("mcruntime.envtest")


class Proxy:
    """Forwards a loopback port to ``server``; `freeze`/`thaw` stop and resume the traffic;
    `reset_connections` cuts the connections through it, as a replica behind a load balancer
    going away does.

    ``latency`` (seconds, settable while running) delays every chunk of bytes
    forwarded, in either direction: a request and its answer take at least
    twice as long, on top of the server's own
    [`latency`][mcruntime.envtest.APIServer] (which every client sees).
    """

    def __init__(self, server: APIServer, *, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError(f"latency must not be negative, got {latency}")
        self.server = server
        self.latency = float(latency)
        self.host = HOST
        self.port = 0
        self._gate = asyncio.Event()
        self._gate.set()
        self._listener: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._lifecycle = threading.Lock()
        #: whether a connection handed over now is forwarded (read and written on the loop)
        self._accepting = False

    def __repr__(self) -> str:
        state = "frozen" if self.frozen else ("running" if self.running else "stopped")
        return f"<Proxy :{self.port} -> {self.server.name!r} {state}>"

    @property
    def running(self) -> bool:
        return self._listener is not None

    @property
    def frozen(self) -> bool:
        """True between `freeze` and `thaw`."""
        return not self._gate.is_set()

    @property
    def url(self) -> str:
        """The proxy's URL, with the server's scheme."""
        scheme = self.server.url.split("://", 1)[0]
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> Proxy:
        """Listen; returns once connections are accepted."""
        with self._lifecycle:
            if self._listener is None:
                _loop.acquire()
                try:
                    self._listener = _loop.run(self._listen())
                except BaseException:
                    _loop.release()
                    raise
        return self

    async def _listen(self) -> asyncio.base_events.Server:
        listener = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = listener.sockets[0].getsockname()[1]
        self._accepting = True
        return listener

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if not self._accepting:  # accepted as the proxy stopped: cut, as stop() does
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._gate.wait()  # a frozen path accepts and goes nowhere
            up_reader, upstream = await asyncio.open_connection(self.server.host, self.server.port)
            self._writers.add(upstream)
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
            self._tasks.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(_CHUNK):
                if self.latency > 0:
                    await asyncio.sleep(self.latency)
                await self._gate.wait()
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()

    def _call(self, fn: Any) -> None:
        async def call() -> None:
            fn()

        if self._listener is not None:
            _loop.run(call())
        else:
            fn()

    def freeze(self) -> None:
        """Stop forwarding: open connections stay open and silent, new ones go nowhere."""
        self._call(self._gate.clear)

    def thaw(self) -> None:
        """Forward again, the bytes held meanwhile first."""
        self._call(self._gate.set)

    def reset_connections(self) -> None:
        """Reset every connection through the proxy (a TCP RST to its client) and go on accepting.

        As a load balancer in front of several API server replicas does when the replica
        behind a connection goes away (a rolling upgrade, a node drained): requests and
        watches in flight break, and the next connection reaches a replica that answers
        (here: the same server). A no-op while stopped.
        """
        self._call(self._reset)

    def _reset(self) -> None:
        for w in list(self._writers):
            w.transport.abort()

    def stop(self) -> None:
        """Close the listener and every connection through the proxy; idempotent."""
        with self._lifecycle:
            if self._listener is None:
                return
            try:
                _loop.run(self._shutdown())
            finally:
                self._listener = None
                _loop.release()

    async def _shutdown(self) -> None:
        assert self._listener is not None
        self._accepting = False
        self._listener.close()
        for w in list(self._writers):
            w.transport.abort()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        self._gate.set()
        # every accepted connection was aborted above, or is by its handler (``_accepting``);
        # bounded all the same: since Python 3.12.1 this waits for each accepted connection
        try:
            await asyncio.wait_for(self._listener.wait_closed(), timeout=5)
        except TimeoutError:
            log.warning(
                "Proxy for %r: a connection is still open 5s after stop()", self.server.name
            )

    def kubeconfig(self, context: str | None = None) -> dict[str, Any]:
        """The server's kubeconfig, pointing at this proxy instead."""
        config = copy.deepcopy(self.server.kubeconfig(context))
        for entry in config.get("clusters") or ():
            entry["cluster"]["server"] = self.url
        return config

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
