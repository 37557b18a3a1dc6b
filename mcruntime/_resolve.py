"""DNS lookups bounded by a call's deadline, and cancellable.

`socket.getaddrinfo` has no timeout and cannot be interrupted: a resolver that does not
answer (CoreDNS down, a black-holed nameserver) holds the calling thread for as long as the
system resolver retries (glibc: 5 s per attempt and nameserver, two attempts, up to three
nameservers), whatever the call's deadline says, and a cluster that leaves cannot cut it.

`lookup` runs the lookup on a short thread of its own and waits for it until the timeout or
until ``wake`` is set (the caller's cancellation). An abandoned lookup ends by itself when
the system resolver gives up; its answer is dropped. At most `MAX_LOOKUPS` threads look up
at once in the process (the others queue), and callers asking for the same name at once
share one lookup: a fleet of clusters behind one unresolvable name holds at most a few
threads, not one per call.

`new_socket` is urllib3's ``_new_conn`` with its lookup made so (the client's connections and
an oidc refresh's use it), with a hook that lets the client cut a connect in progress.
IP addresses are not looked up.
"""

from __future__ import annotations

import collections
import copy
import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import urllib3

from mcruntime._forked import in_a_forked_child
from mcruntime._threads import PREFIX, start_thread

__all__ = ["MAX_LOOKUPS", "DnsTimeout", "LookupTimeout", "is_ip", "lookup", "new_socket"]

#: lookups running at once, process-wide (each on a thread of its own); more wait for a
#: thread within their deadline. Go caps its cgo lookups alike (at 500 threads). A cap too low
#: would let the lookups of names a silent nameserver holds keep names that resolve waiting;
#: a fleet's start looks up one name per cluster, a few milliseconds each.
MAX_LOOKUPS = 128

AddrInfo = tuple[Any, ...]


class LookupTimeout(TimeoutError):
    """No answer from the system resolver by the deadline (or the wait was cut)."""


class DnsTimeout(urllib3.exceptions.ConnectTimeoutError):
    """A connection's lookup of its server's (or proxy's) name got no answer in time."""


def is_ip(host: str) -> bool:
    """``host`` is an IP address (IPv6 with or without brackets): no lookup needed."""
    try:
        ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return False
    return True


class _Lookup:
    __slots__ = ("key", "done", "result", "error", "waiters")

    def __init__(self, key: tuple[str, int, int, int]) -> None:
        self.key = key
        self.done = False
        self.result: list[AddrInfo] = []
        self.error: BaseException | None = None
        #: the events of the callers still waiting (set when the lookup is done)
        self.waiters: set[threading.Event] = set()


_lock = threading.Lock()
_inflight: dict[tuple[str, int, int, int], _Lookup] = {}
_queued: collections.deque[_Lookup] = collections.deque()
_threads = 0


def _forget_the_parents_lookups() -> None:
    """In a child just forked: the parent's lookup threads are not in this process, so its
    lookups in flight never finish here (a lookup of the same host would join one and time
    out, every time) and do not count against `MAX_LOOKUPS`; its lock may have been held."""
    global _lock, _inflight, _queued, _threads
    _lock = threading.Lock()
    _inflight, _queued, _threads = {}, collections.deque(), 0


in_a_forked_child(_forget_the_parents_lookups)


def lookup(
    host: str,
    port: int,
    family: int = 0,
    type: int = socket.SOCK_STREAM,
    *,
    timeout: float | None,
    wake: threading.Event | None = None,
) -> list[AddrInfo]:
    """`socket.getaddrinfo(host, port, family, type)`, waited for at most ``timeout``
    seconds (None: no bound) or until ``wake`` (an event of this wait's own, which the
    lookup sets when done) is set by someone else: the caller's cancellation.

    Raises what `getaddrinfo` raises (`socket.gaierror` for a name that does not resolve),
    or `LookupTimeout` when the answer did not come in time or the wait was cut.
    """
    event = wake if wake is not None else threading.Event()
    key = (host, port, family, type)
    start = False
    with _lock:
        job = _inflight.get(key)
        if job is None:
            job = _inflight[key] = _Lookup(key)
            global _threads
            if _threads < MAX_LOOKUPS:
                _threads += 1
                start = True
            else:
                _queued.append(job)
        job.waiters.add(event)
    if start:
        try:
            start_thread(_run, PREFIX + "dns", job)
        except BaseException:
            with _lock:
                _threads -= 1
            _finish(job, [], RuntimeError("cannot start a DNS lookup thread"))
    end = None if timeout is None else time.monotonic() + timeout
    try:
        while not job.done:
            left = None if end is None else end - time.monotonic()
            if (left is not None and left <= 0) or (event.wait(left) and not job.done):
                raise LookupTimeout(f"DNS lookup of {host} timed out")
    finally:
        with _lock:
            job.waiters.discard(event)
    if job.error is not None:
        raise copy.copy(job.error)  # (callers sharing the lookup each raise their own)
    return list(job.result)


def _run(job: _Lookup | None) -> None:
    """A lookup thread: looks ``job`` up, then the queued ones, until none is left."""
    global _threads
    while job is not None:
        with _lock:
            wanted = bool(job.waiters)
        result: list[AddrInfo] = []
        error: BaseException | None = None
        if wanted:  # (a queued lookup whose callers all gave up is not made)
            try:
                result = socket.getaddrinfo(*job.key)
            except BaseException as exc:  # handed to the callers
                error = exc
        _finish(job, result, error)
        with _lock:
            job = _queued.popleft() if _queued else None
            if job is None:
                _threads -= 1


def _finish(job: _Lookup, result: list[AddrInfo], error: BaseException | None) -> None:
    with _lock:
        job.result, job.error = result, error
        job.done = True
        if _inflight.get(job.key) is job:
            del _inflight[job.key]
        waiters = list(job.waiters)
    for event in waiters:
        event.set()


