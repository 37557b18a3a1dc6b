"""Sources feed events into a controller: a kind in one cluster's cache, or a channel fed by code.

A source is a cluster-independent description; a controller starts it once
per engaged cluster (``start(cluster_name, cluster, queue)``) and stops that
copy when the cluster's engagement ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcruntime._callables import refuse_coroutine_function
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.client import kind_of
from mcruntime.event import CreateEvent, DeleteEvent, Event, GenericEvent, UpdateEvent, meta
from mcruntime.handler import (
    EnqueueRequestForOwner,
    EventHandler,
    RequestQueue,
    dispatch,
    enqueue_request_for_object,
)
from mcruntime.predicate import Predicate
from mcruntime.reconcile import Request
from mcruntime.workqueue import LOW_PRIORITY

if TYPE_CHECKING:
    from mcruntime.cache import Informer
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster

__all__ = ["Source", "SourceHandle", "Kind", "Channel", "Engagements"]

log = logging.getLogger("mcruntime.source")

ClusterFilter = Callable[[str], bool]

_EVENTS = ("create", "update", "delete", "generic")


def _checked_predicates(predicates: Sequence[Predicate]) -> tuple[Predicate, ...]:
    """``predicates``, each checked when the controller is built: a class (``GenerationChanged``
    for ``GenerationChanged()``), a plain function or an ``async def`` method would fail at
    every event, on the informer's thread, and nothing would be reconciled."""
    for p in predicates:
        name = getattr(p, "__qualname__", None) or repr(p)
        if isinstance(p, type):
            raise TypeError(f"predicate {name} is a class: pass an instance, {name}()")
        missing = [e for e in _EVENTS if not callable(getattr(p, e, None))]
        if missing:
            hint = (
                ": wrap a function of the object in mcruntime.predicate.from_func(fn), or of the "
                "events in mcruntime.predicate.Funcs(create=..., update=...)"
                if callable(p)
                else ""
            )
            raise TypeError(
                f"predicate {name} is not a Predicate (it has no {', '.join(missing)} method){hint}"
            )
        for e in _EVENTS:
            refuse_coroutine_function(
                getattr(p, e),
                f"the {e} method of predicate",
                "a predicate runs where events are delivered and must answer at once",
            )
    return tuple(predicates)


