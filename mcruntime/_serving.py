"""What a client may hold of the library's own HTTP servers (metrics, probes, debug pages,
webhooks): a deadline for reading each request, and a bound on open connections.

**A request is read within `READ_TIMEOUT` seconds** (its request line and headers, and a
webhook's body), counted from when the server starts waiting for it, however the client
paces its bytes: a socket timeout alone is reset by every byte, so a client sending one
every 20 s would hold a connection and its thread for ever. controller-runtime builds
every server (metrics, probes, pprof, webhook) with ``ReadHeaderTimeout: 32 * time.Second``
(``pkg/internal/httpserver/server.go``), which Go also applies to an idle keep-alive
connection when no ``IdleTimeout`` is set: the same here.

**At most `MAX_CONNECTIONS` connections per server.** When a new one would pass it, the
oldest connection still waiting for (or reading) its request is closed to make room, so a
kubelet probe, which sends its request at once, is answered while slow clients hold the
rest; when every connection is being answered, the new one is closed at once.

**The deadline a client gives** in the ``?timeout=`` of its URL (a Go duration, as
client-go's ``Request.Timeout`` writes it, and kube-apiserver's webhook dispatcher when it
calls an admission webhook) is read by `asked_timeout`.

Tests lower both constants with ``monkeypatch.setattr(mcruntime._serving, ...)``: they are
read when used.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from mcruntime._goduration import parse_go_duration

__all__ = [
    "MAX_CONNECTIONS",
    "READ_TIMEOUT",
    "Connections",
    "DeadlineRequestHandler",
    "asked_timeout",
]

log = logging.getLogger("mcruntime")

#: seconds to read a request (line, headers, a webhook's body), or to wait for the next one
#: on a kept-alive connection: controller-runtime's ``ReadHeaderTimeout``
READ_TIMEOUT = 32.0
#: open connections per server; beyond, the oldest one still reading its request is closed
MAX_CONNECTIONS = 256


def asked_timeout(query: str) -> float | None:
    """The seconds a request's ``timeout`` query parameter gives (a Go duration: ``10s``,
    ``1m0s``, ``1.5s``), of the query string ``query``; None when it has none, or none that
    is a positive duration."""
    from urllib.parse import parse_qs

    values = parse_qs(query).get("timeout")
    text = values[-1] if values else ""
    asked = parse_go_duration(text)
    return asked if asked is not None and asked > 0 else None


class Connections:
    """The open connections of one server, at most `MAX_CONNECTIONS`; thread-safe."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._lock = threading.Lock()
        #: connection -> whether it waits for or reads its request (oldest first)
        self._open: dict[Any, bool] = {}
        self._full = False

    def admit(self, conn: Any) -> bool:
        """Count ``conn`` in; False when every connection is being answered (close it)."""
        evicted = None
        with self._lock:
            if len(self._open) >= MAX_CONNECTIONS:
                evicted = next((c for c, reading in self._open.items() if reading), None)
                if evicted is None:
                    if not self._full:
                        self._full = True
                        log.warning(
                            "%s: %d connections are being answered: closing new ones until "
                            "one ends",
                            self.what,
                            MAX_CONNECTIONS,
                        )
                    return False
                del self._open[evicted]
            elif self._full:
                self._full = False
            self._open[conn] = True
        if evicted is not None:
            log.debug(
                "%s: at %d connections: closed the oldest still reading", self.what, MAX_CONNECTIONS
            )
            _cut(evicted)
        return True

    def reading(self, conn: Any) -> None:
        """``conn`` waits for its next request: the newest that may be closed for room."""
        with self._lock:
            if conn in self._open:
                del self._open[conn]
                self._open[conn] = True

    def answering(self, conn: Any) -> None:
        """``conn``'s request is read: it is not closed for room."""
        with self._lock:
            if conn in self._open:
                self._open[conn] = False

    def remove(self, conn: Any) -> None:
        with self._lock:
            self._open.pop(conn, None)

    def cut_all(self) -> None:
        """End every open connection, so its thread ends (a silent client's included)."""
        with self._lock:
            open_now = list(self._open)
        for conn in open_now:
            _cut(conn)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)


def _cut(conn: Any) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


class _DeadlineReader(io.RawIOBase):
    """Reads a socket, each read bounded by the request's deadline (and ``timeout``)."""

    def __init__(self, sock: socket.socket, timeout: float | None) -> None:
        self._sock = sock
        self._timeout = timeout
        self.deadline = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read within its deadline")
        self._sock.settimeout(left if self._timeout is None else min(left, self._timeout))
        return self._sock.recv_into(buffer)


class DeadlineRequestHandler(BaseHTTPRequestHandler):
    """A request handler whose requests are read within `READ_TIMEOUT`, for a server with
    a ``connections`` attribute ([`Connections`][mcruntime._serving.Connections]).

    A handler that reads a body calls `request_read` once it has it; others are marked
    answering when their headers are read."""

    #: set on the server class
    server: Any
    #: whether the request is read once its headers are (no body to read)
    read_with_headers = True

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # (the socket's own file: replaced by one with the deadline)
        self._reader = _DeadlineReader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        self._reader.deadline = time.monotonic() + READ_TIMEOUT
        self.server.connections.reading(self.connection)
        super().handle_one_request()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok and self.read_with_headers:
            self.request_read()
        return ok

    def request_read(self) -> None:
        """The request is read: the answer is written under the connection's timeout."""
        self._reader.deadline = math.inf
        self.connection.settimeout(self.timeout)
        self.server.connections.answering(self.connection)
