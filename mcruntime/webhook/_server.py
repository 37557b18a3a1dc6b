"""The webhook server: HTTPS, one per manager, serving admission and conversion reviews.

**Every request knows its cluster** through its URL path: a hook registered at
``/validate-x`` is served at ``/validate-x`` for the local cluster (``""``) and
at ``/clusters/<name>/validate-x`` for provider cluster ``<name>`` (the name
URL-quoted). Paths, unlike client identities, need no per-cluster client
certificate and survive any TLS termination in between; the installer writes
each cluster's own URL into that cluster's webhook configurations.

Threads: ``mcruntime/webhook/server`` accepts connections,
``mcruntime/webhook/certs`` checks the certificate files once a second (with
``cert_dir``: a new CA bundle is re-installed in every cluster at once), or renews
generated certificates at two thirds of their validity (without ``cert_dir``: the new
CA joins the installed ``caBundle`` first, the certificate it signed is served after
``_ROTATION_OVERLAP``, then the old CA leaves the bundle),
``mcruntime/webhook/conn`` serves one connection each and
``mcruntime/webhook/handler_<n>`` run handlers within the deadline of their
request (what its API server says it waits, ``?timeout=``, else ``request_timeout``).
All end when the server stops, but a handler's that still runs (a thread cannot be
stopped): it ends when the handler returns, and the stop says which still run.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack
from urllib.parse import quote, unquote, urlsplit

from mcruntime import _json
from mcruntime._listen import bind_server, format_address
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._serving import Connections, DeadlineRequestHandler, asked_timeout
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.webhook._admission import (
    AdmissionHandler,
    AdmissionRequest,
    AdmissionResponse,
    Denied,
    as_handler,
    errored,
)
from mcruntime.webhook._certs import (
    CA_NAME,
    CERT_NAME,
    KEY_NAME,
    RELOAD_CHECK_INTERVAL,
    CABundleWatcher,
    CertWatcher,
    generate,
)
from mcruntime.webhook._conversion import (
    ConversionError,
    ConversionRequest,
    Converter,
    conversion_review,
)
from mcruntime.webhook._views import ViewError

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster
    from mcruntime.metrics import Metrics

__all__ = ["Hook", "WebhookServer", "WebhookServerOptions", "cluster_path"]

log = logging.getLogger("mcruntime.webhook")

DEFAULT_PORT = 9443
DEFAULT_REQUEST_TIMEOUT = 10.0
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
#: the largest admission request read (controller-runtime's is 7 MiB)
MAX_BODY = 8 << 20
#: the largest conversion request read: kube-apiserver sends a whole page of a list in one
#: ConversionReview (500 objects for an informer), which controller-runtime reads whatever
#: its size; read a MiB at a time (`_read_body`), so memory grows only with what is sent
MAX_CONVERSION_BODY = 512 << 20
_BODY_CHUNK = 1 << 20
#: a connection silent this many seconds (a read or a write) is closed; reading a whole
#: request, or waiting for the next one, has a deadline too (`mcruntime._serving.READ_TIMEOUT`)
IDLE_TIMEOUT = 30.0
CLUSTERS_PREFIX = "/clusters/"
#: the longest deadline a request's ``?timeout=`` gives its handler (unless ``request_timeout``
#: is longer): kube-apiserver's most ``timeoutSeconds``
MAX_ASKED_TIMEOUT = 30.0
#: how long generated certificates (the CA and the serving certificate) are valid
_GENERATED_VALIDITY = datetime.timedelta(days=365)
#: generated certificates are renewed when this share of their validity has passed
_RENEW_AT = 2 / 3
#: how long after a renewal added the new CA to the installed ``caBundle`` the serving
#: certificate it signed is served (the API servers read the new bundle meanwhile); at
#: most half of the old certificate's validity left then
_ROTATION_OVERLAP = 3600.0


def cluster_path(path: str, cluster_name: str) -> str:
    """The URL path of hook ``path`` for ``cluster_name`` (``""``: the local cluster)."""
    if not cluster_name:
        return path
    return f"{CLUSTERS_PREFIX}{quote(cluster_name, safe='')}{path}"


def _split_cluster(path: str) -> tuple[str, str]:
    if not path.startswith(CLUSTERS_PREFIX):
        return "", path
    name, sep, rest = path[len(CLUSTERS_PREFIX) :].partition("/")
    return unquote(name), ("/" + rest if sep else "")


def _not_bound() -> ssl.SSLContext:
    raise RuntimeError("the webhook server is not bound yet")


@dataclass
class WebhookServerOptions:
    """How the webhook server listens, where its certificates come from, and installation.

    With ``cert_dir`` the serving pair is read from ``cert_dir/tls.crt`` and
    ``cert_dir/tls.key`` and reloaded when they change; the CA bundle written
    into webhook configurations comes from ``ca_file`` (default
    ``cert_dir/ca.crt``; without that file, none is written: the API servers' system
    trust roots verify the certificate). Without ``cert_dir`` mcruntime generates a CA and a
    serving certificate for ``hosts`` and the host of ``url`` when the server starts, kept in memory (never
    on disk), valid a year and renewed at two thirds of it (the installed ``caBundle``
    follows); ``ca_bundle_file`` (if given) receives
    the CA bundle for whoever else needs it.
    """

    #: the address to listen on: ``""`` (the default) or ``"::"`` every address, IPv4 and
    #: IPv6, as controller-runtime's ``Server.Host`` ``""`` (Go's ``net.Listen``; only IPv4
    #: on a machine without IPv6); ``"0.0.0.0"`` every IPv4 address; an IPv6 literal
    #: (``"::1"``, no brackets) that address
    host: str = ""
    #: 0 picks a free port (see [`WebhookServer.port`][mcruntime.webhook.WebhookServer.port])
    port: int = DEFAULT_PORT
    cert_dir: str | None = None
    cert_name: str = CERT_NAME
    key_name: str = KEY_NAME
    ca_file: str | None = None
    #: DNS names and IP addresses of a generated serving certificate (the host of ``url`` is
    #: added to them)
    hosts: tuple[str, ...] = DEFAULT_HOSTS
    ca_bundle_file: str | None = None
    #: the deadline of a handler whose request says none: one taking longer is answered with
    #: an HTTP 504 (the API server's failurePolicy decides, as when its own timeoutSeconds
    #: ends the call). A request that says how long its API server waits (the ``?timeout=``
    #: kube-apiserver adds to every admission call: the hook's ``timeoutSeconds``; none on a
    #: conversion) gives its handler that long instead, up to 30 s (or this, if longer)
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: handlers running at once (requests beyond wait for a free worker); a hook whose
    #: handler runs past its deadline for one cluster on a quarter of them has that
    #: cluster's calls answered at once until one ends
    max_workers: int = 16
    #: opt-in: install webhook configurations (and CRD conversion) in every engaged cluster
    install: bool = False
    #: base URL the API servers reach this server at; default ``https://127.0.0.1:<port>``
    url: str | None = None
    #: name of the Mutating/ValidatingWebhookConfiguration objects installed
    install_name: str = "mcruntime-webhooks"
    #: deadline of the calls that install or remove one cluster's configuration
    install_timeout: float = 10.0
    #: seconds between checks of each cluster's installation: what was removed or
    #: changed is put back and this replica's hold renewed (a change seen by the
    #: installer's watches is put back at once; this check is what remains when they fail)
    install_resync: float = 60.0
    #: who this replica is among those installing the same configurations (recorded in
    #: their ``webhook.mcruntime.io/holders`` annotation); default ``<hostname>_<uuid>``
    install_identity: str | None = None


@dataclass
class Hook:
    """A registered path: an admission handler (mutating or validating) or a converter.

    ``rules`` (admissionregistration ``RuleWithOperations`` dicts) or ``kind``
    (its resource found by discovery in each cluster) let the installer write
    the hook into webhook configurations; without either it is only served.
    """

    path: str
    handler: Any = None
    converter: Converter | None = None
    mutating: bool = False
    kind: Any = None  # a KindLike; None for a hook with explicit rules or a conversion hook
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    rules: list[dict[str, Any]] | None = None
    failure_policy: str = "Fail"
    side_effects: str = "None"
    timeout_seconds: int = 10
    extra: dict[str, Any] = field(default_factory=dict)


class _HookOptions(TypedDict, total=False):
    """The fields of a [`Hook`][mcruntime.webhook.Hook] that ``WebhookServer.register`` takes as
    keywords (a misspelled one is an error to type checkers as to Python)."""

    converter: Converter | None
    mutating: bool
    kind: KindLike | None
    operations: tuple[str, ...]
    rules: list[dict[str, Any]] | None
    failure_policy: str
    side_effects: str
    timeout_seconds: int
    extra: dict[str, Any]


class _Handler(DeadlineRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    read_with_headers = False  # `WebhookServer._serve` says when the body is read
    disable_nagle_algorithm = True  # the answer's head and body go out at once, no 40 ms stall

    def do_POST(self) -> None:  # noqa: N802
        self.server.owner._serve(self)

    def do_GET(self) -> None:  # noqa: N802
        self.send_json(405, {"message": "webhooks take POST requests"})

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: continue only for a body that will be read."""
        length = _body_length(self)
        if length is None:
            return False
        if self.server.owner._too_large(self, length):
            return False
        return super().handle_expect_100()

    #: the HTTP status of the answer sent (None: none yet)
    status: int | None = None

    def send_json(self, status: int, body: Any) -> None:
        self.status = status
        data = _json.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("webhook http: " + format, *args)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    #: the listen backlog: the kernel's (``somaxconn``), as Go's ``net.Listen``; socketserver's
    #: 5 drops the SYNs of a burst, and a dropped SYN is retried after 1 s (a probe's timeout)
    request_queue_size = socket.SOMAXCONN
    owner: WebhookServer
    connections: Connections

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        ctx = self.owner._tls_context()
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return self.connections.admit(request)  # (refused: closed by the caller)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._run_connection,
            args=(request, client_address),
            name=thread_name("webhook", None, "conn"),
            daemon=True,
        )
        self.owner._conn_threads.add(t)
        t.start()

    def _run_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.connections.remove(request)
            self.owner._conn_threads.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        log.debug("webhook connection from %s ended: %r", client_address, exc)