def new_socket(
    conn: Any,
    waits: Callable[[], AbstractContextManager[threading.Event]] | None = None,
    guard: Callable[[socket.socket], None] | None = None,
) -> socket.socket:
    """The socket of urllib3 connection ``conn``, as its ``_new_conn`` makes it, but with
    the lookup of its host bounded by the connect timeout and cut when the event that
    ``waits()`` gives is set; the connect timeout bounds lookup and connect together.
    ``guard`` gets each socket before it connects, to hold a handle that can cut the
    connect (shutting a connecting socket down ends its ``connect`` at once). An IP address
    is not looked up. The addresses of a name are tried in turn, each within its share of
    the connect timeout (`_share`), a timeout going on to the next as a refusal does.

    Through a SOCKS proxy (urllib3's SOCKS connections, with ``_socks_options``) the name
    looked up so is the proxy's, and the server's name goes to the proxy as it is (PySocks
    would look the proxy's up unbounded); its socket, held by ``guard`` from before its
    connect, is cut in the proxy's greeting and ``CONNECT`` too.

    Raises as urllib3 does (`NameResolutionError`, `ConnectTimeoutError`,
    `NewConnectionError`), and `DnsTimeout` when the lookup took too long.
    """
    socks_options = getattr(conn, "_socks_options", None)
    if socks_options is not None:
        host, port = socks_options["proxy_host"].strip("[]"), socks_options["proxy_port"]
    else:
        host, port = conn._dns_host.strip("[]"), conn.port
    timeout = conn.timeout  # (the connect timeout: a number, None, or urllib3's "default")
    if timeout is not None and not isinstance(timeout, int | float):
        timeout = socket.getdefaulttimeout()
    began = time.monotonic()
    wanted = urllib3.util.connection.allowed_gai_family()
    if is_ip(host):
        try:  # (a numeric host: no lookup, nothing to wait for)
            infos = socket.getaddrinfo(
                host, port, wanted, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST
            )
        except socket.gaierror as exc:
            raise urllib3.exceptions.NameResolutionError(
                host, conn, exc
            ) from exc  # (or the proxy's)
    else:
        with waits() if waits is not None else nullcontext(None) as wake:
            try:
                infos = lookup(host, port, wanted, timeout=timeout, wake=wake)
            except socket.gaierror as exc:
                raise urllib3.exceptions.NameResolutionError(
                    host, conn, exc
                ) from exc  # (or the proxy's)
            except LookupTimeout as exc:
                raise DnsTimeout(conn, f"DNS lookup of {host} timed out") from exc
    # the first failure is the one said, as Go's dialer says it (a dead address that timed
    # out, not the refusal of the next one)
    first: OSError | None = None
    for i, (family, kind, proto, _, address) in enumerate(infos):
        share = None if timeout is None else _share(timeout - (time.monotonic() - began), i, infos)
        if share is not None and share <= 0:
            break  # the connect timeout ran out on the addresses before
        sock = None
        try:
            if socks_options is None:
                sock = socket.socket(family, kind, proto)
            else:
                sock = _through_socks(socks_options, family, kind, proto, address)
                address = (conn.host.strip("[]"), conn.port)
            if guard is not None:
                guard(sock)
            for option in conn.socket_options or ():
                sock.setsockopt(*option)
            if share is not None:
                sock.settimeout(share)
            if conn.source_address:
                sock.bind(conn.source_address)
            sock.connect(address)
        except OSError as exc:
            if sock is not None:
                sock.close()
            first = first or exc
            continue  # the next address, as urllib3 and Go do (a timeout too)
        except BaseException:  # (``guard`` said no)
            if sock is not None:
                sock.close()
            raise
        sys.audit("http.client.connect", conn, conn.host, conn.port)
        return sock
    # (PySocks says a timeout as a ProxyError, an OSError, holding the TimeoutError)
    if (
        first is None
        or isinstance(first, TimeoutError)
        or isinstance(getattr(first, "socket_err", None), TimeoutError)
    ):
        raise urllib3.exceptions.ConnectTimeoutError(
            conn, f"Connection to {conn.host} timed out. (connect timeout={timeout})"
        ) from first
    raise urllib3.exceptions.NewConnectionError(
        conn, f"Failed to establish a new connection: {first}"
    ) from first


#: the least time a connect to one of several addresses gets, as Go's dialer gives it (its
#: ``partialDeadline``), taken from the addresses after it when the time left is short
_SANE_MINIMUM = 2.0


def _share(left: float, i: int, infos: list[AddrInfo]) -> float:
    """The time the connect to the ``i``-th of ``infos`` gets of the ``left`` seconds: an equal
    share of them with the addresses after it, at least `_SANE_MINIMUM` (or all that is
    left), as Go's dialer shares its timeout. A name with several addresses, one of them dead
    (a replica gone, its address still in DNS): its connect times out within its share and
    the next address is tried, instead of the first taking the whole connect timeout."""
    if left <= 0:
        return 0.0
    share = left / (len(infos) - i)
    return max(min(left, max(share, _SANE_MINIMUM)), 0.001)


def _through_socks(
    options: dict[str, Any], family: int, kind: int, proto: int, proxy: Any
) -> socket.socket:
    """A PySocks socket that connects through the proxy at ``proxy`` (its looked-up address)."""
    import socks  # (PySocks: urllib3's SOCKS connections need it, so it is there)

    sock: socket.socket = socks.socksocket(family, kind, proto)
    sock.set_proxy(  # type: ignore[attr-defined]
        options["socks_version"],
        proxy[0],
        proxy[1],
        options["rdns"],
        options["username"],
        options["password"],
    )
    return sock
