"""HTTP access to one cluster: JSON requests and watch streams over the client's connection pool.

Requests reuse the `kubernetes` `ApiClient`'s configuration, auth (bearer
tokens, refresh hooks, client certificates) and its urllib3 pool, but encode
and decode with orjson and never build model objects.

Deadlines and retries are mcruntime's own (urllib3's hidden retries are off):

- every call has one deadline covering all its attempts: its `timeout=`
  (default `DEFAULT_TIMEOUT`), shortened by an enclosing [`deadline`][mcruntime.client.deadline]
  (a controller sets one per reconcile with `ControllerOptions.reconcile_timeout`);
  it bounds the whole answer, headers and body (each read gets the time left: an
  answer that trickles in ends there too), and connecting (TCP, a proxy's tunnel,
  the TLS handshake) takes at most `CONNECT_TIMEOUT` of it;
- a call is retried only when the server cannot have acted on it and says
  when to come back (a 429 or 5xx with a `Retry-After`, as client-go retries) or when it only reads (GET/HEAD on a connection that
  broke before an answer), never past the deadline; each retry is logged at
  debug and counted (`retry_counts`);
- `RESTClient.close` (a cluster leaving) cuts every socket of the pool, in use,
  idle or in its TLS handshake, so calls blocked on a hung server end at once
  with `ClusterLeft`;
  `RESTClient.cut_calls` (the manager's health check found the cluster not
  answering) cuts those of the calls in flight, which end at once with
  `ClusterNotAnswering`, and leaves the client usable. A call notices a cut only
  when it fails: the calls that succeed pay one attribute read. With
  `RESTClient.refuse_calls` (the manager's, until the cluster answers again),
  new calls fail at once with `ClusterNotAnswering`, unsent.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import datetime
import email.utils
import functools
import http
import http.client
import io
import logging
import math
import os
import queue
import re
import socket
import ssl
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from mcruntime import _held_back as held_back
from mcruntime import _json
from mcruntime import _listing as listing
from mcruntime._bounded import (
    TOO_SLOW,
    WATCH_TOO_SLOW,
    BoundedResponse,
    TooSlow,
    answer_by,
    stream_unbounded,
)
from mcruntime._credentials import (
    Credential,
    CredentialCancelled,
    CredentialSource,
    CredentialTimeout,
    credential_of,
)
from mcruntime._deadline import INF as _INF
from mcruntime._deadline import NO_DEADLINE as _NO_DEADLINE
from mcruntime._deadline import Deadline as _Deadline
from mcruntime._deadline import OwnEnd as _OwnEnd
from mcruntime._deadline import current as _deadline
from mcruntime._deadline import deadline
from mcruntime._forked import in_a_forked_child
from mcruntime._kubeconfig import (
    base_url,
    client_certificate_problem,
    client_certificate_stamp,
    credentials_generation,
    impersonation_headers,
)
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._resolve import DnsTimeout, new_socket
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import _watchmux
from mcruntime.client._tls import LastGoodPair, own_context, shared_context
from mcruntime.errors import (
    APIError,
    ClusterLeft,
    ClusterNotAnswering,
    CredentialError,
    DeadlineExceeded,
    NotKubernetesAnswer,
    Unreachable,
)

__all__ = [
    "RESTClient",
    "WatchStream",
    "DEFAULT_TIMEOUT",
    "CONNECT_TIMEOUT",
    "WATCH_OPEN_TIMEOUT",
    "address_of",
    "deadline",
    "parse_warnings",
    "remaining",
    "retry_counts",
]

log = logging.getLogger("mcruntime.client")

#: mcruntime's own source files (a call's caller is the first frame outside them)
_MCRUNTIME_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _caller() -> str:
    """Where the code that called into mcruntime is: ``file:line in function`` of the first
    frame outside mcruntime (a code location only, never a value)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_MCRUNTIME_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return ""
    code = frame.f_code
    return f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"


#: default deadline of one call, all attempts included (seconds)
DEFAULT_TIMEOUT = 30.0
#: longest wait to establish a connection (seconds; never past the call's deadline)
CONNECT_TIMEOUT = 10.0
#: longest wait for a watch's response headers, all of them (seconds); the stream's silence bound
#: is separate
WATCH_OPEN_TIMEOUT = 30.0
#: attempts of one call at most (the first included)
MAX_ATTEMPTS = 5
_RETRY_INITIAL = 0.05
_READ_SIZE = 1 << 16
_JSON = "application/json"
_READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: urllib3's retries off: errors raised as they happen (built once, not per request)
_NO_RETRIES = urllib3.Retry.from_int(False)


def checked_timeout(timeout: float | None, name: str = "timeout") -> float | None:
    """``timeout`` as a call's ``timeout=`` argument takes it: None, or a number of seconds
    0 or more; NaN, a negative number and infinity raise ValueError naming the argument (a
    call always ends: infinity was an OverflowError deep in the call, NaN a broken answer)."""
    if timeout is None:
        return None
    if not timeout >= 0 or timeout == _INF:  # NaN compares false
        raise ValueError(
            f"{name}={timeout!r}: a call's timeout is a number of seconds, 0 or more (None: "
            "the enclosing deadline(), else DEFAULT_TIMEOUT)"
        )
    return timeout


def call_timeout(timeout: float | None) -> contextlib.AbstractContextManager[None]:
    """The `deadline` block of one call's own ``timeout=`` (checked by `checked_timeout`): a
    call that finds it passed says its timeout ended, not an enclosing deadline."""
    if timeout is None:
        return _NO_DEADLINE
    return _Deadline(checked_timeout(timeout), own=True)


@contextlib.contextmanager
def list_deadline(timeout: float | None) -> Iterator[listing.ListProgress]:
    """One deadline for a whole paginated list, every page included: ``timeout`` (the call's
    own, see `call_timeout`), else the enclosing `deadline`, else `DEFAULT_TIMEOUT`. Its
    pages are noted in the progress it yields (``progress.page(n)``): a page its deadline
    cuts says how far the list got, and is no failure of the cluster."""
    outer = _deadline.get()
    if timeout is not None:
        block = call_timeout(timeout)
    elif outer is None:
        block = _Deadline(DEFAULT_TIMEOUT, own=True)
    else:
        block = _NO_DEADLINE
    with block:
        end = _deadline.get()
        seconds = _INF if end is None else end - time.monotonic()
        if end is not None and end is not outer and timeout is None:
            whose, by_caller = (
                f"the default deadline of a whole list (DEFAULT_TIMEOUT, {DEFAULT_TIMEOUT:g}s)",
                False,
            )
        elif isinstance(end, _OwnEnd):
            whose, by_caller = f"its timeout ({round(seconds, 1):g}s for the whole list)", True
        else:
            whose, by_caller = (
                "its caller's deadline() (a reconcile's reconcile_timeout, say; "
                f"{round(seconds, 1):g}s left when the list began)",
                True,
            )
        with listing.listing(listing.ListProgress(end, whose, by_caller)) as progress:
            yield progress


def on_watch_thread() -> bool:
    """Whether the caller runs on the thread that reads every watch of the process: in an
    informer's event handler (a provider's discovery, say). What waits for a cluster's
    watches to end, stopping the cluster, must not run there: it would wait for itself,
    and every cluster's events with it."""
    return _watchmux.on_reader()


def remaining() -> float | None:
    """Seconds left before the deadline of the current context (None: no deadline set)."""
    end = _deadline.get()
    return None if end is None else end - time.monotonic()


#: the clients not closed, whose retries `retry_counts` sums
_open_clients: weakref.WeakSet[RESTClient] = weakref.WeakSet()
_open_clients_lock = threading.Lock()


def _forget_the_parents_connections() -> None:
    """In a child just forked (``os.fork``, multiprocessing's ``fork``, a pre-fork server's
    workers): every client forgets the connections it had in the parent. They are the
    parent's too (one TCP connection each): a request the child sent on one would have its
    answer read by either process (another object's), and a cut (`close`, a watch's end)
    would shut the connection down for the parent as well. The child opens its own."""
    global _open_clients_lock
    _open_clients_lock = threading.Lock()  # (a parent thread may have held it at the fork)
    for client in list(_open_clients):
        with contextlib.suppress(Exception):  # (a hook's error would end the others')
            client._forget_connections()


in_a_forked_child(_forget_the_parents_connections)


def retry_counts() -> dict[tuple[str, str], int]:
    """Retries made so far by the process's clients not closed, by ``(cluster, reason)``
    (summed over the clients of one cluster name); a manager's metrics read its own clusters'
    (`RESTClient.retry_counts`)."""
    with _open_clients_lock:
        clients = list(_open_clients)
    out: dict[tuple[str, str], int] = {}
    for client in clients:
        for reason, n in client.retry_counts().items():
            key = (client.cluster_name, reason)
            out[key] = out.get(key, 0) + n
    return out