class SourceHandle(Protocol):
    """One started copy of a source, for one cluster."""

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until the source has delivered its initial state (or timeout): True if synced."""
        ...

    def stop(self) -> None:
        """Stop delivering events; after it returns no more events reach the queue."""
        ...


class Source(Protocol):
    """Something that delivers events for one cluster to a queue.

    ``start`` must not block; ``informers`` names what must be synced before
    handlers are attached, so an engagement can wait for caches first.
    """

    def start(
        self, cluster_name: str, cluster: Cluster | None, queue: RequestQueue, /
    ) -> SourceHandle: ...

    def informers(self, cluster: Cluster | None, /) -> Sequence[Informer]: ...

    def accepts(self, cluster_name: str, /) -> bool: ...


def _passes(predicates: Sequence[Predicate], event: Event) -> bool:
    for p in predicates:
        if isinstance(event, UpdateEvent):
            ok = p.update(event)
        elif isinstance(event, CreateEvent):
            ok = p.create(event)
        elif isinstance(event, DeleteEvent):
            ok = p.delete(event)
        else:
            ok = p.generic(event)
        if not ok:
            return False
    return True


class _LowPriority:
    """``queue``, adding at `LOW_PRIORITY` unless a priority is given: what a handler is
    handed for an object of an initial list and for a resync (controller-runtime's
    ``WithLowPriorityWhenUnchanged``), so a change made now goes before them."""

    __slots__ = ("queue",)

    def __init__(self, queue: RequestQueue) -> None:
        self.queue = queue

    def add(self, item: Request, *, priority: int | None = None) -> None:
        self.queue.add(item, priority=LOW_PRIORITY if priority is None else priority)

    def add_after(self, item: Request, seconds: float, *, priority: int | None = None) -> None:
        self.queue.add_after(item, seconds, priority=LOW_PRIORITY if priority is None else priority)

    def add_rate_limited(self, item: Request, *, priority: int | None = None) -> None:
        self.queue.add_rate_limited(item, priority=LOW_PRIORITY if priority is None else priority)


class _Adapter:
    """Informer callbacks -> cluster-stamped events -> predicates -> handler -> queue.

    The handler of an object of the initial list (or a replay) and of a resync (an
    update whose resourceVersion did not change) is handed the queue at `LOW_PRIORITY`.
    """

    __slots__ = ("cluster_name", "handler", "predicates", "queue", "low", "stopped", "source")

    def __init__(
        self,
        cluster_name: str,
        handler: EventHandler,
        predicates: Sequence[Predicate],
        queue: RequestQueue,
        source: object = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.handler = handler
        self.predicates = predicates
        self.queue = queue
        self.low = _LowPriority(queue)
        self.stopped = False
        self.source = source

    def __repr__(self) -> str:
        """What the informer's log names when a predicate or the handler raised: the
        controller (its queue is named after it), the source, the predicates, the handler."""
        controller = getattr(self.queue, "name", None)
        who = f"controller {controller!r}" if controller else "a controller"
        source = "" if self.source is None else f" source {self.source!r}"
        predicates = ", ".join(map(repr, self.predicates)) or "none"
        return (
            f"<{who}{source}: predicates {predicates}; handler {type(self.handler).__qualname__}>"
        )

    def _deliver(self, event: Event) -> None:
        if self.stopped:
            return
        if self.predicates and not _passes(self.predicates, event):
            return
        dispatch(self.handler, event, self.queue)

    # The informer callbacks know the event type: they call the matching predicate and
    # handler methods directly (as _deliver would, without its isinstance dispatch).

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        if self.stopped:
            return
        event = CreateEvent(obj, self.cluster_name, is_initial_list)
        for p in self.predicates:
            if not p.create(event):
                return
        self.handler.create(event, self.low if is_initial_list else self.queue)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self.stopped:
            return
        event = UpdateEvent(old, new, self.cluster_name)
        for p in self.predicates:
            if not p.update(event):
                return
        resync = meta(old).get("resourceVersion") == meta(new).get("resourceVersion")
        self.handler.update(event, self.low if resync else self.queue)

    def on_delete(self, obj: dict[str, Any], delete_state_unknown: bool = False) -> None:
        if self.stopped:
            return
        event = DeleteEvent(obj, self.cluster_name, delete_state_unknown)
        for p in self.predicates:
            if not p.delete(event):
                return
        self.handler.delete(event, self.queue)


class _KindHandle:
    def __init__(self, informer: Informer, adapter: _Adapter) -> None:
        self.informer = informer
        self.adapter = adapter
        self.registration = informer.add_event_handler(adapter)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.informer.wait_for_sync(timeout)

    def stop(self) -> None:
        self.adapter.stopped = True
        self.registration.remove()


class Kind:
    """Watches ``kind`` in each engaged cluster's cache and maps its events with ``handler``.

    ``cluster_filter`` restricts which clusters this source runs in (for
    example ``lambda name: name == ""`` for the local cluster only).
    ``metadata_only`` watches the kind's metadata-only informer: events carry
    objects' metadata alone (controller-runtime's ``builder.OnlyMetadata``).
    """

    def __init__(
        self,
        kind: KindLike,
        handler: EventHandler | None = None,
        predicates: Sequence[Predicate] = (),
        *,
        cluster_filter: ClusterFilter | None = None,
        metadata_only: bool = False,
    ) -> None:
        kind_of(kind)  # a malformed kind fails here, when the controller is built
        self.kind = kind
        self.handler = handler or enqueue_request_for_object()
        self.predicates = _checked_predicates(predicates)
        self.cluster_filter = cluster_filter
        self.metadata_only = metadata_only

    def accepts(self, cluster_name: str) -> bool:
        return self.cluster_filter is None or self.cluster_filter(cluster_name)

    def informers(self, cluster: Cluster | None) -> Sequence[Informer]:
        if cluster is None:
            raise ValueError(f"source for kind {self.kind!r} needs a cluster")
        return [cluster.cache.get_informer(self.kind, metadata_only=self.metadata_only)]

    def start(
        self, cluster_name: str, cluster: Cluster | None, queue: RequestQueue
    ) -> SourceHandle:
        (informer,) = self.informers(cluster)
        handler = self.handler
        if isinstance(handler, EnqueueRequestForOwner) and cluster is not None:
            handler = handler.for_mapper(cluster.rest_mapper)
        return _KindHandle(
            informer, _Adapter(cluster_name, handler, self.predicates, queue, source=self)
        )

    def __repr__(self) -> str:
        return f"Kind({self.kind!r}{', metadata_only=True' if self.metadata_only else ''})"


class _ChannelHandle:
    def __init__(self, channel: Channel, cluster_name: str, adapter: _Adapter) -> None:
        self.channel, self.cluster_name, self.adapter = channel, cluster_name, adapter

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return True

    def stop(self) -> None:
        self.adapter.stopped = True
        self.channel._remove(self.cluster_name, self.adapter)


class _CodeSource:
    """What the sources fed from code share: a handler, predicates, a cluster filter, no informers."""

    def __init__(
        self,
        handler: EventHandler | None = None,
        predicates: Sequence[Predicate] = (),
        *,
        cluster_filter: ClusterFilter | None = None,
    ) -> None:
        self.handler = handler or enqueue_request_for_object()
        self.predicates = _checked_predicates(predicates)
        self.cluster_filter = cluster_filter

    def accepts(self, cluster_name: str) -> bool:
        return self.cluster_filter is None or self.cluster_filter(cluster_name)

    def informers(self, cluster: Cluster | None) -> Sequence[Informer]:
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _adapter(self, cluster_name: str, queue: RequestQueue) -> _Adapter:
        return _Adapter(cluster_name, self.handler, self.predicates, queue, source=self)


class Channel(_CodeSource):
    """A source fed from code: [`send()`][mcruntime.source.Channel.send] delivers a [`GenericEvent`][mcruntime.source.GenericEvent].

    Events go to the controllers that engaged the event's cluster; an event for
    a cluster no controller engaged is dropped (logged at debug level).
    """

    def __init__(
        self,
        handler: EventHandler | None = None,
        predicates: Sequence[Predicate] = (),
        *,
        cluster_filter: ClusterFilter | None = None,
    ) -> None:
        super().__init__(handler, predicates, cluster_filter=cluster_filter)
        self._lock = threading.Lock()
        self._adapters: dict[str, list[_Adapter]] = {}

    def start(
        self, cluster_name: str, cluster: Cluster | None, queue: RequestQueue
    ) -> SourceHandle:
        adapter = self._adapter(cluster_name, queue)
        with self._lock:
            self._adapters.setdefault(cluster_name, []).append(adapter)
        return _ChannelHandle(self, cluster_name, adapter)

    def _remove(self, cluster_name: str, adapter: _Adapter) -> None:
        with self._lock:
            adapters = self._adapters.get(cluster_name, [])
            if adapter in adapters:
                adapters.remove(adapter)
            if not adapters:
                self._adapters.pop(cluster_name, None)

    def send(self, obj: dict[str, Any], cluster_name: str = "") -> None:
        """Deliver ``obj`` as a generic event from ``cluster_name``."""
        with self._lock:
            adapters = list(self._adapters.get(cluster_name, ()))
        if not adapters:
            log.debug("channel event for unengaged cluster %r dropped", display_name(cluster_name))
        for adapter in adapters:
            adapter._deliver(GenericEvent(obj, cluster_name))


class _EngagementHandle:
    """Delivers the leave event when the controller stops this cluster's copy of the source."""

    def __init__(self, adapter: _Adapter, leaves: bool) -> None:
        self.adapter = adapter
        self.leaves = leaves

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return True

    def stop(self) -> None:
        if self.leaves and not self.adapter.stopped:
            name = self.adapter.cluster_name
            _deliver_engagement(self.adapter, DeleteEvent({"metadata": {"name": name}}, name))
        self.adapter.stopped = True