class WebhookServer:
    """Serves admission and conversion webhooks over HTTPS; a runnable of the manager.

    Register handlers with [`register`][mcruntime.webhook.WebhookServer.register]
    (or through [`webhook_managed_by`][mcruntime.builder.webhook_managed_by]).
    Bad requests are answered with an AdmissionReview that refuses them (code
    400); a handler's exception refuses the request (code 500, logged with the
    cluster's name); a handler exceeding ``request_timeout`` is answered with an HTTP
    504, so the hook's ``failurePolicy`` decides; the server keeps serving either way.
    """

    def __init__(self, options: WebhookServerOptions | None = None) -> None:
        self.options = options or WebhookServerOptions()
        if not self.options.install_resync > 0:
            raise ValueError(
                f"install_resync must be a positive number of seconds, got {self.options.install_resync!r}"
            )
        self._hooks: dict[str, Hook] = {}
        self._lock = threading.RLock()
        self._http: _HTTPServer | None = None
        #: the serving TLS context now (set up by `bind`)
        self._tls_context: Callable[[], ssl.SSLContext] = _not_bound
        #: without ``cert_dir``: the generated pair served now, and when it was made
        #: (`time.monotonic`), renewed by the ``certs`` thread
        self._generated: ssl.SSLContext | None = None
        self._generated_at = 0.0
        self._ca_bundle: bytes | None = None
        #: with ``cert_dir``: the CA file, watched by the ``certs`` thread
        self._ca_watcher: CABundleWatcher | None = None
        self._certs_thread: threading.Thread | None = None
        self._certs_stop = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._serve_thread: threading.Thread | None = None
        self._conn_threads: set[threading.Thread] = set()
        self._running = threading.Event()
        self._stopped = False
        #: set by the manager: whether a cluster name may be served (engaged or engaging)
        self.cluster_known: Callable[[str], bool] | None = None
        #: set by the manager: where the requests to registered hooks are counted
        #: (``controller_runtime_webhook_*``)
        self.metrics: Metrics | None = None
        from mcruntime.webhook._install import Installer

        self._installer = Installer(self)
        #: failing conversions and timed-out handlers, a streak per cluster and path: the API
        #: server asks again (an informer relists, a client retries), so each streak is
        #: logged once, as the library's retries are
        self._streaks = FailureStreaks(log, "webhook")
        #: handler runs past ``request_timeout`` still holding a worker, per (path, cluster)
        self._overdue: dict[tuple[str, str], int] = {}
        self._overdue_lock = threading.Lock()
        #: the handler runs on the workers, and their (path, cluster); guarded by _overdue_lock
        self._runs: dict[Future[Any], tuple[str, str]] = {}
        #: done when the server stops: what waits for a handler's answer waits no more
        self._stopping: Future[None] = Future()

    # -- registration ------------------------------------------------------------------

    def register(
        self,
        path: str,
        handler: Hook
        | AdmissionHandler
        | Callable[[AdmissionRequest], AdmissionResponse]
        | None = None,
        **hook: Unpack[_HookOptions],
    ) -> Hook:
        """Serve ``handler`` (an [`AdmissionHandler`][mcruntime.webhook.AdmissionHandler] or a
        function of the request) at ``path``, for every cluster; keyword arguments fill the
        [`Hook`][mcruntime.webhook.Hook] (``mutating``, ``rules``, ``failure_policy``...)."""
        if isinstance(handler, Hook):
            h = handler
        else:
            h = Hook(path, as_handler(handler) if handler is not None else None, **hook)
        if not h.path.startswith("/") or h.path.startswith(CLUSTERS_PREFIX):
            raise ValueError(
                f"bad webhook path {h.path!r}: must start with / and not {CLUSTERS_PREFIX}"
            )
        if (h.handler is None) == (h.converter is None):
            raise ValueError(f"webhook {h.path}: give exactly one of a handler or a converter")
        with self._lock:
            if h.path in self._hooks:
                raise ValueError(f"a webhook is registered at {h.path} already")
            self._hooks[h.path] = h
        return h

    def hooks(self) -> list[Hook]:
        with self._lock:
            return list(self._hooks.values())

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (binds the socket if not done yet)."""
        self.bind()
        assert self._http is not None
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        """The base URL API servers reach this server at (``options.url`` or loopback)."""
        return (self.options.url or f"https://127.0.0.1:{self.port}").rstrip("/")

    def url_for(self, path: str, cluster_name: str = "") -> str:
        """The URL of hook ``path`` for ``cluster_name``."""
        return self.url + cluster_path(path, cluster_name)

    @property
    def ca_bundle(self) -> bytes:
        """PEM of the CA that signed the serving certificate (for ``caBundle`` fields): with
        ``cert_dir``, the content of the CA file now (re-read when it changes)."""
        self.bind()
        if self._ca_watcher is not None:
            self._ca_bundle = self._ca_watcher.bundle
        if self._ca_bundle is None:
            raise ValueError(
                f"no CA bundle: {self.options.cert_dir}/{CA_NAME} is missing and no ca_file is set"
            )
        return self._ca_bundle

    def _installed_ca_bundle(self) -> str | None:
        """The ``caBundle`` the installer writes (base64), or None when ``cert_dir`` has no
        ``ca.crt`` and no ``ca_file`` is given: a certificate from a CA the API servers
        trust (a public one), verified with their system trust roots, as kube-apiserver
        does for a webhook without ``caBundle``. A ``ca_file`` given but missing is an error."""
        self.bind()
        if self._ca_watcher is not None and self.options.ca_file is None:
            bundle = self._ca_watcher.bundle
            if bundle is None:
                return None
        return base64.b64encode(self.ca_bundle).decode()

    def bind(self) -> None:
        """Set up certificates and bind the listening socket (done by ``start`` otherwise)."""
        with self._lock:
            if self._http is not None:
                return
            if self._stopped:
                raise RuntimeError("a stopped webhook server cannot be started again")
            opts = self.options
            if opts.cert_dir is None:
                self._generated_at = time.monotonic()
                gen = generate(_generated_hosts(opts), _GENERATED_VALIDITY)
                self._ca_bundle = gen.ca_pem
                self._generated = gen.context()  # in memory: a killed process leaves no key
                self._tls_context = self._generated_context
            else:
                cert_dir = opts.cert_dir
                self._ca_watcher = CABundleWatcher(opts.ca_file or os.path.join(cert_dir, CA_NAME))
                self._ca_bundle = self._ca_watcher.bundle
                if self._ca_bundle is None and opts.ca_file is None and opts.install:
                    log.info(
                        "webhook: no %s in %s and no ca_file: the webhook configurations are "
                        "installed without caBundle, so API servers verify the serving "
                        "certificate with their system trust roots (a CA file that appears "
                        "there later is installed)",
                        CA_NAME,
                        cert_dir,
                    )
                certs = CertWatcher(
                    os.path.join(cert_dir, opts.cert_name), os.path.join(cert_dir, opts.key_name)
                )
                self._tls_context = certs.context
            if opts.ca_bundle_file and self._ca_bundle is not None:
                Path(opts.ca_bundle_file).write_bytes(self._ca_bundle)
            http = bind_server(
                _HTTPServer,
                (opts.host, opts.port),
                _Handler,
                what="webhooks",
                option="WebhookServerOptions host and port",
            )
            http.owner = self
            http.connections = Connections("the webhook server")
            self._http = http

    def start(self, stop: threading.Event | None = None) -> None:
        """Serve until ``stop`` is set (the manager's runnable contract); without ``stop``, return
        once serving (stop with [`stop`][mcruntime.webhook.WebhookServer.stop])."""
        self.bind()
        assert self._http is not None
        with self._lock:
            if self._serve_thread is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.options.max_workers,
                    thread_name_prefix=thread_name("webhook", None, "handler"),
                )
                self._serve_thread = start_thread(
                    self._http.serve_forever, thread_name("webhook", None, "server"), 0.2
                )
                if self._ca_watcher is not None or self._generated is not None:
                    self._certs_thread = start_thread(
                        self._watch_certs
                        if self._ca_watcher is not None
                        else self._renew_generated,
                        thread_name("webhook", None, "certs"),
                    )
                self._running.set()
                log.info(
                    "webhook server listening on %s", format_address(self.options.host, self.port)
                )
        if stop is not None:
            stop.wait()
            self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: the listener, open connections and handler threads end; idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            http, thread, executor = self._http, self._serve_thread, self._executor
        deadline = time.monotonic() + timeout
        self._running.clear()
        self._stopping.set_result(None)
        self._certs_stop.set()
        if self._certs_thread is not None:
            self._certs_thread.join(max(0.1, deadline - time.monotonic()))
        self._installer.stop(max(0.0, deadline - time.monotonic()))
        if http is not None:
            if thread is not None:
                http.shutdown()
                thread.join(max(0.1, deadline - time.monotonic()))
            http.server_close()
        if http is not None:
            http.connections.cut_all()
        for t in list(self._conn_threads):
            t.join(max(0.1, deadline - time.monotonic()))
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        self._say_runs_left()
        log.info("webhook server stopped")

    def _say_runs_left(self) -> None:
        """Say which handlers still run as the server stops: their callers are gone, but a
        thread cannot be stopped, so each keeps its worker's thread until it returns."""
        with self._overdue_lock:
            left = sorted(where for f, where in self._runs.items() if not f.done())
        if not left:
            return
        log.warning(
            "webhook server stopping with %d handler%s still running (%s); %s thread%s when %s",
            len(left),
            "" if len(left) == 1 else "s",
            ", ".join(f"{path} for cluster {display_name(cluster)}" for path, cluster in left),
            "its" if len(left) == 1 else "their",
            " ends" if len(left) == 1 else "s end",
            "it returns" if len(left) == 1 else "they return",
        )

    @property
    def running(self) -> bool:
        return self._running.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the server serves; False on timeout."""
        return self._running.wait(timeout)

    def ready_check(self) -> None:
        """Readiness (``/readyz/webhook``): the server accepts connections."""
        if not self._running.is_set():
            raise RuntimeError("the webhook server is not serving")
        host = self.options.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"  # (a dual-stack socket accepts IPv4 too)
        with socket.create_connection((host, self.port), timeout=1.0):
            pass

    def health_check(self) -> None:
        """Liveness (``/healthz/webhook``): the accepting thread runs once started."""
        t = self._serve_thread
        if t is not None and not t.is_alive() and not self._stopped:
            raise RuntimeError("the webhook server's accepting thread has died")

    def _watch_certs(self) -> None:
        """The ``certs`` thread: once a second, reload the serving pair if it changed (so a
        rotation is seen without waiting for a connection) and read the CA file again; a new
        CA bundle is written to ``ca_bundle_file`` and every cluster's installation is
        checked at once, which patches the ``caBundle`` of what it installed."""
        watcher = self._ca_watcher
        assert watcher is not None
        while not self._certs_stop.wait(RELOAD_CHECK_INTERVAL):
            try:
                self._tls_context()
                if not watcher.check():
                    continue
                log.info(
                    "webhook CA bundle %s changed: updating the caBundle of the installed "
                    "configurations",
                    watcher.path,
                )
                if self.options.ca_bundle_file and watcher.bundle is not None:
                    Path(self.options.ca_bundle_file).write_bytes(watcher.bundle)
                self._installer.wake_all()
            except Exception as exc:  # never ends the thread: the next check tries again
                log.warning("webhook certificate check failed: %s: %s", type(exc).__name__, exc)

    def _generated_context(self) -> ssl.SSLContext:
        assert self._generated is not None
        return self._generated

    def _renew_generated(self) -> None:
        """The ``certs`` thread of generated certificates: at two thirds of their validity,
        a new CA and serving certificate. The new CA is added to the CA bundle first
        (written to ``ca_bundle_file`` and, at once, into the ``caBundle`` of every
        configuration installed), the new certificate is served ``_ROTATION_OVERLAP``
        later, and then the old CA leaves the bundle."""
        validity = _GENERATED_VALIDITY.total_seconds()
        renew = validity * _RENEW_AT
        overlap = min(_ROTATION_OVERLAP, (validity - renew) / 2)
        while not self._certs_stop.wait(max(0.0, self._generated_at + renew - time.monotonic())):
            made = time.monotonic()
            try:
                new = generate(_generated_hosts(self.options), _GENERATED_VALIDITY)
                context = new.context()
            except Exception as exc:  # never ends the thread: tried again in a minute
                log.warning(
                    "webhook: renewing the generated certificates failed, tried again in a "
                    "minute (the served one expires %s after it was made): %s: %s",
                    _GENERATED_VALIDITY,
                    type(exc).__name__,
                    exc,
                )
                if self._certs_stop.wait(60.0):
                    return
                continue
            old = self._ca_bundle or b""
            log.info(
                "webhook generated certificates renewed: the new CA is added to the caBundle "
                "of the installed configurations, and its certificate served in %gs",
                overlap,
            )
            self._new_bundle(old + new.ca_pem)
            if self._certs_stop.wait(overlap):
                return
            self._generated = context
            self._generated_at = made
            self._new_bundle(new.ca_pem)
            log.info("webhook serving the renewed generated certificate; its CA alone in caBundle")

    def _new_bundle(self, bundle: bytes) -> None:
        """Serve ``bundle`` as the CA bundle: to ``ca_bundle_file`` and, at once, into the
        ``caBundle`` of every configuration installed (generated certificates renewed)."""
        self._ca_bundle = bundle
        if self.options.ca_bundle_file:
            try:
                Path(self.options.ca_bundle_file).write_bytes(bundle)
            except OSError as exc:
                log.warning(
                    "webhook CA bundle not written to %s: %s", self.options.ca_bundle_file, exc
                )
        self._installer.wake_all()

    # -- clusters (called by the manager) -------------------------------------------------

    def engage(self, cluster_name: str, cluster: Cluster) -> None:
        """A cluster was engaged: install its webhook configurations if ``options.install``."""
        if self.options.install:
            self._installer.engage(cluster_name, cluster)

    def disengage(
        self, cluster_name: str, cluster: Cluster, *, done: Callable[[], None] | None = None
    ) -> None:
        """A cluster leaves: remove what was installed in it (bounded by ``install_timeout``),
        on a thread of its own; ``done`` is called once that is over."""
        for key in self._streaks.failing():
            if isinstance(key, tuple) and key[0] == cluster_name:
                self._streaks.forget(key)
        with self._overdue_lock:  # (a handler still running past its deadline holds its worker)
            for key in [k for k in self._overdue if k[1] == cluster_name]:
                del self._overdue[key]
        self._installer.disengage(cluster_name, cluster, done=done)

    @property
    def install_identity(self) -> str:
        """Who this server is among the replicas installing the same configurations."""
        return self._installer.identity

    def installed_clusters(self) -> list[str]:
        """Clusters whose webhook configurations are installed now, all of them (a cluster
        that took the mutating configuration but refused the validating one is not)."""
        return self._installer.installed()

    # -- serving ---------------------------------------------------------------------------

    def _serve(self, h: _Handler) -> None:
        h.status = None  # (a kept-alive connection's earlier request was answered)
        target, _, query = h.path.partition("?")
        cluster, path = _split_cluster(target)
        deadline = self._deadline(query)
        with self._lock:
            hook = self._hooks.get(path)
        metrics = self.metrics
        if hook is None or metrics is None:  # (a path no hook has is not counted: unbounded)
            self._answer(h, cluster, path, hook, deadline)
            return
        started = time.monotonic()
        metrics.webhook_started(path)
        try:
            self._answer(h, cluster, path, hook, deadline)
        finally:
            known = self.cluster_known is None or self.cluster_known(cluster)
            metrics.webhook_served(
                path, cluster if known else None, h.status, time.monotonic() - started
            )

    def _deadline(self, query: str) -> float:
        """The seconds a handler has for a request with URL query ``query``: what its API
        server waits (``?timeout=``, which kube-apiserver sends on every admission call),
        up to `MAX_ASKED_TIMEOUT` (or ``request_timeout`` if longer), else ``request_timeout``."""
        own = self.options.request_timeout
        asked = asked_timeout(query)
        return own if asked is None else min(asked, max(own, MAX_ASKED_TIMEOUT))

    def _answer(
        self, h: _Handler, cluster: str, path: str, hook: Hook | None, deadline: float
    ) -> None:
        length = _body_length(h)
        if length is None:
            return  # answered (400, 411 or 501), the connection closed
        if self._too_large(h, length):
            return
        body = _read_body(h, length)
        if len(body) < length:  # the client closed before sending it all: nobody to answer
            h.close_connection = True
            return
        h.request_read()
        if hook is None:
            h.send_json(404, {"message": f"no webhook at {path}"})
            return
        conversion = hook.converter is not None
        ctype = (h.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return self._bad(
                h, conversion, "", f"content type {ctype!r}: expected application/json"
            )
        try:
            review = _json.loads(body) if body else None
        except _json.JSONDecodeError as exc:
            return self._bad(h, conversion, "", f"the body is not JSON: {exc}")
        uid = ""
        if isinstance(review, dict) and isinstance(review.get("request"), dict):
            uid = str(review["request"].get("uid") or "")
        if self.cluster_known is not None and not self.cluster_known(cluster):
            msg = f"cluster {display_name(cluster)!r} is not engaged with this manager"
            if conversion:
                h.send_json(200, conversion_review(uid, None, msg))
            else:
                h.send_json(200, errored(404, msg).review(uid))
            return
        if conversion:
            self._convert(h, hook, cluster, review, uid, deadline)
        else:
            self._admit(h, hook, cluster, review, uid, deadline)

    def _too_large(self, h: _Handler, length: int) -> bool:
        """Whether the request's body, ``length`` bytes, is over the limit of its hook
        (`MAX_CONVERSION_BODY` for a converter, else `MAX_BODY`): then it is answered 413,
        its connection closed, and, for a hook and a cluster served, said once per streak (a
        list the API server cannot convert fails until it is smaller)."""
        cluster, path = _split_cluster(h.path.partition("?")[0])
        with self._lock:
            hook = self._hooks.get(path)
        conversion = hook is not None and hook.converter is not None
        limit = MAX_CONVERSION_BODY if conversion else MAX_BODY
        if length <= limit:
            return False
        h.close_connection = True
        message = f"request body of {length} bytes larger than {limit} bytes"
        h.send_json(413, {"message": message})
        if hook is not None and (self.cluster_known is None or self.cluster_known(cluster)):
            what = f"{hook.path}: {'conversion' if conversion else 'admission'}"
            self._streaks.failed(cluster, what, message, retry="answered 413")
        return True

    def _bad(self, h: _Handler, conversion: bool, uid: str, message: str) -> None:
        log.debug("webhook bad request: %s", message)
        if conversion:
            h.send_json(200, conversion_review(uid, None, message))
        else:
            h.send_json(200, errored(400, message).review(uid))

    def _run(
        self, fn: Callable[[], Any], path: str, cluster: str, late: str, deadline: float
    ) -> Any:
        """``fn()`` on a worker, within ``deadline`` seconds (`_deadline`); past it, `_Late`
        with message ``late``.

        A handler past its deadline keeps its worker until it returns (a thread cannot be
        stopped). So that a handler hung for one cluster (on a call to it, say) cannot
        take every worker from the others, a path and cluster with `_overdue_limit`
        runs overdue are answered at once (`_Late` too) until one of them ends."""
        executor = self._executor
        if executor is None:
            raise RuntimeError("the webhook server is stopping")
        key = (path, cluster)
        limit = _overdue_limit(self.options.max_workers)
        with self._overdue_lock:
            overdue = self._overdue.get(key, 0)
        if overdue >= limit:
            calls = "1 earlier call" if overdue == 1 else f"{overdue} earlier calls"
            raise _Late(
                f"webhook {path}: {calls} for cluster {display_name(cluster)} still "
                f"run{'s' if overdue == 1 else ''} past the {deadline:g}s deadline; answered "
                "at once until one ends"
            )
        try:
            future = executor.submit(fn)
        except RuntimeError:  # (shut down meanwhile)
            raise _Stopping() from None
        with self._overdue_lock:
            self._runs[future] = key
        future.add_done_callback(self._run_over)
        wait_futures((future, self._stopping), deadline, return_when=FIRST_COMPLETED)
        if future.done() and not future.cancelled():
            return future.result()
        if self._stopping.done():  # nobody waits for the answer now: the connection is cut
            raise _Stopping()
        if not future.cancel():  # it runs, and holds its worker until it returns
            with self._overdue_lock:
                self._overdue[key] = self._overdue.get(key, 0) + 1
            future.add_done_callback(lambda _: self._overdue_over(key))
        raise _Late(late)

    def _run_over(self, future: Future[Any]) -> None:
        with self._overdue_lock:
            self._runs.pop(future, None)

    def _overdue_over(self, key: tuple[str, str]) -> None:
        with self._overdue_lock:
            left = self._overdue.get(key, 0) - 1
            if left > 0:
                self._overdue[key] = left
            else:
                self._overdue.pop(key, None)

    def _timed_out(self, cluster: str, what: str, message: str, retry: str) -> None:
        """Say a handler's timeout once per streak (its cluster, path), not once per call."""
        self._streaks.failed(cluster, what, message, retry=retry)

    def _admit(
        self, h: _Handler, hook: Hook, cluster: str, review: Any, uid: str, deadline: float
    ) -> None:
        try:
            request = AdmissionRequest.from_review(review, cluster)
        except (ValueError, TypeError) as exc:
            return self._bad(h, False, uid, f"bad AdmissionReview: {exc}")
        what = f"{hook.path}: admission"
        started = time.monotonic()
        try:
            response: AdmissionResponse = self._run(
                lambda: hook.handler.handle(request),
                hook.path,
                cluster,
                f"webhook {hook.path} timed out after {deadline:g}s",
                deadline,
            )
        except _Stopping:
            return _stopping(h)
        except Denied as exc:
            response = AdmissionResponse(
                False, exc.message, exc.code, exc.reason, warnings=exc.warnings
            )
        except ViewError as exc:
            response = errored(400, str(exc))
        except _Late as exc:
            # an HTTP error, not a refusal: the API server's failurePolicy decides (Ignore
            # lets the request through), as when its own timeoutSeconds ends the call
            message = str(exc)
            self._timed_out(cluster, what, message, "answered 504 (its failurePolicy decides)")
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
            h.send_json(504, {**status, "message": message, "reason": "Timeout", "code": 504})
            return
        except Exception as exc:
            log.exception(
                "cluster=%s webhook %s: handler failed on %s %s",
                display_name(cluster),
                hook.path,
                request.operation,
                "/".join(p for p in (request.namespace, request.name) if p) or "(unnamed)",
                extra=log_fields(cluster=cluster),
            )
            response = errored(500, f"webhook {hook.path} failed: {type(exc).__name__}: {exc}")
        if not isinstance(response, AdmissionResponse):
            log.error(
                "cluster=%s webhook %s: handler returned %s, not an AdmissionResponse",
                display_name(cluster),
                hook.path,
                type(response).__name__,
                extra=log_fields(cluster=cluster),
            )
            response = errored(500, f"webhook {hook.path} returned no AdmissionResponse")
        else:
            self._streaks.recovered(cluster, what, since=started)
        h.send_json(200, response.review(request.uid))

    def _convert(
        self, h: _Handler, hook: Hook, cluster: str, review: Any, uid: str, deadline: float
    ) -> None:
        try:
            request = ConversionRequest.from_review(review, cluster)
        except (ValueError, TypeError) as exc:
            return self._bad(h, True, uid, f"bad ConversionReview: {exc}")
        converter = hook.converter
        assert converter is not None
        desired = request.desired_api_version

        def convert() -> list[dict[str, Any]]:
            out = []
            for obj in request.objects:
                try:
                    out.append(converter.convert(obj, desired))
                except ConversionError:
                    raise
                except Exception as exc:
                    raise _ObjectNotConverted(obj, desired, exc) from exc
            return out

        what = f"{hook.path}: conversion"
        started = time.monotonic()
        try:
            out = self._run(
                convert,
                hook.path,
                cluster,
                f"conversion to {desired} timed out after {deadline:g}s",
                deadline,
            )
        except ConversionError as exc:
            h.send_json(200, conversion_review(request.uid, None, str(exc)))
            return
        except _Stopping:
            return _stopping(h)
        except _Late as exc:
            self._timed_out(cluster, what, str(exc), "answered as failed")
            h.send_json(200, conversion_review(request.uid, None, str(exc)))
            return
        except _ObjectNotConverted as exc:
            # the handler's bug: its traceback on the first line of the streak
            self._streaks.failed(
                cluster, what, str(exc), retry="answered as failed", traceback=exc.__cause__
            )
            h.send_json(200, conversion_review(request.uid, None, str(exc)))
            return
        self._streaks.recovered(cluster, what, since=started)
        h.send_json(200, conversion_review(request.uid, out))


def _generated_hosts(opts: WebhookServerOptions) -> list[str]:
    """The names a generated serving certificate is for: ``hosts``, and the host of ``url``
    (where the installed configurations send the API servers) if they do not name it."""
    hosts = list(opts.hosts)
    if opts.url:
        host = urlsplit(opts.url).hostname
        if host and host not in hosts:
            hosts.append(host)
    return hosts


def _read_body(h: _Handler, length: int) -> bytes:
    """The ``length`` bytes of the request's body (fewer if the client closed first), read a
    chunk at a time: a large length a client declares takes memory only as it is sent."""
    parts: list[bytes] = []
    left = length
    while left > 0:
        part = h.rfile.read(min(left, _BODY_CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _body_length(h: _Handler) -> int | None:
    """The length of the request's body from its ``Content-Length``, as Go's ``net/http``
    reads it (``parseContentLength`` of ``transfer.go``): digits only, one value. A request
    whose body length is unknown is answered and its connection closed (returns None):
    a ``Transfer-Encoding`` with 501, as Go answers an encoding it does not support (API
    servers send a ``Content-Length``), a malformed, negative or repeated
    ``Content-Length`` with 400, a missing one with 411 when the request says it sends a
    body (``Expect: 100-continue``); missing otherwise: no body."""
    values = h.headers.get_all("Content-Length") or []
    if h.headers.get("Transfer-Encoding") is not None:
        h.close_connection = True
        h.send_json(501, {"message": "Transfer-Encoding is not supported: send Content-Length"})
        return None
    if not values:
        if h.headers.get("Expect") is not None:
            h.close_connection = True
            h.send_json(411, {"message": "Content-Length required"})
            return None
        return 0
    text = values[0].strip()
    if len({v.strip() for v in values}) != 1 or not (text.isascii() and text.isdigit()):
        h.close_connection = True
        h.send_json(400, {"message": "bad Content-Length"})
        return None
    return int(text)


def _overdue_limit(max_workers: int) -> int:
    """How many handler runs past their deadline one path and cluster may hold: a quarter
    of the workers (at least one), so a handler hung for one cluster leaves the rest."""
    return max(1, max_workers // 4)


def _stopping(h: _Handler) -> None:
    """Answer a request whose handler still runs as the server stops (its connection is
    most likely cut already): 503, an HTTP error, so the hook's failurePolicy decides."""
    h.close_connection = True
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    message = "the webhook server is stopping"
    with contextlib.suppress(OSError):
        h.send_json(
            503, {**status, "message": message, "reason": "ServiceUnavailable", "code": 503}
        )


class _Stopping(Exception):
    """The server stops while a request waits for its handler's answer."""


class _Late(Exception):
    """A handler past ``request_timeout``, or a path and cluster whose handler runs past
    it hold `_overdue_limit` workers (answered at once, without a worker)."""


class _ObjectNotConverted(Exception):
    """A converter's exception, naming the object it failed on: the message the API server
    quotes to its client (an informer's warning), so the object is found in a list of many."""

    def __init__(self, obj: dict[str, Any], desired: str, error: Exception) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or "(unnamed)"
        where = f"{meta['namespace']}/{name}" if meta.get("namespace") else name
        super().__init__(
            f"converting {obj.get('kind')} {where} from {obj.get('apiVersion')} to {desired}: "
            f"{type(error).__name__}: {error}"
        )
