from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mcruntime._threads import start_thread
from mcruntime.healthz import Checks

if TYPE_CHECKING:
    from mcruntime.metrics import Metrics

log = logging.getLogger("mcruntime.manager")


def parse_bind_address(address: str | None) -> tuple[str, int] | None:
    """``"host:port"``/``":port"`` -> (host, port); None, "" or "0" disable the server."""
    if address in (None, "", "0"):
        return None
    assert address is not None
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"bad bind address {address!r}: expected host:port or :port")
    try:
        return (host or "0.0.0.0", int(port))
    except ValueError:
        raise ValueError(f"bad bind address {address!r}: port {port!r} is not a number") from None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
        path = url.path.rstrip("/") or "/"
        srv = self.server
        if path == "/metrics" and srv.metrics is not None:
            self._send(200, srv.metrics.exposition(), CONTENT_TYPE_LATEST)
            return
        for prefix, checks in (("/healthz", srv.healthz), ("/readyz", srv.readyz)):
            if checks is None:
                continue
            if path == prefix or path.startswith(prefix + "/"):
                only = path[len(prefix) + 1 :] or None
                results = checks.run(only)
                if only is not None and not results:
                    self._send(
                        404, f"no {prefix[1:]} check named {only!r}\n".encode(), "text/plain"
                    )
                    return
                status, body = Checks.render(results, prefix[1:], verbose)
                self._send(status, body.encode(), "text/plain; charset=utf-8")
                return
        self._send(404, b"not found\n", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("http: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    metrics: Metrics | None = None
    healthz: Checks | None = None
    readyz: Checks | None = None


class ProbeServer:
    """Serves metrics and/or probes on one address, from a thread of its own."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        name: str,
        metrics: Metrics | None = None,
        healthz: Checks | None = None,
        readyz: Checks | None = None,
    ) -> None:
        self._server = _Server(address, _Handler)
        self._server.metrics, self._server.healthz, self._server.readyz = metrics, healthz, readyz
        self.name = name
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread = start_thread(
            self._server.serve_forever, f"mcruntime/manager/{self.name}-server", 0.2
        )
        log.info("serving %s on %s:%d", self.name, *self.address)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