def _query_string(query: Mapping[str, Any] | None) -> str:
    if not query:
        return ""
    items: list[tuple[str, str]] = []
    for key, value in query.items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            items.append((key, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return "?" + urlencode(items) if items else ""


#: distinct warnings remembered per cluster; later new ones are logged every time
_MAX_WARNINGS = 1000
_WARNING = re.compile(r'(\d{3})\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def parse_warnings(header: str) -> list[str]:
    """The texts of a ``Warning`` header's code-299 warnings (``299 - "text"``, possibly
    several, comma-separated), unescaped, as client-go reads them."""
    return [
        re.sub(r"\\(.)", r"\1", text) for code, text in _WARNING.findall(header) if code == "299"
    ]


def address_of(host: str) -> str:
    """``host:port`` of a server URL (the port filled in from the scheme), without credentials."""
    parts = urlsplit(host)
    netloc = parts.netloc.rpartition("@")[2]
    if ":" not in netloc.rpartition("]")[2]:
        netloc += ":443" if parts.scheme == "https" else ":80"
    return netloc


#: the reason phrases of the HTTP statuses, by code ("Bad Gateway")
_STATUS_PHRASES = {int(s): s.phrase for s in http.HTTPStatus}

#: what is wrong when http.client refuses a header value: never the value (a token)
_BAD_HEADER = (
    "a request header cannot be sent: its value has a line break, a control character or a "
    "character outside latin-1 (check the cluster's token and impersonation settings)"
)


def _bad_header(exc: BaseException) -> bool:
    """Whether ``exc`` is http.client refusing a header value (``Invalid header value``, or
    one it cannot encode as latin-1): nothing was sent, no connection is at fault."""
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, UnicodeEncodeError) and cur.encoding == "latin-1":
            return True
        if type(cur) is ValueError and str(cur).startswith("Invalid header value"):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _short_reason(exc: BaseException) -> str:
    """A compact cause of a connection failure, without URLs or headers."""
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, urllib3.exceptions.MaxRetryError) and cur.reason is not None:
            cur = cur.reason
            continue
        if isinstance(cur, urllib3.exceptions.NewConnectionError):
            nxt = cur.__cause__ or cur.__context__
            if nxt is None:
                return "cannot connect"
            cur = nxt
            continue
        if isinstance(cur, _HandshakeTimeout):
            return "TLS handshake timed out"
        if isinstance(cur, DnsTimeout):
            return "DNS lookup timed out"
        if isinstance(cur, _ProxyTimeout):
            return _PROXY_SILENT
        if isinstance(cur, _ProxyHandshakeTimeout):
            return _PROXY_HANDSHAKE
        if isinstance(cur, (urllib3.exceptions.ConnectTimeoutError, socket.timeout)):
            return "connection timed out"
        if isinstance(cur, urllib3.exceptions.ReadTimeoutError):
            return TOO_SLOW if isinstance(cur.__cause__, TooSlow) else "read timed out"
        if isinstance(cur, ssl.SSLCertVerificationError):
            return _verify_failure(cur)
        if isinstance(cur, ssl.SSLError):
            return _tls_failure(cur)
        if isinstance(cur, urllib3.exceptions.SSLError):
            inner = cur.args[0] if cur.args and isinstance(cur.args[0], BaseException) else None
            nxt = inner or cur.__cause__ or cur.__context__
            if nxt is None:
                return "TLS handshake failed"
            cur = nxt
            continue
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset"
        if isinstance(cur, urllib3.exceptions.IncompleteRead | http.client.IncompleteRead):
            return "connection broken mid-answer (incomplete read)"
        if (refused := _tunnel_refused(cur)) is not None:
            return refused
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
        if isinstance(cur, urllib3.exceptions.ProtocolError):
            nxt = (
                cur.args[1]
                if len(cur.args) > 1 and isinstance(cur.args[1], BaseException)
                else None
            )
            if nxt is None:
                return str(cur.args[0]).lower() if cur.args else "connection broken"
            cur = nxt
            continue
        if isinstance(cur, ValueError) and _bad_header(cur):
            return _BAD_HEADER
        if isinstance(cur, ValueError | AttributeError):
            # http.client reading from a connection another thread cut ("I/O operation on
            # closed file", "'NoneType' object has no attribute 'recv_into'")
            return "connection closed mid-answer"
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            return type(cur).__name__
        cur = nxt
    return "connection failed"


_TUNNEL_FAILED = "Tunnel connection failed: "


def _tunnel_refused(exc: BaseException) -> str | None:
    """What a proxy that refused the tunnel answered its ``CONNECT`` (http.client and urllib3
    raise a bare ``OSError("Tunnel connection failed: 407 ...")``, no errno), or None."""
    if type(exc) is not OSError or not exc.args or not isinstance(exc.args[0], str):
        return None
    if not exc.args[0].startswith(_TUNNEL_FAILED):
        return None
    code, _, text = exc.args[0].removeprefix(_TUNNEL_FAILED).partition(" ")
    if not code.isdigit():
        return None
    # the standard phrase when there is one: the proxy's own is its text, not ours to repeat
    answer = f"{code} {_STATUS_PHRASES.get(int(code)) or text[:80]}".rstrip()
    hint = (
        " (check the user and password in the proxy's URL: proxy-url or HTTPS_PROXY)"
        if code == "407"
        else ""
    )
    return f"the proxy refused the tunnel (CONNECT): it answered {answer}{hint}"


#: OpenSSL's verify codes of a server certificate, in words that say what to check
_UNTRUSTED = (
    "the server's certificate is not signed by a CA the kubeconfig trusts: check its "
    "certificate-authority"
)
_VERIFY_FAILURES = {
    2: _UNTRUSTED,  # unable to get issuer certificate
    18: _UNTRUSTED,  # self-signed certificate
    19: _UNTRUSTED,  # self-signed certificate in certificate chain
    20: _UNTRUSTED,  # unable to get local issuer certificate
    21: _UNTRUSTED,  # unable to verify the first certificate
    9: "the server's certificate is not valid yet (is this machine's clock right?)",
    10: "the server's certificate has expired",
    23: "the server's certificate was revoked",
}
#: TLS alerts and errors of a handshake, by OpenSSL's reason
_TLS_FAILURES = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server requires a client certificate",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust the CA of the client certificate",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "the server refused the client certificate: it has expired",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused the client certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the server refused the client certificate",
    "WRONG_VERSION_NUMBER": "the server does not speak TLS on this port (an http:// server?)",
    "TLSV1_ALERT_PROTOCOL_VERSION": "the server and the client share no TLS version",
    "UNSUPPORTED_PROTOCOL": "the server and the client share no TLS version",
}


def _verify_failure(exc: ssl.SSLCertVerificationError) -> str:
    """Why the server's certificate was refused, with OpenSSL's words after it."""
    detail = str(exc.verify_message or "certificate verify failed").rstrip(".")
    if exc.verify_code in (62, 64) and " for " in detail:  # host name or IP address mismatch
        return (
            "TLS handshake failed: the server's certificate is not valid for "
            f"{detail.rsplit(' for ', 1)[1]} (not one of its subject alternative names; a "
            "Common Name does not count, nor for kubectl)"
        )
    what = _VERIFY_FAILURES.get(exc.verify_code or 0)
    if what is None:
        return f"TLS handshake failed: the server's certificate was refused ({detail})"
    return f"TLS handshake failed: {what}" + (f" ({detail})" if what is _UNTRUSTED else "")


#: errors of loading the kubeconfig's certificates and key into ssl, before any handshake
_SETTINGS_FAILURES = {
    "KEY_VALUES_MISMATCH": "the kubeconfig's client-key does not match its client-certificate",
    "NO_CERTIFICATE_OR_CRL_FOUND": (
        "the kubeconfig's certificate-authority holds no PEM certificate"
    ),
}


def _tls_failure(exc: ssl.SSLError) -> str:
    """A failed handshake (or a TLS alert on the first read) in words that say what to check;
    or the kubeconfig's certificates and key that ssl could not load."""
    reason = str(exc.reason or "")
    if reason in _SETTINGS_FAILURES:
        return _SETTINGS_FAILURES[reason]
    if not reason and "PEM lib" in str(exc):  # load_cert_chain read no certificate or key
        return (
            "the kubeconfig's client-certificate and client-key are not a PEM certificate and key"
        )
    if not reason:
        return "TLS handshake failed"
    what = _TLS_FAILURES.get(reason)
    if what is None:
        return f"TLS handshake failed ({reason.lower().replace('_', ' ')})"
    return f"TLS handshake failed: {what}"


class _Sockets:
    """Every connection of one RESTClient's pool, idle or in use, so `close` can cut them all;
    and the client certificate its new connections present when an exec plugin gave one."""

    def __init__(self, who: str = "") -> None:
        self._conns: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.closed = False
        #: the cluster's name, as logs show it
        self.who = who
        #: whether a connection a full pool could not take back was said (once per client)
        self._overflow_said = False
        #: the events of the DNS lookups waited for (set by `cut_all`: the waits end)
        self._lookups: set[threading.Event] = set()
        #: a duplicate descriptor of the socket of each connection connecting (TCP, a
        #: proxy's greeting, handshake or CONNECT, TLS), cut with the others: ssl detaches
        #: the socket it wraps, so the connection's own is no handle on it until connected
        self._connecting: set[int] = set()
        #: the exec plugin's certificate and key file (``.path``), held while in use
        self.client_cert: Any = None
        #: how many cuts there were: a connect that began before the last one goes no further
        self.cuts = 0
        #: the kubeconfig's client certificate files as last loaded, kept while they cannot be
        self.client_pair = LastGoodPair(who)

    def overflowed(self, size: int) -> None:
        """A connection given back to a full pool (more calls at once than it holds) was closed:
        said once per client, by the cluster's name and with what to change (urllib3 says it at
        every call, as ``Connection pool is full``, naming only the host)."""
        with self._lock:
            said, self._overflow_said = self._overflow_said, True
        if not said:
            log.warning(
                "cluster=%s: more calls at once than its %d pooled connections; each call beyond "
                "them opens a connection of its own (a TCP and TLS handshake) and closes it after: "
                "lower the concurrency of its callers (max_concurrent_reconciles) or raise the "
                "connection_pool_maxsize of its Configuration",
                self.who,
                size,
            )

    def add(self, conn: HTTPConnection) -> None:
        with self._lock:
            closed = self.closed
            if not closed:
                self._conns.add(conn)
        if closed:
            _cut(conn)

    @contextlib.contextmanager
    def lookup_wait(self) -> Iterator[threading.Event]:
        """An event for one DNS lookup's wait, set by `cut_all` (at once if closed already)."""
        event = threading.Event()
        with self._lock:
            if self.closed:
                event.set()
            else:
                self._lookups.add(event)
        own = call_cut.get()  # the call's own cut ends its lookup's wait too
        try:
            with own.waking(event) if own is not None else contextlib.nullcontext():
                yield event
        finally:
            with self._lock:
                self._lookups.discard(event)

    def forget(self) -> None:
        """In a child just forked: let go of the parent's connections without cutting them
        (a shut down socket is shut down for the parent too); its locks may have been held by
        a parent thread, which is not in this process."""
        self._lock = threading.Lock()
        self._conns = weakref.WeakSet()
        self._lookups = set()
        for dup in self._connecting:  # (this process's duplicates: closing one cuts nothing)
            with contextlib.suppress(OSError):
                os.close(dup)
        self._connecting = set()

    def connect_begins(self, sock: socket.socket) -> int | None:
        """Hold a connection's new socket until `connect_ends`, so a cut ends its connect
        and handshakes; cut at once if closed. Returns the duplicate descriptor to give
        `connect_ends` (a bare descriptor: a socket object would cost a few syscalls more)."""
        try:
            dup = os.dup(sock.fileno())
        except OSError:
            return None
        with self._lock:
            self._connecting.add(dup)
            if self.closed:
                _shut_down_fd(dup)
        return dup

    def cut_connecting(self, dup: int | None) -> None:
        """Cut the connect (and handshake) of one connection, by its `connect_begins`
        duplicate, if it is still connecting."""
        if dup is not None:
            with self._lock:  # (its number is not reused while held: see `connect_ends`)
                if dup in self._connecting:
                    _shut_down_fd(dup)

    def connect_ends(self, dup: int | None) -> None:
        if dup is not None:
            with self._lock:  # (not while a cut shuts it down: its number is not reused then)
                self._connecting.discard(dup)
                os.close(dup)

    def cut_all(self) -> None:
        """Cut every connection, handshake and DNS lookup wait; new ones are cut at once."""
        self._cut_all_but(set(), closing=True)

    def cut_all_but(self, keep: set[int]) -> None:
        """Cut every connection but those whose socket's id is in ``keep``, the handshakes
        and the DNS lookups waited for; new ones are still made (idle ones cut are replaced
        when next taken from the pool)."""
        self._cut_all_but(keep, closing=False)

    def _cut_all_but(self, keep: set[int], *, closing: bool) -> None:
        with self._lock:
            self.closed = self.closed or closing
            self.cuts += 1
            conns = [c for c in self._conns if id(getattr(c, "sock", None)) not in keep]
            if closing:
                self._conns.clear()
            lookups = list(self._lookups)
            for dup in self._connecting:  # (under the lock: see `connect_ends`)
                _shut_down_fd(dup)
        for event in lookups:
            event.set()
        for conn in conns:
            _cut(conn)


