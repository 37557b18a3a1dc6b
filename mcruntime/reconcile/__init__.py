"""Reconcile requests and results: what a reconciler takes and returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ContextDecorator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeAlias, runtime_checkable

__all__ = [
    "Request",
    "Result",
    "Reconciler",
    "ReconcilerFunc",
    "TerminalError",
    "RequeueAfter",
    "current_request",
    "reconciling",
]


@dataclass(frozen=True, slots=True)
class Request:
    """Names one object to reconcile, and the cluster it lives in.

    ``cluster_name`` is ``""`` for the manager's own (local) cluster, so a
    single-cluster program never has to set it.
    """

    namespace: str
    name: str
    cluster_name: str = ""

    def __str__(self) -> str:
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.cluster_name:
            return f"cluster://{self.cluster_name}/{key}"
        return key

    @property
    def key(self) -> str:
        """``namespace/name`` (or ``name`` for cluster-scoped objects), as a cache key."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next: nothing, a rate-limited requeue, or a requeue after a delay.

    ``requeue_after`` is in seconds, or a ``datetime.timedelta``; one that is not
    positive (a computed delay that has passed) asks for nothing, as in controller-runtime:
    say ``requeue=True`` as well to be queued again at once. ``priority`` is the
    work-queue priority of the request if it is queued again (a requeue, or a retry
    after an exception); None keeps the priority it was handed out with. A field of the
    wrong type is a `TypeError` here, not at the reconcile's end.
    """

    requeue: bool = False
    requeue_after: float | timedelta | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.requeue, bool):
            raise TypeError(f"Result.requeue must be a bool, not {self.requeue!r}")
        after = self.requeue_after
        seconds = (
            after is None
            or isinstance(after, timedelta)
            or (isinstance(after, int | float) and not isinstance(after, bool) and after == after)
        )
        if not seconds:
            raise TypeError(
                f"Result.requeue_after must be seconds (a number) or a timedelta, not {after!r}"
            )
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
        ):
            raise TypeError(f"Result.priority must be an int, not {self.priority!r}")


class TerminalError(Exception):
    """Raised by a reconciler for an error that retrying cannot fix: logged, counted, not retried."""


class RequeueAfter(Exception):
    """Raised by a reconciler, or by code it calls, to run the request again after ``delay``,
    as returning ``Result(requeue_after=delay)`` does: no error, no backoff; the message,
    which says why, is logged at INFO.

    For what must wait deep inside helpers (a database not ready yet), as kopf's
    ``TemporaryError(message, delay=...)``. ``delay`` is seconds or a ``timedelta``, and
    positive.
    """

    def __init__(self, delay: float | timedelta, message: str = "") -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise TypeError(
                f"RequeueAfter needs a positive delay in seconds or a timedelta, not {delay!r}"
            )
        super().__init__(message)
        self.delay = float(seconds)
        self.message = message


@runtime_checkable
class Reconciler(Protocol):
    """Anything callable with a [`Request`][mcruntime.reconcile.Request], returning a [`Result`][mcruntime.reconcile.Result] or ``None``.

    ``async def`` reconcilers are supported too. A reconciler must be safe to
    call from several worker threads at once (never for the same request).
    Raising an exception requeues the request with backoff, except
    [`TerminalError`][mcruntime.reconcile.TerminalError].
    """

    def __call__(self, request: Request, /) -> Result | None | Awaitable[Result | None]: ...


ReconcilerFunc: TypeAlias = Callable[[Request], "Result | None | Awaitable[Result | None]"]


_current: ContextVar[Request | None] = ContextVar("mcruntime_current_request", default=None)


def current_request() -> Request | None:
    """The request whose reconcile runs in this thread or task (None outside a reconcile).

    Helpers that need the cluster of the reconcile in progress read it here,
    such as an event recorder posting into the object's own cluster.
    """
    return _current.get()


class _Reconciling(ContextDecorator, AbstractContextManager[Request]):
    """The block of one [`reconciling()`][mcruntime.reconcile.reconciling]: a ``with`` block
    enters it once; as a decorator, each call gets a fresh one."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._token: Token[Request | None] | None = None

    def _recreate_cm(self) -> _Reconciling:
        return _Reconciling(self._request)

    def __enter__(self) -> Request:
        self._token = _current.set(self._request)
        return self._request

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)


def reconciling(request: Request) -> AbstractContextManager[Request]:
    """Make ``request`` the [`current_request`][mcruntime.reconcile.current_request] inside the block.

    Controllers wrap every reconcile in it; tests calling a reconciler directly may too.
    A plain class, not a generator: it is entered once per reconcile.
    """
    return _Reconciling(request)
