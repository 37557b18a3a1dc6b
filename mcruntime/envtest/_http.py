"""Minimal HTTP/1.1 over asyncio streams: keep-alive, Content-Length and chunked bodies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from mcruntime.envtest._tls import PeerCertificate

__all__ = ["HTTPRequest", "Response", "Stream", "Connection", "serve_connection"]

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
#: a kept-alive connection with no new request this long (seconds) is closed, as
#: kube-apiserver's server closes it (k8s.io/apiserver ``SecureServingInfo.Serve``:
#: ``IdleTimeout: 90 * time.Second``); clients meet a server that closed an idle connection
IDLE_TIMEOUT = 90.0
#: a request's line and headers must come within this (seconds) of its start (the
#: connection's, or its first byte's on a kept-alive one), else the connection is closed
#: unanswered (``ReadHeaderTimeout: 32 * time.Second``)
READ_HEADER_TIMEOUT = 32.0


@dataclass(slots=True)
class HTTPRequest:
    """One parsed HTTP request."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    peer: tuple[str, tuple[str, ...]] | None = (
        None  # (user, groups) of a verified client certificate
    )
    #: every header line as (lower-cased name, value), repeated names included
    #: (``Impersonate-Group``); ``headers`` keeps the last value of each name
    header_lines: list[tuple[str, str]] = field(default_factory=list)
    #: the query string as sent (``query`` keeps the last value of each name)
    raw_query: str = ""

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower-case), in the order sent."""
        return [v for k, v in self.header_lines if k == name]

    @property
    def media_type(self) -> str:
        """The body's Content-Type without its parameters, lower-cased ("" when absent)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


