"""Event handlers turn events into reconcile requests, stamped with the event's cluster name."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from mcruntime._callables import one_argument_mismatch, refuse_coroutine_function, takes_go_ctx
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._ownership import owner_record
from mcruntime._threads import interrupted
from mcruntime.cache import object_key
from mcruntime.event import CreateEvent, DeleteEvent, Event, GenericEvent, UpdateEvent, meta
from mcruntime.reconcile import Request

if TYPE_CHECKING:
    from mcruntime.client import KindLike, RESTMapper

__all__ = [
    "EventHandler",
    "RequestQueue",
    "Funcs",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestForCrossClusterOwner",
    "EnqueueRequestsFromMapFunc",
    "enqueue_request_for_object",
    "enqueue_request_for_owner",
    "enqueue_request_for_cross_cluster_owner",
    "enqueue_requests_from_map_func",
]

log = logging.getLogger("mcruntime.handler")

MapResult = Iterable["Request | tuple[str, str]"]
MapFunc = Callable[[dict[str, Any]], MapResult]


class RequestQueue(Protocol):
    """The part of a controller's work queue a handler may use.

    ``priority`` None is the queue's default for the event at hand:
    [`LOW_PRIORITY`][mcruntime.workqueue.LOW_PRIORITY] for an object of an initial list and for a resync, 0
    otherwise (see [`Queue`][mcruntime.workqueue.Queue]).
    """

    def add(self, item: Request, /, *, priority: int | None = None) -> None: ...

    def add_after(
        self, item: Request, seconds: float, /, *, priority: int | None = None
    ) -> None: ...

    def add_rate_limited(self, item: Request, /, *, priority: int | None = None) -> None: ...


class EventHandler:
    """Maps events to requests on ``queue``. The base class enqueues nothing.

    Handlers run on an informer's thread (a list) or on the thread every watch
    shares (watch events): they must not block (read the cache, enqueue and
    return); a blocked handler delays every cluster's events.
    """

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        pass

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        pass

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        pass

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        pass


class Funcs(EventHandler):
    """A handler from functions ``fn(event, queue)``; missing ones do nothing.

    A [`Request`][mcruntime.handler.Request] a function adds without a cluster name
    (``Request(namespace, name)``) is for the event's cluster, as multicluster-runtime's
    lifted handlers and map functions stamp it; one that names a cluster keeps it. With
    ``cross_cluster=True`` every Request is used as it is, so ``""`` is the local cluster.
    """

    def __init__(
        self,
        create: Callable[[CreateEvent, RequestQueue], None] | None = None,
        update: Callable[[UpdateEvent, RequestQueue], None] | None = None,
        delete: Callable[[DeleteEvent, RequestQueue], None] | None = None,
        generic: Callable[[GenericEvent, RequestQueue], None] | None = None,
        *,
        cross_cluster: bool = False,
    ) -> None:
        self._create, self._update, self._delete, self._generic = create, update, delete, generic
        self.cross_cluster = cross_cluster

    def _queue(self, cluster_name: str, queue: RequestQueue) -> RequestQueue:
        if self.cross_cluster or not cluster_name:
            return queue
        return _ClusterQueue(queue, cluster_name)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        if self._create:
            self._create(event, self._queue(event.cluster_name, queue))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self._update:
            self._update(event, self._queue(event.cluster_name, queue))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        if self._delete:
            self._delete(event, self._queue(event.cluster_name, queue))

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        if self._generic:
            self._generic(event, self._queue(event.cluster_name, queue))


class _ClusterQueue:
    """``queue``, stamping the Requests added without a cluster name with ``cluster_name``."""

    def __init__(self, queue: RequestQueue, cluster_name: str) -> None:
        self._queue, self._cluster_name = queue, cluster_name

    def _stamped(self, item: Request) -> Request:
        if item.cluster_name:
            return item
        return Request(item.namespace, item.name, self._cluster_name)

    def add(self, item: Request, *, priority: int | None = None) -> None:
        self._queue.add(self._stamped(item), priority=priority)

    def add_after(self, item: Request, seconds: float, *, priority: int | None = None) -> None:
        self._queue.add_after(self._stamped(item), seconds, priority=priority)

    def add_rate_limited(self, item: Request, *, priority: int | None = None) -> None:
        self._queue.add_rate_limited(self._stamped(item), priority=priority)


def _request_for(obj: dict[str, Any], cluster_name: str) -> Request | None:
    m = obj.get("metadata")  # meta(), inlined: once per event
    if not isinstance(m, dict):
        return None
    name = m.get("name")
    if not name:
        return None
    return Request(m.get("namespace") or "", name, cluster_name)


class _PerObject(EventHandler):
    """Applies one mapping to the object(s) of every event; updates map old and new."""

    def _enqueue(self, obj: dict[str, Any], cluster_name: str, queue: RequestQueue) -> None:
        raise NotImplementedError

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._enqueue(event.object, event.cluster_name, queue)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self._enqueue(event.object_old, event.cluster_name, queue)
        self._enqueue(event.object_new, event.cluster_name, queue)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._enqueue(event.object, event.cluster_name, queue)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._enqueue(event.object, event.cluster_name, queue)


class EnqueueRequestForObject(_PerObject):
    """Enqueues the event's own object, in the event's cluster."""

    def _enqueue(self, obj: dict[str, Any], cluster_name: str, queue: RequestQueue) -> None:
        if (req := _request_for(obj, cluster_name)) is not None:
            queue.add(req)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        # old and new name the same object: one request is enough.
        self._enqueue(event.object_new, event.cluster_name, queue)


class EnqueueRequestForOwner(_PerObject):
    """Enqueues the owner of the event's object, named by its ownerReferences.

    ``owner_kind`` is matched on group and kind (any version). With
    ``only_controller`` (the default) only the reference with ``controller: true``
    counts, as ``Owns()`` does in controller-runtime.
    """

    def __init__(
        self,
        owner_kind: KindLike,
        *,
        only_controller: bool = True,
        mapper: RESTMapper | None = None,
    ) -> None:
        from mcruntime.client import kind_of

        self.gvk = kind_of(owner_kind)
        self.group, self.kind = self.gvk.group, self.gvk.kind
        self.only_controller = only_controller
        self._mapper = mapper
        self._owner_namespaced: bool | None = None

    def for_mapper(self, mapper: RESTMapper) -> EnqueueRequestForOwner:
        """A copy that learns from ``mapper`` (a cluster's RESTMapper) whether owners are namespaced.

        Sources call it per cluster, so a cluster-scoped owner is enqueued
        without a namespace, the same request its own events make.
        """
        return EnqueueRequestForOwner(self.gvk, only_controller=self.only_controller, mapper=mapper)

    def _namespace_of_owner(self, dependent_namespace: str) -> str:
        if not dependent_namespace or self._mapper is None:
            return dependent_namespace
        if self._owner_namespaced is None:
            try:
                self._owner_namespaced = bool(self._mapper.mapping(self.gvk).namespaced)
            except Exception as exc:
                log.debug(
                    "scope of owner kind %s unknown (%s); using the dependent's namespace",
                    self.gvk,
                    exc,
                )
                return dependent_namespace
        return dependent_namespace if self._owner_namespaced else ""

    def _enqueue(self, obj: dict[str, Any], cluster_name: str, queue: RequestQueue) -> None:
        m = meta(obj)
        for ref in m.get("ownerReferences") or ():
            if self.only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != self.kind:
                continue
            api_version = ref.get("apiVersion", "")
            group = api_version.rpartition("/")[0]
            if group != self.group:
                continue
            # a namespaced owner shares its dependent's namespace; a cluster-scoped one has none
            queue.add(
                Request(
                    self._namespace_of_owner(m.get("namespace") or ""), ref["name"], cluster_name
                )
            )


class EnqueueRequestForCrossClusterOwner(_PerObject):
    """Enqueues the owner recorded on the event's object by
    [`set_cross_cluster_owner`][mcruntime.controllerutil.set_cross_cluster_owner],
    in the owner's cluster (the request carries the owner's cluster name, not the event's).

    ``owner_kind`` is matched on group and kind (any version). With
    ``only_controller`` (the default) only a record with ``controller: true`` counts.
    Objects without a record, or with a malformed one, enqueue nothing.
    """

    def __init__(self, owner_kind: KindLike, *, only_controller: bool = True) -> None:
        from mcruntime.client import kind_of

        self.gvk = kind_of(owner_kind)
        self.only_controller = only_controller

    def _enqueue(self, obj: dict[str, Any], cluster_name: str, queue: RequestQueue) -> None:
        rec = owner_record(obj)
        if rec is None or rec.kind != self.gvk.kind or rec.group != self.gvk.group:
            return
        if self.only_controller and not rec.controller:
            return
        queue.add(Request(rec.namespace, rec.name, rec.cluster))


class EnqueueRequestsFromMapFunc(_PerObject):
    """Enqueues what ``fn(object)`` returns: [`Request`][mcruntime.handler.Request] objects or ``(namespace, name)`` pairs.

    By default every result is stamped with the event's cluster. With
    ``cross_cluster=True`` returned Requests are used as they are, so a map
    function may name any cluster (``""`` is the local one); pairs still get the
    event's cluster. ``fn`` runs where handlers run and must not block either:
    read the cache, not the API server.
    """

    def __init__(self, fn: MapFunc, *, cross_cluster: bool = False) -> None:
        _check_map_func(fn)
        self.fn = fn
        self.cross_cluster = cross_cluster

    def _enqueue(self, obj: dict[str, Any], cluster_name: str, queue: RequestQueue) -> None:
        try:
            results = self.fn(obj) or ()
        except BaseException as exc:  # sys.exit() in it too: this event fails, not the watches
            if interrupted(exc):
                raise
            log.exception(
                "cluster=%s map function %r failed for %s",
                display_name(cluster_name),
                self.fn,
                object_key(obj),
                extra=log_fields(cluster=cluster_name),
            )
            return
        for item in results:
            if isinstance(item, Request):
                if not self.cross_cluster and item.cluster_name != cluster_name:
                    item = Request(item.namespace, item.name, cluster_name)
                queue.add(item)
            else:
                namespace, name = item
                queue.add(Request(namespace or "", name, cluster_name))


def _check_map_func(fn: Any) -> None:
    """Refuse, when the handler is made, a map function every event would fail in."""
    if not callable(fn):
        raise TypeError(f"the map function {fn!r} is not callable")
    refuse_coroutine_function(
        fn,
        "the map function",
        "it runs where events are delivered and must not block: pass a plain function "
        "returning the requests, reading the cache",
    )
    signature = one_argument_mismatch(fn)
    if signature is not None:
        raise TypeError(
            f"the map function {fn!r} cannot be called with the object alone: its parameters "
            f"are {signature}"
            + (
                " (Go's ctx has no counterpart: take the object only)"
                if takes_go_ctx(signature)
                else ""
            )
        )


def enqueue_request_for_object() -> EventHandler:
    """Handler enqueuing the event's object itself (what ``for_`` uses)."""
    return EnqueueRequestForObject()


def enqueue_request_for_owner(
    owner_kind: KindLike, *, only_controller: bool = True
) -> EventHandler:
    """Handler enqueuing the controlling owner of the event's object (what ``owns`` uses)."""
    return EnqueueRequestForOwner(owner_kind, only_controller=only_controller)


def enqueue_request_for_cross_cluster_owner(
    owner_kind: KindLike, *, only_controller: bool = True
) -> EventHandler:
    """Handler enqueuing the cross-cluster owner of the event's object, in the owner's cluster.

    Watch dependents in any cluster with it, and a change or deletion of a
    dependent in cluster B enqueues its owner's request in cluster A.
    """
    return EnqueueRequestForCrossClusterOwner(owner_kind, only_controller=only_controller)


def enqueue_requests_from_map_func(fn: MapFunc, *, cross_cluster: bool = False) -> EventHandler:
    """Handler enqueuing whatever ``fn(object)`` maps an event's object to.

    ``fn`` runs on the thread that delivers every watch event of the process, for
    every cluster and every manager: while it runs, no other event is delivered. It
    must answer at once: read the object and the cache of kinds the controller
    watches, and return the requests; never call an API server (``uncached_client``,
    ``api_reader``) or another system, never wait. Work that needs such calls
    belongs in the reconcile the returned request starts. See
    [`EnqueueRequestsFromMapFunc`][mcruntime.handler.EnqueueRequestsFromMapFunc]
    for ``cross_cluster``.
    """
    return EnqueueRequestsFromMapFunc(fn, cross_cluster=cross_cluster)


def dispatch(handler: EventHandler, event: Event, queue: RequestQueue) -> None:
    """Call the handler method matching the event's type."""
    if isinstance(event, UpdateEvent):
        handler.update(event, queue)
    elif isinstance(event, CreateEvent):
        handler.create(event, queue)
    elif isinstance(event, DeleteEvent):
        handler.delete(event, queue)
    else:
        handler.generic(event, queue)