def _cut(conn: HTTPConnection) -> None:
    _shut_down(getattr(conn, "sock", None))


class CallCut:
    """The cut of one call (every attempt of it) made in a context that holds it (`call_cut`).

    [`AsyncClient`][mcruntime.client.AsyncClient] runs each call on a thread with one, and
    cuts it when the coroutine awaiting the call is cancelled (a reconcile's timeout, a
    ``TaskGroup`` sibling's failure, an ``asyncio.timeout``): the connection the call uses,
    connecting or connected, is shut down, and a wait for a retry ends, so the thread is
    freed at once instead of at the call's deadline. Only that call's connection: the
    cluster's other calls go on. The cut call raises `DeadlineExceeded` (``cut: the
    coroutine that awaited it was cancelled``), which nobody awaits; it counts as no failure
    of the cluster.
    """

    __slots__ = ("_conns", "_lock", "_wakes", "cut", "event", "why")

    def __init__(self, why: str = "the coroutine that awaited it was cancelled") -> None:
        self.cut = False
        #: what the cut call's error says cut it
        self.why = why
        #: set when cut: a wait for a retry ends
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[tuple[Any, _Sockets | None]] = []
        #: the events of waits the call is in (a DNS lookup's), set by the cut
        self._wakes: set[threading.Event] = set()

    @contextlib.contextmanager
    def waking(self, event: threading.Event) -> Iterator[None]:
        """Set ``event`` if the call is cut while the block runs (at once if it was)."""
        with self._lock:
            if self.cut:
                event.set()
            else:
                self._wakes.add(event)
        try:
            yield
        finally:
            with self._lock:
                self._wakes.discard(event)

    def attach(self, conn: Any, sockets: _Sockets | None) -> None:
        """The call took ``conn`` from its pool (cut at once if the call was cut already)."""
        with self._lock:
            if not self.cut:
                self._conns.append((conn, sockets))
                return
        _cut_one(conn, sockets)

    def detach(self, conn: Any) -> None:
        """``conn`` went back to its pool: no longer this call's."""
        with self._lock:
            self._conns = [(c, s) for c, s in self._conns if c is not conn]

    def cancel(self) -> None:
        """Cut the call: its connection now, its next attempt before it is sent."""
        with self._lock:
            self.cut = True
            conns, self._conns = self._conns, []
            wakes, self._wakes = self._wakes, set()
        self.event.set()
        for wake in wakes:
            wake.set()
        for conn, sockets in conns:
            _cut_one(conn, sockets)


#: the `CallCut` of the calls made in this context (an `AsyncClient` call's thread)
call_cut: ContextVar[CallCut | None] = ContextVar("mcruntime_call_cut", default=None)


class _Either:
    """Set when either is: a cluster's close or a call's own cut (a credential's wait)."""

    __slots__ = ("a", "b")

    def __init__(self, a: threading.Event, b: CallCut) -> None:
        self.a = a
        self.b = b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.cut


@contextlib.contextmanager
def cancelled_by(event: threading.Event, what: str = "its stop event was set") -> Iterator[None]:
    """Cut every client call made inside the block once ``event`` is set.

    The call in flight has its connection shut down (connecting, sending or waiting for
    the answer) and a wait for a retry ends; the calls after it are not sent. Each raises
    [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded] saying ``cut: <what>``, with
    ``sent`` False: no failure of its cluster. Without it a call in flight ends only by
    its deadline, its cluster leaving or its manager stopping.
    [`install_crds`][mcruntime.crd.install_crds] and
    [`migrate_storage`][mcruntime.crd.migrate_storage] run their requests in one for
    their ``stop`` event.

    A thread of its own waits for ``event`` while the block runs; it ends with the block
    (within 50 ms).
    An `AsyncClient` call inside the block is cut by its coroutine's cancel instead.
    """
    cut = CallCut(what)
    if event.is_set():
        cut.cancel()
    done = threading.Event()

    def watch() -> None:  # (an Event has no callback: looked at every 50 ms, ended as soon)
        while not event.wait(0.05):
            if done.is_set():
                return
        cut.cancel()

    watcher = None if cut.cut else start_thread(watch, thread_name("cancelled-by"))
    token = call_cut.set(cut)
    try:
        yield
    finally:
        call_cut.reset(token)
        done.set()
        if watcher is not None:
            watcher.join()


def _cut_one(conn: Any, sockets: _Sockets | None) -> None:
    """Shut down ``conn``'s socket, or the socket it is connecting (TCP, TLS handshake)."""
    _cut(conn)
    if sockets is not None:
        sockets.cut_connecting(getattr(conn, "_mcr_connecting", None))


