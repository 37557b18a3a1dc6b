from __future__ import annotations

import gzip
import ipaddress
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mcruntime._listen import bind_server, format_address
from mcruntime._serving import Connections, DeadlineRequestHandler
from mcruntime._threads import start_thread
from mcruntime.healthz import Checks
from mcruntime.manager._metrics_auth import Denied, MetricsAuth

if TYPE_CHECKING:
    from mcruntime.metrics import Metrics

#: how long a connection may stay silent (its TLS handshake, a read or write) before it is
#: closed: a client that connects and never speaks does not keep a thread; reading a whole
#: request has a deadline too (`mcruntime._serving.READ_TIMEOUT`), however it is paced
CONNECTION_TIMEOUT = 30.0

log = logging.getLogger("mcruntime.manager")


def serving_tls(cert_dir: str | None, host: str) -> Callable[[], ssl.SSLContext]:
    """The TLS context of a server: from ``cert_dir``'s ``tls.crt`` and ``tls.key``
    (reloaded when they change), or a self-signed pair for ``host`` made now, whose
    key never stays on disk."""
    from mcruntime.webhook import CertWatcher, generate_certificates

    if cert_dir is not None:
        return CertWatcher(
            os.path.join(cert_dir, "tls.crt"), os.path.join(cert_dir, "tls.key")
        ).context
    hosts = ["localhost", "127.0.0.1"]
    if host not in ("", "0.0.0.0", "::", *hosts):
        hosts.append(host)
    pair = generate_certificates(hosts, common_name="mcruntime-metrics")
    ctx = pair.context()
    return lambda: ctx


class _Handler(DeadlineRequestHandler):
    server: _Server
    timeout = CONNECTION_TIMEOUT

    def setup(self) -> None:
        threading.current_thread().name = f"mcruntime/manager/{self.server.name}-connection"
        super().setup()  # sets the connection's timeout
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()  # here, not in the thread that accepts

    #: HEAD: the answer's status and headers, no body (Go's net/http drops it)
    _head = False

    def do_HEAD(self) -> None:  # noqa: N802
        self._head = True
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        """Every method is answered as GET, as controller-runtime's probe handlers
        (pkg/healthz/healthz.go) and promhttp do: they never look at it."""
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        verbose = "verbose" in query
        path = url.path.rstrip("/") or "/"
        srv = self.server
        if path == "/metrics" and srv.metrics is not None:
            if srv.auth is not None:
                try:
                    srv.auth.check(self.headers.get("Authorization"), path)
                except Denied as denied:
                    self._send(
                        denied.status, f"{denied.message}\n".encode(), "text/plain; charset=utf-8"
                    )
                    return
            body = srv.metrics.exposition()
            if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                # Prometheus asks for it: at 1,000 clusters 8 MB of text become ~0.3 MB in
                # ~13 ms (level 1; zlib works without the GIL)
                self._send(200, gzip.compress(body, 1), CONTENT_TYPE_LATEST, encoding="gzip")
            else:
                self._send(200, body, CONTENT_TYPE_LATEST)
            return
        if srv.debug is not None and (path == "/debug" or path.startswith("/debug/")):
            page = srv.debug(path)
            if page is None:
                self._send(404, b"no such debug page: see /debug\n", "text/plain")
            else:
                self._send(200, page.encode(), "text/plain; charset=utf-8")
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
                reasons = _loopback(self.client_address[0])
                if not reasons:
                    for r in results:
                        if not r.ok:
                            log.debug("%s check %s failed: %s", prefix[1:], r.name, r.detail)
                status, report = Checks.render(
                    results, prefix[1:], verbose, query.get("exclude", ()), reasons=reasons
                )
                self._send(status, report.encode(), "text/plain; charset=utf-8")
                return
        self._send(404, b"not found\n", "text/plain")

    def _send(
        self, status: int, body: bytes, content_type: str, *, encoding: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding is not None:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self._head:
            self.wfile.write(body)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        log.debug("http: " + format, *args)


def _loopback(host: str) -> bool:
    """Whether a client at ``host`` is on this machine (or this pod: ``kubectl
    port-forward``, ``kubectl exec ... curl localhost``): only such callers read why a
    check fails; others (the kubelet, anyone reaching the pod's address) read "reason
    withheld", as from controller-runtime's public health endpoints."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # (a dual-stack socket's IPv4 client)
    return ip.is_loopback


class _Server(ThreadingHTTPServer):
    # each connection's thread is joined by server_close, after `cut_connections`
    daemon_threads = False
    block_on_close = True
    #: the listen backlog: the kernel's (``somaxconn``), as Go's ``net.Listen``; socketserver's
    #: 5 drops the SYNs of a burst, and a dropped SYN is retried after 1 s (a probe's timeout)
    request_queue_size = socket.SOMAXCONN
    metrics: Metrics | None = None
    healthz: Checks | None = None
    readyz: Checks | None = None
    name = ""
    #: the current TLS context (serving over HTTPS), asked for each connection
    tls: Callable[[], ssl.SSLContext] | None = None
    auth: MetricsAuth | None = None
    #: the debug pages: path -> text, None for a path that is no page
    debug: Callable[[str], str | None] | None = None

    def server_activate(self) -> None:
        self.connections = Connections(f"the {self.name or 'http'} server")
        super().server_activate()

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            # the handshake runs in the connection's own thread (_Handler.setup)
            sock = self.tls().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return self.connections.admit(request)  # (refused: closed by the caller)

    def shutdown_request(self, request: Any) -> None:
        self.connections.remove(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        """End every open connection, so its thread ends (a silent client's included)."""
        self.connections.cut_all()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hung up, timed out or failed its TLS handshake: nothing to report
        log.debug("http: connection from %s ended with an error", client_address, exc_info=True)


class ProbeServer:
    """Serves metrics, probes or the debug pages on one address, from a thread of its own."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        name: str,
        option: str,
        metrics: Metrics | None = None,
        healthz: Checks | None = None,
        readyz: Checks | None = None,
        tls: Callable[[], ssl.SSLContext] | None = None,
        auth: MetricsAuth | None = None,
        debug: Callable[[str], str | None] | None = None,
    ) -> None:
        self._server = bind_server(
            _Server, address, _Handler, what=name.replace("+", " and "), option=option
        )
        self._server.metrics, self._server.healthz, self._server.readyz = metrics, healthz, readyz
        self._server.tls, self._server.auth, self._server.debug = tls, auth, debug
        self._server.name = self.name = name
        self._server.connections.what = f"the {name} server"
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread = start_thread(
            self._server.serve_forever, f"mcruntime/manager/{self.name}-server", 0.2
        )
        scheme = "https" if self._server.tls is not None else "http"
        log.info("serving %s on %s://%s", self.name, scheme, format_address(*self.address))

    def stop(self) -> None:
        """Stop serving and close the socket; one bound but never started is only closed
        (``shutdown()`` would wait for ever for a ``serve_forever`` that never ran)."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.cut_connections()
        self._server.server_close()  # joins the connections' threads
        if self._thread is not None:
            self._thread.join(5)
