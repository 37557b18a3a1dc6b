"""A proxy of the tests' own, HTTP ``CONNECT`` and SOCKS5, in front of envtest servers; over TLS
(an ``https://`` proxy) when given a server context."""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import threading

__all__ = ["PRIVATE_HOST", "ConnectProxy", "PrefixGateway"]

#: a name no resolver knows (RFC 2606): only the test proxy reaches it
PRIVATE_HOST = "apiserver.invalid"


class ConnectProxy:
    """A proxy that tunnels an HTTP ``CONNECT host:port``, or a SOCKS5 ``CONNECT`` (at
    ``socks_url``, the same port), and records each target.

    It resolves `PRIVATE_HOST` itself, as a proxy in front of a private network
    does: a client can reach a server named so only through the proxy.
    """

    def __init__(self, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, 0), family=family)
        self._tls = tls
        self.port = int(self._listener.getsockname()[1])
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}"
        #: socks5h: the proxy resolves the name (a socks5:// client resolves it itself)
        self.socks_url = f"socks5h://127.0.0.1:{self._listener.getsockname()[1]}"
        self.targets: list[str] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, name="test/proxy", daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            t = threading.Thread(target=self._tunnel, args=(client,), name="test/proxy-conn")
            with self._lock:
                self._socks.append(client)
                self._threads.append(t)
            t.start()

    def _handshake(self, client: socket.socket) -> socket.socket:
        """``client``, over TLS when the proxy speaks it."""
        if self._tls is None:
            return client
        client.settimeout(5)
        client = self._tls.wrap_socket(client, server_side=True)
        client.settimeout(None)
        with self._lock:
            self._socks.append(client)
        return client

    def _tunnel(self, client: socket.socket) -> None:
        try:
            client = self._handshake(client)
            first = _exactly(client, 1)
            target = self._socks5(client) if first == b"\x05" else self._connect(client, first)
        except (OSError, EOFError):  # ssl.SSLError is an OSError
            client.close()
            return
        if target is None:
            client.close()
            return
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection(
            ("127.0.0.1" if host == PRIVATE_HOST else host, int(port))
        )
        with self._lock:
            self.targets.append(target)
            self._socks.append(upstream)
        if first == b"\x05":  # succeeded, bound to 0.0.0.0:0
            client.sendall(b"\x05\x00\x00\x01" + bytes(6))
        else:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self._relay(client, upstream)

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Pass bytes both ways until either side ends; what the client sends goes through
        `_request`, which may answer it itself (None)."""
        pair = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [])
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    if isinstance(s, ssl.SSLSocket) and s.pending():  # decrypted, not selectable
                        data += s.recv(s.pending())
                    forward = self._request(client, data) if s is client else data
                    if forward is not None:
                        pair[s].sendall(forward)
        except (OSError, ValueError):  # ValueError: `close` closed a socket select waits on
            return
        finally:
            client.close()
            upstream.close()

    def _request(self, client: socket.socket, data: bytes) -> bytes | None:
        return data

    @staticmethod
    def _connect(client: socket.socket, head: bytes) -> str | None:
        """An HTTP CONNECT's target (``host:port``); None after refusing another method."""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return None
            head += chunk
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return None
        return target

    @staticmethod
    def _socks5(client: socket.socket) -> str | None:
        """A SOCKS5 CONNECT's target (RFC 1928, no authentication); None after refusing."""
        methods = _exactly(client, _exactly(client, 1)[0])
        if 0 not in methods:
            client.sendall(b"\x05\xff")
            return None
        client.sendall(b"\x05\x00")
        _version, command, _reserved, kind = _exactly(client, 4)
        if kind == 1:
            host = socket.inet_ntoa(_exactly(client, 4))
        elif kind == 3:
            host = _exactly(client, _exactly(client, 1)[0]).decode()
        else:
            host = socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))
        port = int.from_bytes(_exactly(client, 2), "big")
        if command != 1:
            client.sendall(b"\x05\x07\x00\x01" + bytes(6))  # command not supported
            return None
        return f"{host}:{port}"

    def close(self) -> None:
        with self._lock:
            socks, threads = [self._listener, *self._socks], list(self._threads)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in threads:
            t.join(5)
        assert not any(t.is_alive() for t in threads), "the test proxy's threads did not stop"


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the client went away")
        data += chunk
    return data


_REQUEST_LINE = re.compile(rb"(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\S+) HTTP/1\.1\r\n")


class PrefixGateway(ConnectProxy):
    """An API gateway (as Rancher's) that serves one cluster under ``prefix``: it takes each
    connection (over TLS with ``tls``, on ``host``) to ``target`` (a port on 127.0.0.1),
    taking ``prefix`` off each request's path; a request without it gets a 404 (its path
    is kept in ``unprefixed``)."""

    def __init__(
        self, target: int, prefix: bytes, *, tls: ssl.SSLContext | None, host: str = "127.0.0.1"
    ) -> None:
        self._target, self._prefix = target, prefix
        self.unprefixed: list[str] = []
        super().__init__(tls, host)

    def _tunnel(self, client: socket.socket) -> None:
        try:
            client = self._handshake(client)
            upstream = socket.create_connection(("127.0.0.1", self._target))
        except OSError:
            client.close()
            return
        with self._lock:
            self._socks.append(upstream)
        self._relay(client, upstream)

    def _request(self, client: socket.socket, data: bytes) -> bytes | None:
        line = _REQUEST_LINE.match(data)  # a request's head comes in one piece
        if line is None or not self._prefix:
            return data
        if not line.group(1).startswith(self._prefix + b"/"):
            self.unprefixed.append(line.group(1).decode())
            client.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return None
        return data.replace(b" " + self._prefix + b"/", b" /", 1)