def _shut_down_fd(fd: int) -> None:
    """Shut down the socket of descriptor ``fd`` both ways (the descriptor stays open)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fd)
    try:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()


def _shut_down(sock: Any) -> None:
    """Shut ``sock`` down both ways, waking whoever reads it. Through an ``https://`` proxy
    a connection's socket is urllib3's ``SSLTransport`` (TLS inside the proxy's TLS), which
    has no ``shutdown``: the socket it wraps is shut down instead."""
    while sock is not None and not hasattr(sock, "shutdown"):
        sock = getattr(sock, "socket", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _Cuttable:
    """What `_Conn` and `_TLSConn` share: from its socket's creation until it is connected
    (TCP, an https proxy's handshake and tunnel, TLS), a connection's socket is held by its
    `_Sockets` through a duplicate, so a cut ends a connect or handshake in progress."""

    _mcr_sockets: _Sockets | None = None
    #: the duplicate of its socket `_Sockets` cuts until it is connected
    _mcr_connecting: int | None = None
    #: the `_Sockets.cuts` count when this connect began
    _mcr_cuts = 0

    def _new_conn(self) -> socket.socket:
        """urllib3's (or its SOCKS connection's), its lookup bounded and its connect cut."""
        sockets = self._mcr_sockets
        if sockets is None:
            return new_socket(self)
        self._mcr_cuts = sockets.cuts
        return new_socket(self, sockets.lookup_wait, self._mcr_guard)

    def _mcr_guard(self, sock: socket.socket) -> None:
        """Hold ``sock`` before it connects; a cut since this connect began ends it here
        (a cut connect fails as a refused one does, and would go on to the next address)."""
        sockets = self._mcr_sockets
        if sockets is None:
            return
        self._mcr_release()
        self._mcr_connecting = sockets.connect_begins(sock)
        # (checked once held: a cut from now on reaches the socket; one in the microseconds
        # before it starts connecting does not, as a socket not connecting has nothing to cut)
        if sockets.cuts != self._mcr_cuts:
            raise urllib3.exceptions.NewConnectionError(self, "the connect was cut")  # type: ignore[arg-type]

    def _mcr_release(self) -> None:
        if self._mcr_sockets is not None:
            self._mcr_sockets.connect_ends(self._mcr_connecting)
        self._mcr_connecting = None


class _Conn(_Cuttable, HTTPConnection):
    """A connection that registers with its pool's `_Sockets` once connected."""

    response_class = BoundedResponse

    def connect(self) -> None:
        try:
            super().connect()
            if self._mcr_sockets is not None:
                self._mcr_sockets.add(self)  # (before the connect's entry goes: see _TLSConn)
        finally:
            self._mcr_release()


class _TLSConn(_Cuttable, HTTPSConnection):
    """`_Conn` over TLS, with the TLS context shared by connections with the same settings."""

    response_class = BoundedResponse

    #: the TLS settings urllib3 gave this connection (restored before each connect)
    _mcr_tls: tuple[Any, ...] | None = None

    def connect(self) -> None:
        own = self._mcr_tls
        if own is None:
            own = self._mcr_tls = (
                self.ssl_context,
                self.ca_certs,
                self.ca_cert_dir,
                self.ca_cert_data,
                self.cert_file,
                self.key_file,
            )
        (
            self.ssl_context,
            self.ca_certs,
            self.ca_cert_dir,
            self.ca_cert_data,
            self.cert_file,
            self.key_file,
        ) = own
        sockets = self._mcr_sockets
        if sockets is not None and sockets.client_cert is not None:
            self.cert_file = self.key_file = sockets.client_cert.path
        ctx = shared_context(self)
        if sockets is not None and self.cert_file:
            ctx = sockets.client_pair.choose(self.cert_file, self.key_file, ctx)
        if ctx is not None:
            # loaded into the shared context already: urllib3 must not load them again
            self.ssl_context = ctx
            self.ca_certs = self.ca_cert_dir = self.ca_cert_data = None
            self.cert_file = self.key_file = None
        elif (fresh := own_context(self)) is not None:
            self.ssl_context = fresh  # urllib3 loads the files into it
        try:
            super().connect()
            if sockets is not None:
                sockets.add(self)  # (before the handshake's entry goes: no cut falls between)
        except TimeoutError as exc:
            # the connect timeout ran out while the server held its TLS handshake (urllib3
            # said "read timed out", with the read timeout); a proxy's tunnel and handshake
            # say their own, and a TCP connect's timeout is urllib3's own error
            raise _HandshakeTimeout(self, "TLS handshake timed out") from exc
        finally:
            self._mcr_release()

    def _tunnel(self) -> None:
        try:
            super()._tunnel()
        except TimeoutError as exc:
            raise _ProxyTimeout(self, _PROXY_SILENT) from exc

    def _connect_tls_proxy(self, hostname: str, sock: socket.socket) -> Any:
        # an https:// proxy's own handshake, before the tunnel: urllib3 says "read timed out"
        try:
            return super()._connect_tls_proxy(hostname, sock)
        except TimeoutError as exc:
            raise _ProxyHandshakeTimeout(self, _PROXY_HANDSHAKE) from exc


class _SlotQueue(queue.LifoQueue[Any]):
    """urllib3's queue of a pool's connection slots, filled without a lock per slot.

    A new pool puts ``maxsize`` empty slots (None) into its queue one ``put`` at
    a time, each taking the queue's lock and notifying: building a pool of 64 took
    87.6 µs on every cluster's start, 27.8 µs with this (the `kubernetes`
    client's default pool of 10: 31 µs). Until the queue is first read, nobody
    can be waiting on it, so an empty slot goes straight in.
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._filling = True

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if self._filling and item is None and (self.maxsize <= 0 or len(self.queue) < self.maxsize):
            self.queue.append(None)
            self.unfinished_tasks += 1
            return
        super().put(item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        self._filling = False
        return super().get(block, timeout)


class _Pool(HTTPConnectionPool):
    """A pool whose new connections report to the client's `_Sockets` (cut on close)."""

    ConnectionCls: type[_Conn] | type[_TLSConn] = _Conn
    QueueCls = _SlotQueue
    _mcr_sockets: _Sockets | None = None

    def _new_conn(self) -> Any:
        conn = super()._new_conn()
        conn._mcr_sockets = self._mcr_sockets  # type: ignore[attr-defined]
        return conn

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        cut = call_cut.get()
        if cut is not None:  # an AsyncClient call: its coroutine's cancel cuts this connection
            cut.attach(conn, self._mcr_sockets)
        return conn

    def _put_conn(self, conn: Any) -> None:
        cut = call_cut.get()
        if cut is not None:
            cut.detach(conn)
        slots = self.pool
        if slots is None or self.block:
            super()._put_conn(conn)
            return
        try:
            slots.put(conn, block=False)  # (None: the slot of a connection a failed call closed)
        except queue.Full:
            # more calls at once than the pool holds: urllib3 would warn at every call, naming
            # only the host; the client says it once, by the cluster's name
            if conn is not None:
                conn.close()
            if self._mcr_sockets is not None:
                self._mcr_sockets.overflowed(slots.maxsize)


class _HandshakeTimeout(urllib3.exceptions.ConnectTimeoutError):
    """The server took the TCP connection and did not finish the TLS handshake in time: a
    hung API server, or a load balancer with no live backend."""


class _ProxyTimeout(urllib3.exceptions.ConnectTimeoutError):
    """The proxy took the TCP connection and did not answer its ``CONNECT`` in time."""


class _ProxyHandshakeTimeout(urllib3.exceptions.ConnectTimeoutError):
    """An https:// proxy took the TCP connection and did not finish its own TLS handshake."""


_PROXY_SILENT = "the proxy did not answer the tunnel request (CONNECT) in time"
_PROXY_HANDSHAKE = "the proxy's TLS handshake timed out"


class _TLSPool(_Pool, HTTPSConnectionPool):
    """`_Pool` over TLS: `HTTPSConnectionPool` builds the connection, `_Pool` tracks it."""

    ConnectionCls = _TLSConn

    def _validate_conn(self, conn: Any) -> None:
        # HTTPSConnectionPool's, less its InsecureRequestWarning for an unverified server:
        # a Cluster says that once, by the cluster's name, in mcruntime's log
        HTTPConnectionPool._validate_conn(self, conn)
        if conn.is_closed:
            conn.connect()  # (a held handshake is `_HandshakeTimeout`: `_TLSConn.connect`)


class _PoolFactory:
    """Stands in for a pool class in ``PoolManager.pool_classes_by_scheme``: builds the shared
    tracking pool class and hands it ``sockets`` (no classes built per cluster)."""

    __slots__ = ("_cls", "_sockets")

    def __init__(self, cls: type[_Pool] | type[_TLSPool], sockets: _Sockets) -> None:
        self._cls = cls
        self._sockets = sockets

    def __call__(self, host: str, port: int | None = None, **kw: Any) -> HTTPConnectionPool:
        pool = self._cls(host, port, **kw)
        pool._mcr_sockets = self._sockets
        return pool


def _tracking_pools(sockets: _Sockets) -> dict[str, Any]:
    """Pool factories whose connections register with ``sockets`` once connected."""
    return {"http": _PoolFactory(_Pool, sockets), "https": _PoolFactory(_TLSPool, sockets)}


@functools.cache
def _socks_pools() -> tuple[type[_Pool], type[_Pool]]:
    """`_Pool` and `_TLSPool` through a SOCKS proxy (urllib3's SOCKS pools, which need
    PySocks: built on first use). Their connections register with the client's
    `_Sockets`, so close cuts them, and present an exec plugin's client certificate."""
    from urllib3.contrib import socks

    class _SocksConn(_Conn, socks.SOCKSConnection):
        pass

    class _SocksTLSConn(_TLSConn, socks.SOCKSHTTPSConnection):
        pass

    class _SocksPool(_Pool, socks.SOCKSHTTPConnectionPool):
        ConnectionCls = _SocksConn

    class _SocksTLSPool(_Pool, socks.SOCKSHTTPSConnectionPool):
        ConnectionCls = _SocksTLSConn

    return _SocksPool, _SocksTLSPool


def _tracking_socks_pools(sockets: _Sockets) -> dict[str, Any]:
    plain, tls = _socks_pools()
    return {"http": _PoolFactory(plain, sockets), "https": _PoolFactory(tls, sockets)}


class _RetryLater(Exception):
    """An attempt failed in a way that may be retried: after ``delay`` seconds, for ``reason``."""

    def __init__(self, error: BaseException, reason: str, delay: float) -> None:
        self.error = error
        self.reason = reason
        self.delay = delay


class RESTClient:
    """One cluster's HTTP access (thread-safe): `request` for JSON calls, `watch` for streams.

    Errors: [`APIError`][mcruntime.errors.APIError] subclasses for error Status
    answers; [`Unreachable`][mcruntime.errors.Unreachable] when the server cannot
    be reached; its subclass [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded]
    when no answer came within the deadline; [`ClusterLeft`][mcruntime.errors.ClusterLeft]
    once `close` was called (the cluster left). Messages name the cluster and
    ``host:port``, never credentials.
    """

    def __init__(self, api_client: ApiClient, *, cluster_name: str = "") -> None:
        self.api_client = api_client
        self.cluster_name = cluster_name
        self.host: str = base_url(str(api_client.configuration.host)).rstrip("/")
        self.address: str = address_of(self.host)
        self._pool = api_client.rest_client.pool_manager
        # a ProxyManager's Url, or a SOCKSProxyManager's proxy_url; named (without credentials)
        # in connection errors, where the proxy may be what failed
        proxy = getattr(self._pool, "proxy", None) or getattr(self._pool, "proxy_url", None)
        self._via = f" through the proxy {address_of(str(proxy))}" if proxy else ""
        self._sockets = _Sockets(display_name(cluster_name))
        if type(self._pool) in (urllib3.PoolManager, urllib3.ProxyManager):
            # our connections register themselves, so close() can cut those in use too
            self._pool.pool_classes_by_scheme = _tracking_pools(self._sockets)
        elif type(self._pool).__name__ == "SOCKSProxyManager":  # its module needs PySocks
            self._pool.pool_classes_by_scheme = _tracking_socks_pools(self._sockets)
        self._watches: weakref.WeakSet[WatchStream] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        #: the API server's warnings logged already (each once)
        self._warned: set[str] = set()
        #: a call was made on a running asyncio event loop (`_said_if_on_a_loop`)
        self._loop_said = False
        #: the kubeconfig user's impersonation (``as:``), sent with every request
        self._impersonate = impersonation_headers(api_client.configuration)
        #: the kubeconfig user's exec plugin or token file, read within each call's deadline
        #: (None: the loader's static credential)
        self._credential = credential_of(api_client.configuration)
        #: the client certificate file as the pool's connections present it (None: no file)
        self._certificate_stamp = client_certificate_stamp(api_client.configuration)
        #: the generation of the configuration's credentials read (`_current_credentials`)
        self._generation = credentials_generation(api_client.configuration)
        #: requests sent by (method, HTTP status or ``<error>``), each attempt once
        #: (`request_counts`), and the calls retried by reason (`retry_counts`)
        self._sent: dict[tuple[str, str], int] = {}
        self._retried: dict[str, int] = {}
        self._sent_lock = threading.Lock()
        with _open_clients_lock:
            _open_clients.add(self)
        #: time.monotonic() of the last answer (any HTTP status, or watch bytes): health checks
        #: skip a probe while the cluster is evidently answering
        self.last_answer = 0.0
        #: time.monotonic() of the last response to a request (not watch bytes) that was no
        #: server error (5xx): an API server whose storage is down still streams watches
        #: from its cache, but its other requests wait, so health checks go by this clock
        self.last_response = 0.0
        #: `cut_calls` so far (a call that fails compares it with its value when it began),
        #: and why the last one cut them
        self._cuts = 0
        self._cut_reason = ""
        #: why new calls are refused ("" when they are sent): `refuse_calls`
        self._refusing = ""
        #: set by the next `cut_calls` (which puts a new one in its place) or by `close`:
        #: the calls waiting to retry wake
        self._wake = threading.Event()

    def __repr__(self) -> str:
        return f"RESTClient(cluster={display_name(self.cluster_name)!r}, host={self.address!r})"

    # -- plumbing -------------------------------------------------------------------

    def _headers(self, accept: str, content_type: str | None) -> Mapping[str, Any]:
        """A request's headers but its credential (`_authorized` adds it as it is sent)."""
        headers: dict[str, Any] = dict(self.api_client.default_headers)
        headers["Accept"] = accept
        if content_type:
            headers["Content-Type"] = content_type
        if not self._impersonate:
            return headers
        # Impersonate-Group may repeat: one header line per group
        lines = urllib3.HTTPHeaderDict(headers)
        for name, value in self._impersonate:
            lines.add(name, value)
        return lines

    def _authorized(
        self, method: str, url: str, headers: Mapping[str, Any], credential: Credential | None
    ) -> Mapping[str, Any]:
        """``headers`` with the request's bearer token, if it has one: ``credential``'s (an
        exec plugin's or a token file's, see `_credential_for`; a certificate is the
        connection's), else the configuration's.

        Only `_send` calls it, so that the token is in no local variable of a frame an
        error's traceback holds (``request``, ``watch`` and their callers): error trackers
        record those (Sentry's ``include_local_variables``), as ``pytest -l`` prints them."""
        auth: dict[str, Any] = {}
        if credential is not None:
            if credential.token is not None:
                auth["Authorization"] = f"Bearer {credential.token}"
        else:
            queries: list[Any] = []
            self.api_client.update_params_for_auth(
                auth, queries, ["BearerToken"], url, method, None
            )
        if not auth:
            return headers
        if isinstance(headers, urllib3.HTTPHeaderDict):  # (repeated Impersonate-Group lines)
            lines = urllib3.HTTPHeaderDict(headers)
            lines.update(auth)
            return lines
        return {**headers, **auth}

    def _who(self) -> str:
        return display_name(self.cluster_name)

    def _said_if_on_a_loop(self, method: str, path: str) -> None:
        """Say a call made on a thread running an asyncio event loop (the sync client in an
        ``async def`` reconcile): the loop runs nothing else until it returns, and every async
        reconcile of the controller waits, silently while each call is shorter than the
        controller's watchdog notices. A warning the first time for this cluster, with where
        it is made; debug afterwards."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        with self._lock:
            first = not self._loop_said
            self._loop_said = True
        level = logging.WARNING if first else logging.DEBUG
        if not log.isEnabledFor(level):
            return
        at = _caller()
        log.log(
            level,
            "cluster=%s: a blocking API call (%s %s) was made on a running asyncio event loop%s: "
            "that loop ran nothing else until it returned (every async reconcile of its "
            "controller waits meanwhile); await it through cluster.aclient, or run it with "
            "asyncio.to_thread%s",
            self._who(),
            method,
            path,
            f" (at {at})" if at else "",
            "; further such calls to the cluster are logged at debug level" if first else "",
            extra=log_fields(cluster=self.cluster_name),
        )

    def _credential_for(
        self,
        credential: CredentialSource,
        method: str,
        path: str,
        end: float,
        budget: float,
        own: CallCut | None,
    ) -> Credential:
        """The credential to send: an exec plugin's is run within the call's deadline if there
        is none (or it expired), killed and a `DeadlineExceeded` at the deadline, `ClusterLeft`
        on close; the call's own cut ends its wait."""
        try:
            found = credential.get(
                end, self._closed if own is None else _Either(self._closed, own), self.cluster_name
            )
        except CredentialCancelled:
            if own is not None and own.cut and not self._closed.is_set():
                raise self._abandoned(method, path, own, False) from None
            raise self._left(method, path) from None
        except CredentialTimeout:
            if self._closed.is_set():
                raise self._left(method, path) from None
            raise DeadlineExceeded(
                f"[cluster {self._who()}] {method} {path}: the {credential.describe()} gave "
                f"no credential within {max(budget, 0.0):.3g}s; "
                f"{credential.abandoned}",
                cluster_name=self.cluster_name,
                address=self.address,
            ) from None
        except CredentialError as exc:
            raise CredentialError(
                f"[cluster {self._who()}] {exc}",
                cluster_name=self.cluster_name,
                address=self.address,
            ) from None
        cert = found.cert_file
        if cert is not None and cert is not self._sockets.client_cert:
            rotated = self._sockets.client_cert is not None
            self._sockets.client_cert = cert
            if rotated:
                # idle connections present the old certificate: new ones present the new one
                self._close_pools()
        return found

    def _left(self, method: str, path: str) -> ClusterLeft:
        return ClusterLeft(
            f"[cluster {self._who()}] the cluster left: {method} {path} was cancelled (it was "
            "disengaged or its manager stopped)",
            name=self.cluster_name,
        )

    def _cut_since(self, cuts: int) -> bool:
        """Whether `cut_calls` ran since a call read the count ``cuts`` (and the client was not
        closed since: then the call's cluster left, which `_left` says)."""
        return self._cuts != cuts and not self._closed.is_set()

    def _cut_short(
        self, method: str, path: str, began: float, budget: float
    ) -> ClusterNotAnswering:
        held_back.failed(self.cluster_name)  # its reconcile runs again at the first answer
        return ClusterNotAnswering(
            f"[cluster {self._who()}] {method} {path}: cut after {time.monotonic() - began:.3g}s "
            f"of its {max(budget, 0.0):.3g}s deadline: {self._cut_reason}",
            cluster_name=self.cluster_name,
            address=self.address,
        )

    def _refused(self, method: str, path: str, reason: str) -> Exception:
        if self._closed.is_set():
            return self._left(method, path)
        held_back.failed(self.cluster_name)  # its reconcile runs again at the first answer
        return ClusterNotAnswering(
            f"[cluster {self._who()}] {method} {path}: not sent (calls to it fail at once "
            f"until it answers again): {reason}",
            cluster_name=self.cluster_name,
            address=self.address,
        )

    def _unreachable(self, exc: BaseException) -> Unreachable:
        held_back.failed(self.cluster_name)  # its reconcile runs again at the first answer
        reason = _short_reason(exc)
        problem = client_certificate_problem(self.api_client.configuration)
        if problem and (reason.startswith("TLS handshake failed") or reason == "connection reset"):
            reason = f"{reason} ({problem})"  # a server that refuses it in the handshake
        return Unreachable(
            f"[cluster {self._who()}] cannot reach {self.address}{self._via}: {reason}",
            cluster_name=self.cluster_name,
            address=self.address,
        )

    def _expired(self, method: str, path: str, budget: float, cause: str) -> DeadlineExceeded:
        progress = listing.current()
        if progress is not None and progress.cut():
            # a page of a list whose one deadline ended: the server answered every page
            # before it, in time; the list's caller cut it (no failure of the cluster)
            return self._deadline_error(
                method,
                path,
                f"{progress.describe()}; the page under way had {budget:.3g}s left ({cause})",
                by_caller=progress.by_caller,
            )
        held_back.failed(self.cluster_name)  # its reconcile runs again at the first answer
        return DeadlineExceeded(
            f"[cluster {self._who()}] {method} {path}: no answer from {self.address}{self._via} within "
            f"{budget:.3g}s ({cause})",
            cluster_name=self.cluster_name,
            address=self.address,
        )

    def _abandoned(self, method: str, path: str, own: CallCut, sent: bool) -> DeadlineExceeded:
        """A call cut by its own `CallCut` (the coroutine awaiting it was cancelled, or the
        event of a `cancelled_by`). No failure of the cluster (it is not held back for it,
        nor a refusal)."""
        return self._deadline_error(method, path, f"cut: {own.why}", sent=sent)

    def _not_sent(self, method: str, path: str, began: float, end: float) -> DeadlineExceeded:
        """A call made once its deadline had passed: nothing was sent, no server is at fault."""
        late = max(began - end, 0.0)
        progress = listing.current()
        if progress is not None and progress.pages and progress.end is not None:
            return self._deadline_error(
                method,
                path,
                f"not sent: {progress.describe()} (its deadline ended {late:.3g}s before the "
                "next page)",
                sent=False,
                by_caller=progress.by_caller,
            )
        outer = _deadline.get()
        whose = (
            "its enclosing deadline() (a reconcile's reconcile_timeout, say)"
            if outer is not None and outer <= end and not isinstance(outer, _OwnEnd)
            else "its timeout"
        )
        return self._deadline_error(
            method,
            path,
            f"not sent: the deadline had passed, {whose} ended {late:.3g}s before the call",
            sent=False,
        )

    def _deadline_error(
        self, method: str, path: str, detail: str, *, sent: bool = True, by_caller: bool = True
    ) -> DeadlineExceeded:
        """A `DeadlineExceeded` of a call its caller's side ended (late, cut, or a list whose one
        deadline ran out): no failure of the cluster, which is not held back for it."""
        exc = DeadlineExceeded(
            f"[cluster {self._who()}] {method} {path}: {detail}",
            cluster_name=self.cluster_name,
            address=self.address,
        )
        exc.sent = sent
        exc.by_caller = by_caller
        return exc

    def _end(self, timeout: float | None, now: float | None = None) -> float:
        """The absolute deadline of a call starting now.

        An explicit ``timeout`` is shortened by the context's deadline; without
        one, the context's deadline applies, else `DEFAULT_TIMEOUT`.
        """
        if now is None:
            now = time.monotonic()
        outer = _deadline.get()
        if timeout is None:
            return outer if outer is not None else now + DEFAULT_TIMEOUT
        if timeout != timeout or timeout == _INF:  # (0 or less: passed already)
            checked_timeout(timeout)
        return now + timeout if outer is None else min(outer, now + timeout)

    def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, Any],
        timeout: urllib3.Timeout,
        credential: Credential | None,
    ) -> urllib3.BaseHTTPResponse:
        headers = self._authorized(method, url, headers, credential)
        code = "<error>"

        def send() -> urllib3.BaseHTTPResponse:
            return self._pool.request(
                method,
                url,
                body=body,
                headers=headers,
                timeout=timeout,
                preload_content=False,
                retries=_NO_RETRIES,
            )

        try:
            try:
                resp = send()
            except urllib3.exceptions.ClosedPoolError:
                # its pool was closed as it was taken (a client certificate just rotated:
                # `_close_pools`), before anything was sent: a new pool sends it
                resp = send()
            code = str(resp.status)
            if resp.status < 400:
                held_back.answered(self.cluster_name)
            return resp
        finally:
            key = (method, code)
            with self._sent_lock:
                self._sent[key] = self._sent.get(key, 0) + 1

    def retry_counts(self) -> dict[str, int]:
        """The calls this client retried within their deadline so far, by reason
        (``throttled``, ``server-unavailable``, ``connection-broken``)."""
        with self._sent_lock:
            return dict(self._retried)

    def request_counts(self) -> dict[tuple[str, str], int]:
        """The requests sent so far (calls, their retries, watches opened), by ``(method,
        code)``: the HTTP status of the answer, ``"<error>"`` when none came (refused, cut,
        past its deadline), as client-go's ``rest_client_requests_total`` counts them."""
        with self._sent_lock:
            return dict(self._sent)

    def _current_credentials(self) -> None:
        """Read its configuration's credentials again if they were swapped since.

        Once they were swapped in place (a provider saw its member's kubeconfig change in
        its credentials only: ``Cluster.update_credentials``), the credential source (exec
        plugin, token file) and the client certificate are read again; connections that
        present another client certificate are closed (the idle ones now, those in use when
        released: an open watch streams on, the server does not authenticate it again), so
        the next ones present the new one. A token is read from the configuration at each
        request."""
        cfg = self.api_client.configuration
        generation = credentials_generation(cfg)
        if generation == self._generation:
            return
        with self._lock:
            if generation == self._generation:
                return
            self._generation = generation
            self._credential = credential_of(cfg)
            self._certificate_stamp = client_certificate_stamp(cfg)
            kw = self._pool.connection_pool_kw
            files = (cfg.cert_file, cfg.key_file)
            renewed = files != (kw.get("cert_file"), kw.get("key_file"))
            renewed = renewed or self._sockets.client_cert is not None
            kw["cert_file"], kw["key_file"] = files
            self._sockets.client_cert = None  # an exec plugin's: its new source gives it again
        if renewed:
            self._close_pools()

    def _certificate_renewed(self) -> bool:
        """Whether the kubeconfig's client certificate file was replaced since the pooled
        connections presented it; if so they are closed, so the next request presents the
        new one. client-go closes its connections when it sees the file rotated; here a 401
        is when it matters (a connection kept alive presented the expired one)."""
        if self._certificate_stamp is None:
            return False
        stamp = client_certificate_stamp(self.api_client.configuration)
        with self._lock:
            if stamp is None or stamp == self._certificate_stamp:
                return False
            self._certificate_stamp = stamp
        self._close_pools()
        return True

    def _close_pools(self) -> None:
        """Close the pooled connections: the idle ones now, those in use once released (an
        open watch streams on until it ends); the next ones are made anew, presenting the
        client certificate now current. urllib3 2's ``PoolManager.clear`` only forgets its
        pools, whose idle connections stayed open (presenting the certificate before) for
        as long as a watch's answer held its pool."""
        pools = self._pool.pools
        held = []
        for key in pools.keys():  # noqa: SIM118 (the container cannot be iterated)
            with contextlib.suppress(KeyError):  # (forgotten meanwhile)
                held.append(pools[key])
        self._pool.clear()
        for pool in held:
            pool.close()

    def _error(self, status: int, data: bytes, content_type: str = "") -> APIError:
        """The error of an answer with an error ``status``: the class its status (and its
        Status's reason) says; the Status's message, or a plain-text body's. A body of another
        type (``content_type``: a load balancer's 502 page, an authenticating proxy's 401
        login page) is never quoted, as a success's page is not (`_not_kubernetes`): it may
        carry session tokens, and it is not the API server's word. client-go quotes only a
        ``text/plain`` body too (rest/request.go ``newUnstructuredResponseError``)."""
        media = content_type.partition(";")[0].strip().lower()
        page = bool(data) and media not in ("", "text/plain") and "json" not in media
        error = APIError.from_response(
            status, b"" if page else data, cluster_name=self.cluster_name
        )
        if page:
            phrase = _STATUS_PHRASES.get(status, "")
            error = type(error)(
                f"answered {status}{' ' + phrase if phrase else ''} with {media}, not a "
                "Kubernetes Status (a proxy or load balancer in front of the API server?)",
                status=status,
                reason=error.reason,
                details=error.details,
                cluster_name=self.cluster_name,
            )
        problem = status == 401 and client_certificate_problem(self.api_client.configuration)
        unusable = status == 401 and self._sockets.client_pair.problem
        if unusable:
            # the renewal on disk cannot be used, and the pair presented instead was refused
            problem = (
                f"the client certificate on disk cannot be used ({unusable}), and the last "
                "pair that could was presented"
            )
        if status == 401 and not problem and (error.message or "Unauthorized") == "Unauthorized":
            # kube-apiserver's 401 says nothing more (kubectl: "You must be logged in to the
            # server"): say whose fault it is and where to look: the token file, plugin or
            # auth-provider it came from (read again or run again for this call), else the
            # kubeconfig (an in-cluster config has none: its token file is what to check)
            source = self._credential
            where = (
                source.describe() if source is not None else "kubeconfig or Secret they came from"
            )
            problem = (
                "the API server does not accept this cluster's credentials (a token revoked, "
                f"expired or of another cluster?): check the {where}"
            )
        if problem:
            # kube-apiserver's 401 for an expired client certificate says nothing more
            text = error.message or error.reason or "Unauthorized"
            error = type(error)(
                f"{text}: {problem}",
                status=status,
                reason=error.reason,
                details=error.details,
                cluster_name=self.cluster_name,
            )
        return error

    def _note_warnings(self, resp: urllib3.BaseHTTPResponse) -> None:
        """Log each warning of the API server (a deprecated version, a dropped unknown field,
        a webhook's) once per cluster, as kubectl shows them: what the server did not refuse
        but the controller's author should know."""
        for header in resp.headers.getlist("Warning"):
            for text in parse_warnings(header):
                with self._lock:
                    new = text not in self._warned
                    if new and len(self._warned) < _MAX_WARNINGS:
                        self._warned.add(text)
                if new:
                    log.warning(
                        "cluster=%s the API server warns: %s",
                        self._who(),
                        text,
                        extra=log_fields(cluster=self.cluster_name),
                    )

    def _attempt(
        self,
        method: str,
        url: str,
        payload: bytes | None,
        headers: Mapping[str, Any],
        left: float,
        credential: Credential | None,
    ) -> tuple[int, bytes, urllib3.BaseHTTPResponse]:
        """One try: status, body and response; raises `_RetryLater` for a connection that
        broke in a way that may be retried. What the answer says is for `_retry_later`."""
        t = urllib3.Timeout(connect=min(CONNECT_TIMEOUT, left), read=left)
        bound = answer_by.set(time.monotonic() + left)
        try:
            try:
                resp = self._send(method, url, payload, headers, t, credential)
            except (urllib3.exceptions.HTTPError, OSError, ApiException) as exc:
                if (
                    method in _READ_ONLY_METHODS
                    and isinstance(exc, urllib3.exceptions.ProtocolError)
                    and not self._closed.is_set()
                ):
                    raise _RetryLater(exc, "connection-broken", 0.0) from None
                raise
            self.last_answer = time.monotonic()
            if resp.status < 500:
                self.last_response = self.last_answer
            if "Warning" in resp.headers:
                self._note_warnings(resp)
            try:
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
                resp.close()
                if method in _READ_ONLY_METHODS and not isinstance(
                    exc, urllib3.exceptions.ReadTimeoutError
                ):
                    raise _RetryLater(exc, "connection-broken", 0.0) from None
                raise
            finally:
                resp.release_conn()
        finally:
            answer_by.reset(bound)
        return resp.status, data, resp

    def _retry_later(
        self, status: int, data: bytes, resp: urllib3.BaseHTTPResponse
    ) -> _RetryLater | None:
        """An answer asking to be asked again later (a 429 or a 5xx with ``Retry-After``), or None."""
        if (status == 429 or status >= 500) and resp.headers.get("Retry-After"):
            # only a server that says when to come back is asked again, as client-go does:
            # a 429 without it is a refusal (an eviction a disruption budget forbids)
            err = self._error(status, data, resp.headers.get("Content-Type") or "")
            delay = _retry_after(resp.headers.get("Retry-After"), err.retry_after)
            if err.retry_after is None and 0 < delay < math.inf:
                # the header's delay where `APIError.retry_after` reads it, as client-go puts
                # it in the Status details of an answer with none (API Priority and Fairness
                # answers text/plain): raised once retries run out, it says how long to wait
                err.details = {**(err.details or {}), "retryAfterSeconds": math.ceil(delay)}
            return _RetryLater(err, "throttled" if status == 429 else "server-unavailable", delay)
        return None

    def _wait_to_retry(
        self,
        retry: _RetryLater,
        method: str,
        path: str,
        attempt: int,
        delay: float,
        began: float,
        end: float,
        budget: float,
        cuts: int,
        wake: threading.Event,
        own: CallCut | None,
    ) -> None:
        """Wait before sending a call ``retry`` says to send again (attempt ``attempt``, at least
        ``delay`` seconds), counted and logged at debug; raise its error instead when no retry
        fits before ``end`` or the attempts ran out, and end the wait at once when the call is
        cut (its cluster left, was found not answering, or its own cut)."""
        if own is not None and own.cut:
            raise self._abandoned(method, path, own, attempt > 0) from None
        if self._cut_since(cuts):
            raise self._cut_short(method, path, began, budget) from None
        wait = max(retry.delay, delay)
        if attempt >= MAX_ATTEMPTS or time.monotonic() + wait >= end:
            err = retry.error
            if isinstance(err, APIError):
                raise err from None
            raise self._failure(err, method, path, budget) from None
        with self._sent_lock:
            self._retried[retry.reason] = self._retried.get(retry.reason, 0) + 1
        log.debug(
            "cluster=%s %s %s: %s (%s); retry %d in %.2fs",
            self._who(),
            method,
            path,
            retry.reason,
            _short_reason(retry.error) if not isinstance(retry.error, APIError) else retry.error,
            attempt,
            wait,
            extra=log_fields(cluster=self.cluster_name),
        )
        _wait_either(wake, own, wait)
        if self._closed.is_set():
            raise self._left(method, path) from None
        if own is not None and own.cut:
            raise self._abandoned(method, path, own, attempt > 0) from None
        if self._cut_since(cuts):  # not sent again to a cluster found not answering
            raise self._cut_short(method, path, began, budget) from None

    # -- API ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        accept: str = _JSON,
        probe: bool = False,
        expect_object: bool = False,
    ) -> Any:
        """Send one request and return the decoded JSON answer (plain dicts/lists).

        An answer the server marks as something else (``text/plain``: a pod's log,
        ``/healthz``) is returned as text; an empty answer as None. With
        ``expect_object`` (what reads and writes of objects and lists pass) the answer
        must be a JSON object: anything else (a proxy's HTML login page, an empty
        body, a JSON list) raises [`NotKubernetesAnswer`][mcruntime.errors.NotKubernetesAnswer].

        ``body`` may be ``bytes`` (sent as is) or anything JSON-encodable;
        ``content_type`` defaults to ``application/json`` when there is a body;
        ``accept`` is the ``Accept`` header (say, ``METADATA_ACCEPT``).
        ``timeout`` is the deadline of the whole call, retries included
        (default: the enclosing `deadline`, else `DEFAULT_TIMEOUT`; an
        enclosing `deadline` also shortens an explicit one).
        ``probe`` marks a health probe: it is sent even while `refuse_calls` holds.
        """
        method = method.upper()
        refusing = self._refusing
        if refusing and not probe:
            raise self._refused(method, path, refusing)
        began = time.monotonic()
        end = self._end(timeout, began)
        budget = end - began
        cuts = self._cuts  # a failure once `cut_calls` counted on is a cut
        wake = self._wake  # (read after the count: a cut between them is seen by the count)
        own = call_cut.get()  # this call's own cut (an AsyncClient call's coroutine cancelled)
        if own is None:
            self._said_if_on_a_loop(method, path)
        payload: bytes | None = None
        if body is not None:
            payload = body if isinstance(body, bytes) else _json.dumps(body)
            content_type = content_type or _JSON
        url = self.host + path + _query_string(query)
        attempt = 0
        delay = _RETRY_INITIAL
        reauthenticate = True
        renewable = True
        while True:
            if self._closed.is_set():
                raise self._left(method, path)
            if own is not None and own.cut:
                raise self._abandoned(method, path, own, attempt > 0)
            left = end - time.monotonic()
            if left <= 0:
                if attempt == 0:
                    raise self._not_sent(method, path, began, end)
                raise self._expired(method, path, max(budget, 0.0), f"{attempt} attempts")
            attempt += 1
            self._current_credentials()
            source = self._credential
            credential = None
            if source is not None:
                credential = self._credential_for(source, method, path, end, budget, own)
                left = end - time.monotonic()  # fetching it took its share of the deadline
                if left <= 0:
                    raise self._expired(method, path, budget, "the credential took the time left")
            headers = self._headers(accept, content_type)
            retry: _RetryLater | None
            try:
                status, data, resp = self._attempt(method, url, payload, headers, left, credential)
            except _RetryLater as broken:
                retry = broken
            except (urllib3.exceptions.HTTPError, OSError, ApiException, ValueError) as exc:
                if own is not None and own.cut:
                    raise self._abandoned(method, path, own, attempt > 0) from None
                if self._cut_since(cuts):
                    raise self._cut_short(method, path, began, budget) from None
                if _bad_header(exc):  # the credential's fault, not the network's
                    raise CredentialError(
                        f"[cluster {self._who()}] {method} {path}: not sent: {_BAD_HEADER}",
                        cluster_name=self.cluster_name,
                        address=self.address,
                    ) from None
                raise self._failure(exc, method, path, budget) from None
            else:
                # the answer was read: what reading it raises is no failure of the connection
                retry = self._retry_later(status, data, resp)
            if retry is not None:
                self._wait_to_retry(
                    retry, method, path, attempt, delay, began, end, budget, cuts, wake, own
                )
                delay = min(delay * 2, 1.0)
                continue
            if status >= 400:
                if status == 401 and reauthenticate and source and credential:
                    # refused: the credential was revoked or rotated early. client-go fetches a
                    # new one for the next call; here this call is sent once more with it (a
                    # 401 is answered before the server acts on anything)
                    source.invalidate(credential)
                    reauthenticate = False
                    continue
                if status == 401 and renewable and self._certificate_renewed():
                    renewable = False  # once: sent again on a connection presenting it
                    continue
                raise self._error(status, data, resp.headers.get("Content-Type") or "")
            content_type = resp.headers.get("Content-Type") or ""
            if not data:
                if expect_object:
                    raise self._not_kubernetes(method, path, status, content_type, "an empty body")
                return None
            if content_type and "json" not in content_type:
                if expect_object:
                    raise self._not_kubernetes(method, path, status, content_type)
                # text the server says is text (a pod's log, /healthz) stays text, even when
                # a line of it would parse as JSON
                return data.decode(_charset(content_type), errors="replace")
            try:
                doc = _json.loads(data)
            except _json.JSONDecodeError:
                if expect_object:
                    raise self._not_kubernetes(
                        method, path, status, content_type, "a body that is not JSON"
                    ) from None
                return data.decode(errors="replace")
            if expect_object and not isinstance(doc, dict):
                raise self._not_kubernetes(
                    method, path, status, content_type, "JSON that is not an object"
                )
            return doc

    def _not_kubernetes(
        self, method: str, path: str, status: int, content_type: str, what: str = ""
    ) -> NotKubernetesAnswer:
        """A call that must answer with a Kubernetes object got ``what`` (by default: its
        content type); the body itself is never quoted (a login page may carry tokens).
        client-go fails alike: ``Result.Into`` decodes with the negotiated serializer, and
        a body that is none is an error, never an object (k8s.io/client-go rest/request.go,
        ``transformResponse``: "Body was not decodable")."""
        media = content_type.partition(";")[0].strip()
        if not what:
            what = media
        elif media:
            what = f"{what} ({media})"
        return NotKubernetesAnswer(
            f"[cluster {self._who()}] {method} {path}: answered {status} with {what}, not a "
            "Kubernetes object (a proxy in front of the API server?)",
            cluster_name=self.cluster_name,
            address=self.address,
            status=status,
            content_type=media,
        )

    def _failure(self, exc: BaseException, method: str, path: str, budget: float) -> Exception:
        if self._closed.is_set():
            return self._left(method, path)
        if isinstance(exc, urllib3.exceptions.ProxyError) and isinstance(
            exc.__cause__, _ProxyHandshakeTimeout
        ):
            exc = exc.__cause__  # (urllib3 wraps what failed before the proxy was reached)
        connect_timed_out = isinstance(
            exc, urllib3.exceptions.ConnectTimeoutError
        ) and not isinstance(
            exc, urllib3.exceptions.NewConnectionError
        )  # (a subclass in urllib3 2)
        if isinstance(exc, urllib3.exceptions.ReadTimeoutError | socket.timeout) or (
            connect_timed_out and budget < CONNECT_TIMEOUT
        ):
            cause = _short_reason(exc)
            if cause is TOO_SLOW and method == "WATCH":
                cause = WATCH_TOO_SLOW  # its headers: the stream itself has no end
            return self._expired(method, path, budget, cause)
        return self._unreachable(exc)

    def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        open_timeout: float | None = None,
        accept: str = _JSON,
    ) -> WatchStream:
        """Open a watch on a collection ``path``; iterate the result for events.

        ``open_timeout`` bounds the opening, connect, status line and headers
        together, however slowly they come (default `WATCH_OPEN_TIMEOUT`,
        shortened by an enclosing `deadline`);
        ``timeout`` bounds the silence between two reads of the stream (None:
        no bound; the server ends the watch after ``timeoutSeconds`` when that
        is in ``query``); ``accept`` is the ``Accept`` header. Error Status answers
        raise before the stream is returned, but for a 429 or 5xx with a
        ``Retry-After`` (API Priority and Fairness throttling): the watch is opened
        again once the server said, as a request is, within the open deadline and
        `MAX_ATTEMPTS`, each retry logged at debug and counted (`retry_counts`);
        a Retry-After that does not fit raises the error, whose
        [`retry_after`][mcruntime.errors.APIError.retry_after] says how long to wait.
        """
        q = dict(query or {})
        q["watch"] = "true"
        if self._closed.is_set():
            raise self._left("WATCH", path)
        refusing = self._refusing
        if refusing:
            raise self._refused("WATCH", path, refusing)
        began = time.monotonic()
        end = self._end(WATCH_OPEN_TIMEOUT if open_timeout is None else open_timeout, began)
        cuts = self._cuts
        wake = self._wake  # (read after the count, as in `request`)
        reauthenticate = True
        renewable = True
        attempt = 0
        delay = _RETRY_INITIAL
        #: why the last attempt was not the last (said when the deadline ends the next one)
        again = ""
        while True:
            left = end - time.monotonic()
            if left <= 0:
                if not again:  # nothing sent yet
                    raise self._not_sent("WATCH", path, began, end)
                raise self._expired("WATCH", path, end - began, again)
            attempt += 1
            self._current_credentials()
            source = self._credential
            credential = None
            if source is not None:
                credential = self._credential_for(source, "WATCH", path, end, end - began, None)
                left = end - time.monotonic()  # fetching it took its share of the deadline
                if left <= 0:
                    raise self._expired(
                        "WATCH", path, end - began, "the credential took the time left"
                    )
            headers = self._headers(accept, None)
            t = urllib3.Timeout(connect=min(CONNECT_TIMEOUT, left), read=left)
            # the opening (status line and headers, or an error's body) comes in by `end`,
            # however it trickles in
            bound = answer_by.set(end)
            try:
                resp = self._send(
                    "GET", self.host + path + _query_string(q), None, headers, t, credential
                )
                if resp.status < 400:
                    content_type = resp.headers.get("Content-Type") or ""
                    if content_type and "json" not in content_type:
                        # events are JSON lines: a page (a proxy's login) is no watch
                        with contextlib.suppress(Exception):
                            resp.close()
                        resp.release_conn()
                        raise self._not_kubernetes("WATCH", path, resp.status, content_type)
                    stream_unbounded(resp)
                    break
                try:
                    data = resp.read()
                except (urllib3.exceptions.HTTPError, OSError):
                    data = b""
                finally:
                    resp.release_conn()
            except (urllib3.exceptions.HTTPError, OSError, ApiException) as exc:
                if self._cut_since(cuts):
                    raise self._cut_short("WATCH", path, began, end - began) from None
                raise self._failure(exc, "WATCH", path, left) from None
            finally:
                answer_by.reset(bound)
            if resp.status == 401 and reauthenticate and source and credential:
                source.invalidate(credential)
                reauthenticate = False  # once, as for a request
                again = "a 401 and a new credential"
                continue
            if resp.status == 401 and renewable and self._certificate_renewed():
                renewable = False
                again = "a 401 and a renewed client certificate"
                continue
            # a 429 or 5xx with a Retry-After (API Priority and Fairness throttling, a server
            # starting): opened again once the server said, within the open deadline, as a
            # request is (and as client-go's Request.Watch retries)
            retry = self._retry_later(resp.status, data, resp)
            if retry is None:
                raise self._error(resp.status, data, resp.headers.get("Content-Type") or "")
            self._wait_to_retry(
                retry, "WATCH", path, attempt, delay, began, end, end - began, cuts, wake, None
            )
            delay = min(delay * 2, 1.0)
            again = f"{attempt} attempts"
        if "Warning" in resp.headers:
            self._note_warnings(resp)
        # from now on the socket's timeout bounds the silence of the stream
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(timeout)
        self.last_answer = time.monotonic()
        stream = WatchStream(resp, self, silence=timeout, path=path)
        with self._lock:
            closed = self._closed.is_set()
            self._watches.add(stream)
        if closed:
            stream.close()
        return stream

    def _forget_connections(self) -> None:
        """In a child just forked: let go of the parent's connections, idle or in use, and
        watch streams, without cutting them (see `_forget_the_parents_connections`); the
        next calls open connections of their own. The locks are new: a parent thread may
        have held one at the fork."""
        self._lock = threading.Lock()
        self._sent_lock = threading.Lock()
        self._watches = weakref.WeakSet()
        self._sockets.forget()
        # a new, empty pool set: the parent's pools (and their queues' locks) are left alone;
        # dropped, their idle connections are closed in this process only (no shutdown)
        pools = getattr(self._pool, "pools", None)  # (urllib3's managers all have it)
        if pools is not None:
            self._pool.pools = type(pools)(pools._maxsize, dispose_func=pools.dispose_func)

    def close_watches(self) -> None:
        """End every open watch stream (their readers reconnect); the client stays usable."""
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            w.close()

    def close(self) -> None:
        """Cut every connection, in use or idle, and end every watch; later calls raise `ClusterLeft`.

        Calls blocked on the network (a hung server) end at once with
        [`ClusterLeft`][mcruntime.errors.ClusterLeft]. Idempotent.
        """
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            watches = list(self._watches)
        self._wake.set()
        for w in watches:
            w.close()
        self._sockets.cut_all()
        self._pool.clear()
        with _open_clients_lock:
            _open_clients.discard(self)

    def cut_calls(self, reason: str) -> None:
        """Cut the calls in flight; each raises [`ClusterNotAnswering`][mcruntime.errors.ClusterNotAnswering] with ``reason``.

        For a cluster known to have stopped answering (the manager's health check
        calls it when a probe gets no answer): its calls would otherwise hold
        their threads until their deadlines. Every connection of the pool is cut,
        idle ones included, but not the open watch streams' (their silence has
        its own bound, and their informers re-watch when the cluster answers
        again); a call waiting to retry ends too. The client stays usable: later
        calls are made as usual.
        """
        with self._lock:
            self._cut_reason = reason
            self._cuts += 1  # before the sockets: a call woken by its cut sees the count
            watches = list(self._watches)
            woken, self._wake = self._wake, threading.Event()
        woken.set()  # the calls waiting to retry
        keep = {id(_sock_of(w)) for w in watches if not w.closed}
        keep.discard(id(None))
        self._sockets.cut_all_but(keep)

    def refuse_calls(self, reason: str) -> None:
        """Fail every new call at once, unsent, with [`ClusterNotAnswering`][mcruntime.errors.ClusterNotAnswering] naming ``reason``, until `accept_calls`.

        For a cluster known to have stopped answering (the manager's health check
        calls it, then `cut_calls`): a call made to it meanwhile, say by another
        cluster's reconcile that copies an object to every member, would
        otherwise wait its whole deadline. Health probes (``probe=True``) are
        still sent, and open watch streams stay open.
        """
        if not reason:
            raise ValueError("refuse_calls() needs the reason its calls will name")
        self._refusing = reason

    def accept_calls(self) -> None:
        """Send new calls again (see `refuse_calls`); idempotent."""
        self._refusing = ""

    @property
    def refusing(self) -> str:
        """Why new calls are refused (`refuse_calls`), or "" when they are sent."""
        return self._refusing

    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self._closed.is_set()


