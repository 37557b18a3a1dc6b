"""Who may scrape the metrics endpoint: the bearer token's user, as the local cluster says.

As controller-runtime's ``filters.WithAuthenticationAndAuthorization`` (what kubebuilder
scaffolds), every scrape's bearer token is reviewed by the API server of the cluster the
manager runs in: a TokenReview says whom it authenticates, a SubjectAccessReview whether
that user may ``get`` the path (a ClusterRole with ``nonResourceURLs: ["/metrics"]``).
Answers are cached as the Kubernetes delegating authenticator and authorizer cache them
(a minute for an authentication, a token the API server rejects included: k8s.io/apiserver's
``authenticatorfactory/delegating.go`` builds its token cache with
``cache.New(tokenAuth, false, c.CacheTTL, c.CacheTTL)``, the same TTL for success and
failure, one minute in controller-runtime's metrics filter; five minutes for an allowed
and 30 s for a denied decision), keyed by the token's SHA-256, at most `CACHE_SIZE` of
each (rejected tokens in a cache of their own, so a flood of them forgets no user): the token itself is never kept, logged or
echoed. Each review has a deadline; a local API server that refuses or hangs makes the
scrape fail with 503 (500 when the API server refuses the review itself, e.g. the
manager lacks ``system:auth-delegator``), logged once per failure streak with the
cluster's name and the reason; the scraper learns no more than that.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcruntime._streak import FailureStreaks
from mcruntime.errors import ClusterNotFound, MCRuntimeError, Unreachable

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = ["Denied", "MetricsAuth"]

log = logging.getLogger("mcruntime.manager")

#: how long a review may take, retries included (Prometheus' scrape timeout is 10 s)
REVIEW_TIMEOUT = 5.0
AUTHENTICATED_TTL = 60.0
#: a token the API server rejects is remembered as long (the delegating authenticator's
#: failure TTL is its success TTL): a scraper retrying it costs no TokenReview
UNAUTHENTICATED_TTL = AUTHENTICATED_TTL
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
#: at most this many tokens and decisions are remembered (oldest forgotten first)
CACHE_SIZE = 1024
_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#: the key of the one failure streak of the reviews
_REVIEWS = "reviews"


@dataclass(frozen=True)
class Denied(Exception):
    """Why a scrape is refused: the HTTP status and a message safe to send back."""

    status: int
    message: str


@dataclass(frozen=True)
class _User:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


class _TTLCache:
    """A bounded map whose entries expire; safe from the server's request threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            if hit[0] <= time.monotonic():
                del self._items[key]
                return None
            return hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        with self._lock:
            self._items[key] = (time.monotonic() + ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class _Flight:
    """One review in flight, shared by the scrapes that need its answer meanwhile."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: Denied | None = None


class MetricsAuth:
    """Authenticates and authorizes scrapes through ``cluster``'s TokenReviews and
    SubjectAccessReviews; `check` raises `Denied` for a scrape to refuse."""

    def __init__(self, cluster: Cluster, *, timeout: float = REVIEW_TIMEOUT) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._users = _TTLCache(CACHE_SIZE)
        #: hashes of the tokens the API server said authenticate nobody
        self._rejected = _TTLCache(CACHE_SIZE)
        self._decisions = _TTLCache(CACHE_SIZE)
        #: reviews in flight, by what they review: concurrent scrapes with one new token
        #: wait for the one review (a burst of them is not a burst of reviews)
        self._flights: dict[Any, _Flight] = {}
        self._flights_lock = threading.Lock()
        #: reviews that failed in a row (whatever they reviewed: one streak)
        self._streaks = FailureStreaks(log, "metrics")

    def check(self, authorization: str | None, path: str) -> None:
        """Return when the bearer of ``authorization`` (the request's header) may ``get``
        ``path``; raise `Denied` (401 unauthenticated, 403 forbidden, 503 unanswered)."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Denied(401, "Unauthorized")
        key = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        user = self._users.get(key)
        if user is None:
            if self._rejected.get(key) is not None:
                raise Denied(401, "Unauthorized")
            user = self._shared(("token", key), lambda: self._authenticate_once(key, token))
        decision = (user, path)
        allowed = self._decisions.get(decision)
        if allowed is None:
            allowed = self._shared(decision, lambda: self._authorize_once(user, path))
        if not allowed:
            raise Denied(403, f'forbidden: User "{user.name}" cannot get path "{path}"')

    def _shared(self, key: Any, review: Any) -> Any:
        """``review()``, once among the scrapes asking for ``key`` at the same time: the
        others wait for its answer (or its `Denied`)."""
        with self._flights_lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            if not flight.done.wait(self.timeout + 1.0):
                raise Denied(503, "the API server did not answer the review")
            if flight.error is not None:
                raise Denied(flight.error.status, flight.error.message)
            if flight.result is None:  # (the review raised other than Denied: logged there)
                raise Denied(500, "the review failed")
            return flight.result
        try:
            flight.result = review()
        except Denied as denied:
            flight.error = denied
            raise
        finally:
            with self._flights_lock:
                del self._flights[key]
            flight.done.set()
        return flight.result

    def _authenticate_once(self, key: bytes, token: str) -> _User:
        try:
            user = self._authenticate(token)
        except Denied as denied:
            if denied.status == 401:  # (not a review that failed: asked again next time)
                self._rejected.put(key, True, UNAUTHENTICATED_TTL)
            raise
        self._users.put(key, user, AUTHENTICATED_TTL)
        return user

    def _authorize_once(self, user: _User, path: str) -> bool:
        allowed = self._authorize(user, path)
        self._decisions.put((user, path), allowed, ALLOWED_TTL if allowed else DENIED_TTL)
        return allowed

    def _authenticate(self, token: str) -> _User:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        status = self._review(_TOKEN_REVIEWS, body, "the scraper's token")
        info = status.get("user") or {}
        if not status.get("authenticated") or not info.get("username"):
            raise Denied(401, "Unauthorized")
        return _User(
            str(info["username"]),
            str(info.get("uid") or ""),
            tuple(str(g) for g in info.get("groups") or ()),
            tuple(
                sorted(
                    (str(k), tuple(str(x) for x in v)) for k, v in (info.get("extra") or {}).items()
                )
            ),
        )

    def _authorize(self, user: _User, path: str) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"verb": "get", "path": path},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        status = self._review(_ACCESS_REVIEWS, body, f"whether {user.name} may get {path}")
        return bool(status.get("allowed")) and not status.get("denied")

    def _review(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST a review to the local cluster within the deadline; its status, or `Denied` 503."""
        try:
            answer = self.cluster.rest.request("POST", path, body=body, timeout=self.timeout)
        except MCRuntimeError as exc:
            # the exception names the cluster and the failure, never the request's body
            unanswered = isinstance(exc, Unreachable | ClusterNotFound)
            status = 503 if unanswered else 500
            self._streaks.failed(
                self.cluster.name,
                f"reviewing {what}",
                exc,
                retry=f"the scrape is refused with {status}; the next scrape asks again",
                key=_REVIEWS,
            )
            if unanswered:
                raise Denied(503, "the API server did not answer the review") from None
            raise Denied(500, "the API server refused the review") from None
        self._streaks.recovered(self.cluster.name, "reviewing scrapes", key=_REVIEWS)
        return dict((answer or {}).get("status") or {})
