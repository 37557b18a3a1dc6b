"""HTTP access to one cluster: JSON requests and watch streams over the client's connection pool.

Requests reuse the ``kubernetes`` ``ApiClient``'s configuration, auth (bearer
tokens, refresh hooks, client certificates) and its urllib3 pool, but encode
and decode with orjson and never build model objects.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from mcruntime import _json
from mcruntime.errors import APIError, Unreachable

__all__ = ["RESTClient", "WatchStream", "DEFAULT_TIMEOUT", "CONNECT_TIMEOUT"]

log = logging.getLogger("mcruntime.client")

#: default total timeout of one request (seconds); watches have no read timeout by default
DEFAULT_TIMEOUT = 60.0
#: timeout to establish a connection (seconds)
CONNECT_TIMEOUT = 10.0
_READ_SIZE = 1 << 16
_JSON = "application/json"


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


def _address(host: str) -> str:
    parts = urlsplit(host)
    netloc = parts.netloc.rpartition("@")[2]
    if ":" not in netloc.rpartition("]")[2]:
        netloc += ":443" if parts.scheme == "https" else ":80"
    return netloc


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
        if isinstance(cur, (urllib3.exceptions.ConnectTimeoutError, socket.timeout)):
            return "connection timed out"
        if isinstance(cur, urllib3.exceptions.ReadTimeoutError):
            return "read timed out"
        if isinstance(cur, urllib3.exceptions.SSLError):
            return "TLS handshake failed"
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset"
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
        if isinstance(cur, urllib3.exceptions.ProtocolError):
            nxt = (
                cur.args[1]
                if len(cur.args) > 1 and isinstance(cur.args[1], BaseException)
                else None
            )
            if nxt is None:
                return "connection broken"
            cur = nxt
            continue
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            return type(cur).__name__
        cur = nxt
    return "connection failed"


class RESTClient:
    """One cluster's HTTP access (thread-safe): ``request`` for JSON calls, ``watch`` for streams.

    Errors: :class:`~mcruntime.errors.APIError` subclasses for error Status
    answers, :class:`~mcruntime.errors.Unreachable` when the server cannot be
    reached. Messages name the cluster and ``host:port``, never credentials.
    """

    def __init__(self, api_client: ApiClient, *, cluster_name: str = "") -> None:
        self.api_client = api_client
        self.cluster_name = cluster_name
        self.host: str = str(api_client.configuration.host).rstrip("/")
        self.address: str = _address(self.host)
        self._pool = api_client.rest_client.pool_manager
        self._watches: weakref.WeakSet[WatchStream] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"RESTClient(cluster={self.cluster_name or 'local'!r}, host={self.address!r})"

    # -- plumbing -------------------------------------------------------------------

    def _headers(
        self, method: str, path: str, accept: str, content_type: str | None
    ) -> dict[str, Any]:
        headers: dict[str, Any] = dict(self.api_client.default_headers)
        headers["Accept"] = accept
        if content_type:
            headers["Content-Type"] = content_type
        queries: list[Any] = []
        self.api_client.update_params_for_auth(
            headers, queries, ["BearerToken"], path, method, None
        )
        return headers

    def _unreachable(self, exc: BaseException) -> Unreachable:
        who = self.cluster_name or "local"
        return Unreachable(
            f"[cluster {who}] cannot reach {self.address}: {_short_reason(exc)}",
            cluster_name=self.cluster_name,
            address=self.address,
        )

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: bytes | None,
        headers: dict[str, Any],
        timeout: urllib3.Timeout,
    ) -> urllib3.BaseHTTPResponse:
        if self._closed:
            raise self._unreachable(ConnectionError("client closed"))
        url = self.host + path + _query_string(query)
        try:
            return self._pool.request(
                method, url, body=body, headers=headers, timeout=timeout, preload_content=False
            )
        except (urllib3.exceptions.HTTPError, OSError, ApiException) as exc:
            raise self._unreachable(exc) from None

    def _error(self, status: int, data: bytes) -> APIError:
        return APIError.from_response(status, data, cluster_name=self.cluster_name)

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
    ) -> Any:
        """Send one request and return the decoded JSON answer (plain dicts/lists).

        ``body`` may be ``bytes`` (sent as is) or anything JSON-encodable;
        ``content_type`` defaults to ``application/json`` when there is a body.
        """
        method = method.upper()
        payload: bytes | None = None
        if body is not None:
            payload = body if isinstance(body, bytes) else _json.dumps(body)
            content_type = content_type or _JSON
        headers = self._headers(method, path, _JSON, content_type)
        total = DEFAULT_TIMEOUT if timeout is None else timeout
        t = urllib3.Timeout(connect=min(CONNECT_TIMEOUT, total), read=total)
        resp = self._send(method, path, query, payload, headers, t)
        try:
            data = resp.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            resp.close()
            raise self._unreachable(exc) from None
        finally:
            resp.release_conn()
        if resp.status >= 400:
            raise self._error(resp.status, data)
        if not data:
            return None
        try:
            return _json.loads(data)
        except _json.JSONDecodeError:
            return data.decode(errors="replace")

    def watch(
        self, path: str, *, query: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> WatchStream:
        """Open a watch on a collection ``path``; iterate the result for events.

        ``timeout`` bounds the silence between two reads (None: no bound; the
        server ends the watch after ``timeoutSeconds`` when that is in ``query``).
        Error Status answers raise before the stream is returned.
        """
        q = dict(query or {})
        q["watch"] = "true"
        headers = self._headers("GET", path, _JSON, None)
        t = urllib3.Timeout(connect=CONNECT_TIMEOUT, read=timeout)
        resp = self._send("GET", path, q, None, headers, t)
        if resp.status >= 400:
            try:
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError):
                data = b""
            finally:
                resp.release_conn()
            raise self._error(resp.status, data)
        stream = WatchStream(resp, self)
        with self._lock:
            closed = self._closed
            self._watches.add(stream)
        if closed:
            stream.close()
        return stream

    def close(self) -> None:
        """Close every open watch and the pooled sockets; later requests raise Unreachable."""
        with self._lock:
            self._closed = True
            watches = list(self._watches)
        for w in watches:
            w.close()
        self._pool.clear()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed


class WatchStream:
    """Iterator of decoded watch events ``{"type": ..., "object": {...}}``.

    Iterate once (a stream closed before that yields nothing). :meth:`close`
    may be called from any thread: it shuts the socket down so an iteration
    blocked on the network ends promptly (without an error). A broken
    connection ends the iteration with :class:`~mcruntime.errors.Unreachable`;
    the server ending the watch ends it quietly.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse, rest: RESTClient) -> None:
        self._resp = response
        self._rest = rest
        self._lock = threading.Lock()
        self._closed = False
        self._iterating = False
        self._reading = False
        self._finished = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called or the stream ended."""
        return self._closed or self._finished

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            if self._iterating:
                raise RuntimeError("a WatchStream can be iterated only once")
            self._iterating = True
            if self._finished:
                return iter(())
        return self._events()

    def _events(self) -> Iterator[dict[str, Any]]:
        self._reading = True
        resp = self._resp
        buf = bytearray()
        loads = _json.loads
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
                buf += chunk
                if b"\n" not in chunk:
                    continue
                end = buf.rfind(b"\n")
                lines = bytes(buf[:end])
                del buf[: end + 1]
                for line in lines.split(b"\n"):
                    if line and not line.isspace():  # as line.strip(), without copying the line
                        yield loads(line)
                    if self._closed:
                        return
            if buf.strip() and not self._closed:
                yield loads(bytes(buf))
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
        conn = getattr(self._resp, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if not reading:
            self._finish()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