def _wait_either(wake: threading.Event, own: CallCut | None, seconds: float) -> None:
    """Wait ``seconds``, until ``wake`` is set (a `cut_calls`) or ``own`` is cut."""
    if own is None:
        wake.wait(seconds)
        return
    end = time.monotonic() + seconds
    while not (wake.is_set() or own.cut):
        left = end - time.monotonic()
        if left <= 0:
            return
        own.event.wait(min(left, 0.05))


def _sock_of(stream: WatchStream) -> Any:
    """The socket a watch stream reads (None once its response let go of it).

    An answer that ends its connection (``Connection: close``, HTTP/1.0: a proxy's) has
    http.client's connection let go of the socket at once, handing it to the response,
    whose reader over it still holds it: found there, so that `close` can shut it down."""
    resp = stream._resp
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if sock is None:
        buffered = getattr(getattr(resp, "_fp", None), "fp", None)
        sock = getattr(getattr(buffered, "raw", None), "_sock", None)
    return sock


def _charset(content_type: str) -> str:
    """The ``charset`` of a ``Content-Type`` (UTF-8 when absent or unknown to Python)."""
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            name = value.strip().strip('"')
            try:
                codecs.lookup(name)
            except LookupError:
                break
            return name
    return "utf-8"


def _retry_after(header: str | None, from_status: float | None) -> float:
    """The seconds a ``Retry-After`` asks to wait: a number of seconds, or an HTTP date (RFC
    9110; a proxy's or load balancer's 503), from now by this machine's clock; else the
    Status's ``retryAfterSeconds``, else none. (A date read as no delay at all had the call
    sent again four times within a second to a server that asked for a pause.)"""
    if header:
        with contextlib.suppress(ValueError):
            return max(0.0, float(header))
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            when = email.utils.parsedate_to_datetime(header)
            if when.tzinfo is None:  # (RFC 9110's obsolete forms name no zone: GMT too)
                when = when.replace(tzinfo=datetime.UTC)
            return max(0.0, when.timestamp() - time.time())
    return max(0.0, from_status or 0.0)


