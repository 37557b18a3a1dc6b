"""Reconcile requests and results: what a reconciler takes and returns."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractContextManager, ContextDecorator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeAlias, runtime_checkable

from mcruntime._exports import publish
from mcruntime._local import display_name
from mcruntime._logfields import log_fields, new_reconcile_id
from mcruntime.reconcile._fan_out import DEFAULT_FAN_OUT, for_each_cluster

__all__ = [
    "DEFAULT_FAN_OUT",
    "Request",
    "Result",
    "Reconciler",
    "ReconcilerFunc",
    "TerminalError",
    "RequeueAfter",
    "RequestLogger",
    "current_reconcile_id",
    "current_request",
    "for_each_cluster",
    "reconciling",
    "request_logger",
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
    say ``requeue=True`` as well to be queued again at once. It is finite: for "never",
    return ``None`` (Go's ``RequeueAfter`` is a ``time.Duration``, which cannot be infinite). ``priority`` is the
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
            or (
                isinstance(after, int | float)
                and not isinstance(after, bool)
                and math.isfinite(after)
            )
        )
        if not seconds:
            raise TypeError(
                f"Result.requeue_after must be seconds (a number) or a timedelta, not {after!r}"
                + (
                    " (a finite number: for no requeue, leave it None)"
                    if isinstance(after, float) and after == math.inf
                    else ""
                )
            )
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
        ):
            raise TypeError(f"Result.priority must be an int, not {self.priority!r}")


class TerminalError(Exception):
    """Raised by a reconciler for an error that retrying cannot fix: logged, counted, not retried."""


class RequeueAfter(Exception):
    """Raised by a reconciler, or by code it calls, to run the request again after ``delay``,
    as returning ``Result(requeue_after=delay)`` does: no error, no backoff. The message,
    which says why, is logged at INFO, once while the request keeps raising it (the
    same message again, or none, at DEBUG, as a returned ``Result`` is).

    For what must wait deep inside helpers (a database not ready yet), as kopf's
    ``TemporaryError(message, delay=...)``; from a finalizer's cleanup too (the
    `FinalizeError` raised for it, or a group, whose errors are all ``RequeueAfter``, runs
    again after the shortest delay). ``delay`` is seconds or a ``timedelta``, positive
    and finite.
    """

    def __init__(self, delay: float | timedelta, message: str = "") -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not seconds > 0
            or not math.isfinite(seconds)
        ):
            raise TypeError(
                f"RequeueAfter needs a positive, finite delay in seconds or a timedelta, "
                f"not {delay!r}"
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


@dataclass(frozen=True, slots=True)
class _Reconcile:
    """The reconcile running in a context: its request, its controller's name ("" when
    not run by a controller) and its id."""

    request: Request
    controller: str
    reconcile_id: str


_current: ContextVar[_Reconcile | None] = ContextVar("mcruntime_current_request", default=None)


def current_request() -> Request | None:
    """The request whose reconcile runs in this thread or task (None outside a reconcile).

    Helpers that need the cluster of the reconcile in progress read it here,
    such as an event recorder posting into the object's own cluster.
    """
    run = _current.get()
    return None if run is None else run.request


def current_reconcile_id() -> str | None:
    """The id of the reconcile running in this thread or task (None outside a reconcile).

    A controller gives each reconcile of a request a new one (a UUID, as
    controller-runtime's ``reconcileID``): the lines of a
    [`request_logger`][mcruntime.reconcile.request_logger] and the controller's own lines
    about that reconcile (its error, its requeue) carry it as the record's
    ``reconcile_id``, so one reconcile's lines are found together. Write it where a line
    is not enough (an annotation, a trace); no metric or Event carries it.
    """
    run = _current.get()
    return None if run is None else run.reconcile_id


class RequestLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose lines name the request being reconciled, as controller-runtime's
    ``log.FromContext(ctx)`` and kopf's ``logger`` argument do.

    Inside a reconcile (see [`current_request`][mcruntime.reconcile.current_request]) each
    message is prefixed ``cluster=<name> request=<namespace>/<name>:``, the way the
    library's own lines name them (the local cluster reads ``local``), and the record gets
    the attributes the library's own lines about the request carry, for structured
    formatters: ``cluster`` (the cluster's name as the prefix shows it: ``local`` for the local one),
    ``namespace``, ``object_name``, ``request`` (``namespace/name``), ``reconcile_id``
    (see [`current_reconcile_id`][mcruntime.reconcile.current_reconcile_id]) and, run by
    a controller, ``controller``. Outside a reconcile the message is left as it is. The
    request is read when a line is logged, so one module-level logger serves every
    worker thread and ``async def`` reconciler.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return self._prefixed(msg, kwargs, formatted=False)

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        """As ``LoggerAdapter.log`` (``info``, ``error``... call it), with the prefix escaped
        for ``%``-formatting when the line has arguments: a cluster name is anything a
        provider accepts (``team-100%-prod``), and pasted into the format string it would
        lose the line (``--- Logging error ---``) or shift its arguments."""
        if not self.isEnabledFor(level):
            return
        msg, fields = self._prefixed(msg, kwargs, formatted=bool(args))
        # the caller's file and line, not this method's (LoggerAdapter's own are skipped)
        fields["stacklevel"] = fields.get("stacklevel", 1) + 1
        self.logger.log(level, msg, *args, **fields)

    def _prefixed(
        self, msg: Any, kwargs: MutableMapping[str, Any], *, formatted: bool
    ) -> tuple[Any, MutableMapping[str, Any]]:
        run = _current.get()
        if run is None:
            return msg, kwargs
        req = run.request
        extra = log_fields(
            cluster=req.cluster_name,
            controller=run.controller or None,
            namespace=req.namespace,
            name=req.name,
            reconcile_id=run.reconcile_id,
        )
        kwargs["extra"] = {**extra, **(kwargs.get("extra") or {})}
        prefix = f"cluster={display_name(req.cluster_name)} request={req.key}: "
        if formatted:
            prefix = prefix.replace("%", "%%")
        return f"{prefix}{msg}", kwargs


def request_logger(logger: logging.Logger | str) -> RequestLogger:
    """A [`RequestLogger`][mcruntime.reconcile.RequestLogger] over ``logger`` (a logger, or
    the name of one): ``log = request_logger(__name__)`` at module level, then
    ``log.info("reserved %d", n)`` in the reconciler logs
    ``cluster=eu-1 request=default/team-a: reserved 10``."""
    if isinstance(logger, str):
        logger = logging.getLogger(logger)
    return RequestLogger(logger)


class _Reconciling(ContextDecorator, AbstractContextManager[Request]):
    """The block of one [`reconciling()`][mcruntime.reconcile.reconciling]: a ``with`` block
    enters it once; as a decorator, each call gets a fresh one (and a new id, unless one
    was given)."""

    def __init__(self, request: Request, controller: str, reconcile_id: str | None) -> None:
        self._request = request
        self._controller = controller
        self._reconcile_id = reconcile_id
        self._token: Token[_Reconcile | None] | None = None

    def _recreate_cm(self) -> _Reconciling:
        return _Reconciling(self._request, self._controller, self._reconcile_id)

    def __enter__(self) -> Request:
        rid = self._reconcile_id if self._reconcile_id is not None else new_reconcile_id()
        self._token = _current.set(_Reconcile(self._request, self._controller, rid))
        return self._request

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)


def reconciling(
    request: Request, *, controller: str = "", reconcile_id: str | None = None
) -> AbstractContextManager[Request]:
    """Make ``request`` the [`current_request`][mcruntime.reconcile.current_request] inside the block.

    Controllers wrap every reconcile in it, naming themselves (``controller``) and
    the reconcile's id (see [`current_reconcile_id`][mcruntime.reconcile.current_reconcile_id]);
    without ``reconcile_id`` the block gets a new one. Tests calling a reconciler
    directly may wrap it too. A plain class, not a generator: it is entered once per
    reconcile.
    """
    return _Reconciling(request, controller, reconcile_id)


publish(__name__, globals(), __all__)