@dataclass(slots=True)
class Response:
    """A complete response with a body."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


class Stream(Protocol):
    """A streamed (chunked) response, e.g. a watch; ``run`` writes it on ``conn``."""

    async def run(self, conn: Connection) -> None: ...


class _BadRequest(Exception):
    pass


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


class Connection:
    """The server side of one client connection."""

    __slots__ = ("reader", "writer", "closing", "gate", "peer", "_eof")

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        gate: asyncio.Event | None = None,
        peer: PeerCertificate | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.closing = False
        #: while this event is clear the server is frozen: nothing is handled or written
        self.gate = gate
        self.peer = peer
        self._eof: asyncio.Future[bytes] | None = None

    async def thawed(self) -> None:
        """Return once the server is not frozen (at once when it is not)."""
        gate = self.gate
        if gate is not None and not gate.is_set():
            await gate.wait()

    def head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_phrase(status)}"]
        lines.extend(f"{k}: {v}" for k, v in headers)
        if self.closing:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, resp: Response) -> None:
        await self.thawed()
        if resp.status == 204:  # no content: neither a type nor a length (RFC 9110)
            headers = list(resp.headers)
        else:
            headers = [("Content-Type", resp.content_type), ("Content-Length", str(len(resp.body)))]
            headers.extend(resp.headers)
        self.writer.write(self.head(resp.status, headers) + resp.body)
        await self.writer.drain()

    async def start_chunked(
        self, status: int = 200, content_type: str = "application/json"
    ) -> None:
        await self.thawed()
        headers = [("Content-Type", content_type), ("Transfer-Encoding", "chunked")]
        self.writer.write(self.head(status, headers))
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        await self.thawed()
        if data:
            self.writer.write(b"%x\r\n%b\r\n" % (len(data), data))
            await self.writer.drain()

    async def end_chunked(self) -> None:
        await self.thawed()
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    def peer_gone(self) -> asyncio.Future[bytes]:
        """A future done when the client closes its side (or sends anything: a protocol error mid-stream)."""
        if self._eof is None:
            self._eof = asyncio.ensure_future(self.reader.read(1))
            # over TLS a vanished peer is an error (BrokenPipe, SSL errors), not EOF: it only
            # means "gone", so retrieve it (else asyncio logs every one of them)
            self._eof.add_done_callback(_retrieve)
        return self._eof

    async def stop_watching_peer(self) -> bool:
        """Stop the `peer_gone()` read before the response ends; False if the peer went away.

        Must run before the last bytes of a streamed response are written: once the
        client has them it may send its next request on this connection.
        """
        eof, self._eof = self._eof, None
        if eof is None:
            return True
        if not eof.done():
            eof.cancel()
            await asyncio.wait([eof])
        if eof.cancelled():
            return True
        self.closing = True
        return False

    def abort(self) -> None:
        """Cut the connection now; one already closing too (a TLS close waits for the client)."""
        self.writer.transport.abort()


def _retrieve(fut: asyncio.Future[bytes]) -> None:
    if not fut.cancelled():
        fut.exception()


async def _read_request(
    reader: asyncio.StreamReader, kept_alive: bool = False
) -> HTTPRequest | None:
    """The next request of a connection; None when it ends (closed by the client, idle past
    `IDLE_TIMEOUT` after an earlier request, or its head not read within
    `READ_HEADER_TIMEOUT`: the connection is then closed unanswered, as Go's server does)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        first = await asyncio.wait_for(
            reader.readexactly(1), IDLE_TIMEOUT if kept_alive else READ_HEADER_TIMEOUT
        )
    except asyncio.IncompleteReadError:
        return None  # closed between requests
    except TimeoutError:
        return None
    if kept_alive:
        began = loop.time()  # (the head's time runs from its first byte)
    if first == b"\x16":
        # a TLS ClientHello on the plain-HTTP port: refuse at once, as Go's server does
        # (its request line does not parse), instead of waiting for a head that never comes
        raise _BadRequest("client sent a TLS handshake to an HTTP server")
    try:
        head = first + await asyncio.wait_for(
            reader.readuntil(b"\r\n\r\n"), began + READ_HEADER_TIMEOUT - loop.time()
        )
    except asyncio.IncompleteReadError as e:
        if (first + e.partial).strip():
            raise _BadRequest("incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest("request head too large") from None
    except TimeoutError:
        return None
    lines = head[:-4].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest("malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {"::version": version}
    header_lines: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest("malformed header line")
        header_lines.append((name.strip().lower(), value.strip()))
    headers.update(header_lines)
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    elif "content-length" in headers:
        try:
            n = int(headers["content-length"])
        except ValueError:
            raise _BadRequest("bad Content-Length") from None
        if n < 0 or n > MAX_BODY:
            raise _BadRequest("bad Content-Length")
        if n:
            body = await reader.readexactly(n)
    split = urlsplit(target)
    query = dict(parse_qsl(split.query, keep_blank_values=True)) if split.query else {}
    return HTTPRequest(
        method.upper(),
        unquote(split.path),
        query,
        headers,
        body,
        header_lines=header_lines,
        raw_query=split.query,
    )


def _wants_close(req: HTTPRequest) -> bool:
    conn = req.headers.get("connection", "").lower()
    if req.headers.get("::version") == "HTTP/1.0":
        return "keep-alive" not in conn
    return "close" in conn


Handler = Callable[[HTTPRequest], Awaitable["Response | Stream"]]


async def serve_connection(conn: Connection, handler: Handler) -> None:
    """Serve requests on one connection until the client or the server closes it."""
    writer = conn.writer
    kept_alive = False
    try:
        while not conn.closing:
            try:
                req = await _read_request(conn.reader, kept_alive)
                kept_alive = True
            except (_BadRequest, ValueError) as e:
                conn.closing = True
                await conn.send(Response(400, str(e).encode(), "text/plain"))
                break
            if req is None:
                break
            # its certificate's dates are checked at every request, as kube-apiserver does
            req.peer = None if conn.peer is None else conn.peer.identity_now()
            if _wants_close(req):
                conn.closing = True
            await conn.thawed()  # a frozen server reads requests and never answers them
            result = await handler(req)
            if isinstance(result, Response):
                await conn.send(result)
            else:
                await result.run(conn)
                if not await conn.stop_watching_peer():
                    break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        if conn._eof is not None and not conn._eof.done():
            conn._eof.cancel()
        if not writer.is_closing():
            writer.close()
