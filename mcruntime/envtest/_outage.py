"""A storage outage: kube-apiserver up, its etcd down or cut off, as a client sees it.

Read in kube-apiserver's source: what needs etcd hangs until the request's
deadline (``--request-timeout``, 60 s, shortened by a ``?timeout=`` the client
sends: apiserver `WithRequestDeadline`), then the timeout filter
(`pkg/server/filters/timeout.go`, `WithTimeoutForNonLongRunningRequests`)
answers 504 with the Status of `NewTimeoutError("request did not complete
within the allotted timeout", 0)`, JSON-encoded without ``kind`` (no TypeMeta)
and with no Content-Type set, so Go's server sniffs ``text/plain``. What the
watch cache serves goes on: watches, lists and gets with a resourceVersion other
than ``""`` (``resourceVersionMatch=Exact`` and continued lists read etcd), and
what never reads storage: ``/version``, discovery, OpenAPI, reviews, and
authentication and authorization (informer caches). The ``etcd`` and
``etcd-readiness`` health checks fail (see ``_health``).
"""

from __future__ import annotations

import asyncio

from mcruntime import _json
from mcruntime._serving import asked_timeout
from mcruntime.envtest._http import HTTPRequest, Response

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "StorageOutage", "needs_storage", "request_deadline"]

#: kube-apiserver's ``--request-timeout``
DEFAULT_REQUEST_TIMEOUT = 60.0
#: what kube-apiserver's timeout filter writes, byte for byte (json.Encoder adds the newline)
_TIMEOUT_BODY = (
    _json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": "Timeout: request did not complete within the allotted timeout",
            "reason": "Timeout",
            "details": {},
            "code": 504,
        }
    )
    + b"\n"
)


def needs_storage(req: HTTPRequest, verb: str, subresource: str | None) -> bool:
    """Whether kube-apiserver reads or writes etcd to serve this authorized request."""
    if verb == "watch":
        return False
    if verb in ("get", "list") and subresource in (None, "", "status"):
        q = req.query
        if q.get("resourceVersion", "") == "":
            return True  # a consistent read (a list's, from 1.31, waits on etcd's progress)
        return q.get("resourceVersionMatch") == "Exact" or bool(q.get("continue"))
    return True  # writes; scale, tokens, evictions, bindings, kubelet paths read the object


def request_deadline(req: HTTPRequest, request_timeout: float) -> float:
    """The request's deadline in seconds: ``request_timeout``, or a shorter ``?timeout=``."""
    asked = asked_timeout(req.raw_query)
    if asked is not None and asked < request_timeout:
        return asked
    return request_timeout


def timed_out() -> Response:
    """kube-apiserver's answer to a request whose deadline passed before storage answered."""
    return Response(504, _TIMEOUT_BODY, "text/plain; charset=utf-8")


class StorageOutage:
    """Whether storage is down, and the requests waiting for it (used on the loop only)."""

    __slots__ = ("down", "_waiting")

    def __init__(self) -> None:
        self.down = False
        self._waiting: set[asyncio.Future[None]] = set()

    async def wait(self, seconds: float) -> bool:
        """Wait until storage is back (True) or ``seconds`` pass (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.add(fut)
        try:
            await asyncio.wait_for(fut, seconds)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiting.discard(fut)

    def begin(self) -> None:
        self.down = True

    def end(self) -> None:
        """Storage is back: the waiting requests proceed."""
        self.down = False
        for fut in list(self._waiting):
            if not fut.done():
                fut.set_result(None)

    def cut(self) -> None:
        """The server stops: the waiting requests end (their connections are cut)."""
        for fut in list(self._waiting):
            fut.cancel()