class WatchStream:
    """Decoded watch events ``{"type": ..., "object": {...}}``: iterate, or `run` with a callback.

    Use it once (a stream closed before that yields nothing). `close`
    may be called from any thread: it shuts the socket down so a read blocked
    on the network ends promptly (without an error). A broken connection ends
    the stream with [`Unreachable`][mcruntime.errors.Unreachable]; the server
    ending the watch ends it quietly.
    """

    def __init__(
        self,
        response: urllib3.BaseHTTPResponse,
        rest: RESTClient,
        *,
        silence: float | None = None,
        path: str = "",
    ) -> None:
        self._resp = response
        self._rest = rest
        self._silence = silence
        self._path = path
        self._lock = threading.Lock()
        self._closed = False
        self._iterating = False
        self._reading = False
        self._finished = False
        #: the process that opened it: a child forked from it closes the stream without
        #: shutting its connection down (the parent's too)
        self._pid = os.getpid()
        #: the shared reader's handle of a stream given to `start`
        self._started: _watchmux.SharedWatch | None = None

    @property
    def closed(self) -> bool:
        """True once `close` was called or the stream ended."""
        return self._closed or self._finished

    def _begin(self) -> bool:
        """Claim the stream for its one reader; False when it ended already."""
        with self._lock:
            if self._iterating:
                raise RuntimeError("a WatchStream can be read only once")
            self._iterating = True
            if self._finished:
                return False
            self._reading = True
            return True

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self._begin():
            return iter(())
        return self._events()

    def run(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        """Hand every event to ``on_event`` until the stream ends; raise as iterating would.

        The events of every stream whose connection allows it (a socket, TLS
        or not, and a chunked, uncompressed body) are read by one thread
        shared by all such streams, which calls ``on_event``: it must not
        block. This thread waits meanwhile. Otherwise this thread reads them.
        What ``on_event`` raises ends the stream and is raised here.
        """
        if not self._begin():
            return
        try:
            shared = self._shared(on_event)
        except BaseException:
            self._finish()
            raise
        if shared is None:
            for event in self._events():
                on_event(event)
            return
        _watchmux.add(shared)
        shared.wait()

    def start(
        self,
        on_event: Callable[[dict[str, Any]], None],
        on_end: Callable[[BaseException | None], None],
    ) -> bool:
        """Hand the stream to the thread that reads every watch, and return at once.

        ``on_event`` gets each event, and ``on_end(error)`` is called once when
        the stream ended (``None``: closed, or ended by the server), both on
        that shared thread: they must not block. What ``on_event`` raises ends
        the stream and is ``on_end``'s error. Returns False, calling nothing,
        when the connection cannot be read by that thread (see `run`): the
        stream is closed. A stream closed before is ended at once (``on_end(None)``
        on the calling thread). `close` ends the stream; `join` waits for its end.
        """
        if not self._begin():
            on_end(None)
            return True
        try:
            shared = self._shared(on_event, on_end)
        except BaseException:
            self._finish()
            raise
        if shared is None:
            self._finish()
            return False
        self._started = shared
        _watchmux.add(shared)
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` for a `start`-ed stream to end; True once it did (or when it
        was not started)."""
        shared = self._started
        return True if shared is None else shared.join(timeout)

    def _shared(
        self,
        on_event: Callable[[dict[str, Any]], None],
        on_end: Callable[[BaseException | None], None] | None = None,
    ) -> _watchmux.SharedWatch | None:
        """The stream, taken off urllib3 for the shared reader; None when it cannot be."""
        resp = self._resp
        raw = getattr(resp, "_fp", None)  # http.client's response under urllib3's
        buffered = getattr(raw, "fp", None)  # its buffered reader over the socket
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        headers = resp.headers
        if (
            not isinstance(sock, socket.socket)  # (a TLS-in-TLS proxy tunnel is not one)
            or not isinstance(buffered, io.BufferedReader)
            or not getattr(raw, "chunked", False)
            or getattr(raw, "chunk_left", 0) is not None
            or headers.get("content-encoding", "identity").lower() not in ("", "identity")
        ):
            return None
        try:
            sock.setblocking(False)
            try:
                leftover = buffered.peek()  # what came with the headers: buffered, not read yet
            except _watchmux.WOULD_BLOCK:
                leftover = b""
            if leftover:
                buffered.read(len(leftover))
        except (OSError, ValueError) as exc:
            if self._closed:
                leftover = b""
            else:
                raise self._rest._unreachable(exc) from None
        return _watchmux.SharedWatch(
            sock,
            leftover,
            label=f"cluster={self._rest._who()} watch {self._path}",
            on_event=on_event,
            on_read=self._on_read,
            failed=self._failed,
            closed=self._is_closed,
            finish=self._finish,
            silence=self._silence,
            on_end=on_end,
        )

    def _on_read(self) -> None:
        self._rest.last_answer = time.monotonic()

    def _event(self, loads: Callable[[bytes], Any], line: bytes) -> Any:
        """One event of the stream read by its own thread (`_events`); what is no JSON ends
        it as `_failed` says."""
        try:
            return loads(line)
        except _json.JSONDecodeError:
            raise self._failed(_watchmux.NotEvents(_watchmux.NOT_JSON)) from None

    def _failed(self, exc: BaseException) -> Exception:
        """What the stream ends with when reading it failed: `NotKubernetesAnswer` for a body
        that is no stream of watch events (a proxy's page in it: the API server was not
        reached), else `Unreachable`."""
        if isinstance(exc, _watchmux.NotEvents):
            rest = self._rest
            content_type = self._resp.headers.get("Content-Type") or ""
            return rest._not_kubernetes(
                "WATCH", self._path, self._resp.status, content_type, str(exc)
            )
        return self._rest._unreachable(exc)

    def _is_closed(self) -> bool:
        return self._closed

    def _events(self) -> Iterator[dict[str, Any]]:
        self._reading = True
        resp = self._resp
        rest = self._rest
        monotonic = time.monotonic
        buf = bytearray()
        loads = _json.loads
        silence = self._silence
        line_since = 0.0  # when the event line not yet ended began
        try:
            while not self._closed:
                try:
                    chunk = resp.read1(_READ_SIZE)
                except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
                    if self._closed:
                        return
                    raise self._rest._unreachable(exc) from None
                if not chunk:
                    break
                rest.last_answer = now = monotonic()
                if not buf:
                    line_since = now
                buf += chunk
                if b"\n" not in chunk:
                    # bytes that never end a line are no progress: silent all the same
                    if silence is not None and now - line_since > silence:
                        raise self._rest._unreachable(
                            urllib3.exceptions.ReadTimeoutError(None, "", "read timed out")  # type: ignore[arg-type]
                        )
                    continue
                end = buf.rfind(b"\n")
                lines = bytes(buf[:end])
                del buf[: end + 1]
                line_since = now  # (what is left began in this chunk)
                for line in lines.split(b"\n"):
                    if line and not line.isspace():  # as line.strip(), without copying the line
                        yield self._event(loads, line)
                    if self._closed:
                        return
            if buf.strip() and not self._closed:
                yield self._event(loads, bytes(buf))
        finally:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
        # closing a broken response must never mask how the stream ended
        with contextlib.suppress(Exception):
            self._resp.close()
        with contextlib.suppress(Exception):
            self._resp.release_conn()

    def close(self) -> None:
        """End the stream; safe from any thread, idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            reading = self._reading and not self._finished
        if self._pid == os.getpid():
            _shut_down(_sock_of(self))
        if not reading:
            self._finish()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