def _deliver_engagement(adapter: _Adapter, event: Event) -> None:
    """Deliver an `Engagements` event; what its predicates or handler raise is logged, with the
    traceback, and goes no further: it is delivered while the cluster is engaged or let go
    of, which must go on for the controller's other sources (as an informer's events do)."""
    try:
        adapter._deliver(event)
    except Exception:
        what = "leave" if isinstance(event, DeleteEvent) else "join"
        log.exception(
            "cluster=%s %r: a predicate or the handler failed for the cluster's %s event",
            display_name(adapter.cluster_name),
            adapter,
            what,
            extra=log_fields(cluster=adapter.cluster_name),
        )


class Engagements(_CodeSource):
    """Tells a controller of clusters joining and leaving it.

    On engagement: one [`GenericEvent`][mcruntime.event.GenericEvent]; when the
    engagement ends (the provider dropped the cluster): one
    [`DeleteEvent`][mcruntime.event.DeleteEvent]. The event's object is
    ``{"metadata": {"name": <cluster>}}`` and its ``cluster_name`` the cluster.

    With a map-func handler (``cross_cluster=True``) a controller reacts to
    both: a hub-to-spoke syncer enqueues its local sources to copy them into
    a new cluster, which has no events of its own yet; a hub controller with a
    status roll-up re-reconciles when a member leaves, without polling.
    Requests mapped to the leaving cluster itself are dropped with its queue;
    requests mapped to another cluster (the hub) run. A controller that stops
    (with its manager) sends no leave events. ``leaves=False`` turns them off.
    """

    def __init__(
        self,
        handler: EventHandler | None = None,
        predicates: Sequence[Predicate] = (),
        *,
        cluster_filter: ClusterFilter | None = None,
        leaves: bool = True,
    ) -> None:
        super().__init__(handler, predicates, cluster_filter=cluster_filter)
        self.leaves = leaves

    def start(
        self, cluster_name: str, cluster: Cluster | None, queue: RequestQueue
    ) -> SourceHandle:
        adapter = self._adapter(cluster_name, queue)
        _deliver_engagement(
            adapter, GenericEvent({"metadata": {"name": cluster_name}}, cluster_name)
        )
        return _EngagementHandle(adapter, self.leaves)
