"""Event recorders: post Kubernetes Events into the cluster of the object they are about.

A [`RecorderProvider`][mcruntime.recorder.RecorderProvider] (one per manager)
hands out [`EventRecorder`][mcruntime.recorder.EventRecorder]s by component
name. Posting an event resolves the object's cluster (an explicit
``cluster_name``, else the cluster of the reconcile in progress), builds a
core/v1 Event and puts it on that cluster's bounded queue: it never blocks.
One sender thread per cluster (``mcruntime/recorder/<cluster>``) correlates
the events (aggregation, deduplication, per-object rate limit, see
[`EventCorrelator`][mcruntime.recorder.EventCorrelator]) and writes them, each
call with a short deadline. Dropped events are counted in
``mcruntime_events_dropped_total{cluster,reason}``. When a cluster leaves,
[`forget_cluster`][mcruntime.recorder.RecorderProvider.forget_cluster] drops its
queue and ends its thread; a stopping manager first
[`flush`][mcruntime.recorder.RecorderProvider.flush]es the queues.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import ObjectLike, gvk_of_object, to_dict
from mcruntime.errors import (
    NAMESPACE_TERMINATING,
    AlreadyExists,
    ClusterLeft,
    ClusterNotFound,
    NotFound,
    has_status_cause,
)
from mcruntime.reconcile import current_request
from mcruntime.recorder._correlator import CorrelatorOptions, EventCorrelator

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster
    from mcruntime.metrics import Metrics

__all__ = ["EventRecorder", "RecorderProvider", "NORMAL", "WARNING"]

log = logging.getLogger("mcruntime.recorder")

NORMAL = "Normal"
WARNING = "Warning"

#: events queued per cluster before new ones are dropped
DEFAULT_QUEUE_SIZE = 1000
#: deadline of each API call the sender makes, seconds
DEFAULT_SEND_TIMEOUT = 5.0

_MERGE_PATCH = "application/merge-patch+json"
#: what a sender's failure streak is about
_WRITING = "writing events"
#: what the streak of a cluster's full queue is about
_QUEUEING = "queueing events"


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Sink:
    """The queue and sender thread of one cluster."""

    def __init__(self, provider: RecorderProvider, name: str, cluster: Cluster) -> None:
        self.provider = provider
        self.name = name
        self.cluster = cluster
        self.correlator = EventCorrelator(provider.correlator_options)
        self.queue: deque[dict[str, Any]] = deque()
        self.cond = threading.Condition()
        self.stopped = False
        #: an event is being written (taken off the queue, not done)
        self.sending = False
        #: events not written because the cluster left (its calls cut): the one being
        #: written then and those queued behind it
        self.left_behind = 0
        #: failed writes (each dropped its event) since the last one written
        self.streaks = FailureStreaks(log, "recorder")
        self.thread = start_thread(self._run, thread_name("recorder", name))

    def offer(self, event: dict[str, Any]) -> bool:
        with self.cond:
            if self.stopped:
                return False
            full = len(self.queue) >= self.provider.queue_size
            if not full:
                self.queue.append(event)
                self.cond.notify()
        if full:  # said once per streak: the events recorded outpace the cluster's writes
            self.streaks.failed(
                self.name,
                _QUEUEING,
                f"the queue is full ({self.provider.queue_size} events waiting to be written)",
                retry="new events are dropped until it has room "
                "(mcruntime_events_dropped_total counts them)",
            )
        else:
            self.streaks.recovered(self.name, _QUEUEING, detail=" (their events were dropped)")
        return not full

    def flush(self, deadline: float) -> bool:
        """Wait until every queued event is written, or until ``deadline``
        (``time.monotonic()``); not while the cluster's writes fail (each waits out its
        deadline: a hung cluster would hold the wait to the end). True when all were written."""
        with self.cond:
            while (self.queue or self.sending) and not self.stopped:
                left = deadline - time.monotonic()
                if left <= 0 or self.streaks.failures((self.name, _WRITING)):
                    return False
                self.cond.wait(left)
            return not self.queue

    def stop(self) -> None:
        """Stop sending; what is queued is dropped (counted by `unwritten`)."""
        with self.cond:
            self.stopped = True
            n = len(self.queue)
            self.left_behind += n
            self.queue.clear()
            self.cond.notify_all()
        if n:
            self.provider._dropped(self.name, "cluster_not_engaged", n)

    def unwritten(self) -> int:
        """The events dropped unwritten since the cluster left or the sender stopped."""
        with self.cond:
            return self.left_behind

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                event = self.queue.popleft()
                self.sending = True
            try:
                self._write(event)
            finally:
                with self.cond:
                    self.sending = False
                    self.cond.notify_all()

    def _write(self, event: dict[str, Any]) -> None:
        try:
            written = self._send(event)
        except ClusterLeft:  # the cluster is leaving: its calls are cut, the queued ones' too
            with self.cond:
                n = 1 + len(self.queue)
                self.queue.clear()
                self.left_behind += n
            self.provider._dropped(self.name, "cluster_not_engaged", n)
        except Exception as exc:  # a failed event is dropped, never retried behind the caller
            # an event about an object of a namespace being cleaned up: client-go's recorder
            # drops it quietly too (no fault of the cluster)
            if has_status_cause(exc, NAMESPACE_TERMINATING):
                self.provider._dropped(self.name, "namespace_terminating")
                log.debug(
                    "cluster=%s recorder: event %s/%s for %s dropped: %s",
                    display_name(self.name),
                    event.get("type"),
                    event.get("reason"),
                    (event.get("involvedObject") or {}).get("name"),
                    describe_error(exc),
                    extra=log_fields(cluster=self.name),
                )
                return
            self.provider._dropped(self.name, "error")
            self._failed(event, exc)
        else:
            if written:
                self.streaks.recovered(self.name, _WRITING, detail=" (their events were dropped)")

    def _failed(self, event: dict[str, Any], exc: Exception) -> None:
        """Log the first failure of a streak as a warning, the rest at debug level: a
        controller without the right to create Events must not flood its log."""
        self.streaks.failed(
            self.name,
            _WRITING,
            f"{describe_error(exc)} (event {event.get('type')}/{event.get('reason')} for "
            f"{(event.get('involvedObject') or {}).get('name')} dropped)",
            retry="failed events are dropped, not retried "
            "(mcruntime_events_dropped_total counts them)",
        )

    def _send(self, event: dict[str, Any]) -> bool:
        """Write ``event`` (or count it into an existing one); False when rate-limited."""
        c = self.correlator.correlate(event)
        if c.skip:
            self.provider._dropped(self.name, "rate_limited")
            return False
        rest, timeout = self.cluster.rest, self.provider.send_timeout
        ns = c.event["metadata"]["namespace"]
        if c.patch is not None:
            path = f"/api/v1/namespaces/{ns}/events/{c.event['metadata']['name']}"
            try:
                rest.request(
                    "PATCH", path, body=c.patch, content_type=_MERGE_PATCH, timeout=timeout
                )
                self.correlator.observe(c.event)
                return True
            except NotFound:  # deleted (or expired) meanwhile: start a new one
                self.correlator.forget(c.event)
                c.event = {
                    **c.event,
                    "metadata": {**c.event["metadata"], "name": event["metadata"]["name"]},
                    "count": 1,
                    "firstTimestamp": c.event.get("lastTimestamp"),
                }
        try:
            created = rest.request(
                "POST",
                f"/api/v1/namespaces/{ns}/events",
                body=c.event,
                timeout=timeout,
                expect_object=True,
            )
        except AlreadyExists:
            return True
        self.correlator.observe(created if isinstance(created, dict) else c.event)
        return True


class RecorderProvider:
    """Event recorders of one manager, and the per-cluster queues they post to.

    ``get_cluster(name)`` resolves a cluster name to a
    [`Cluster`][mcruntime.cluster.Cluster] (the manager's ``get_cluster``); it
    raises [`ClusterNotFound`][mcruntime.errors.ClusterNotFound] for clusters
    not engaged, whose events are dropped and counted.
    """

    def __init__(
        self,
        get_cluster: Callable[[str], Cluster],
        *,
        metrics: Metrics | None = None,
        host: str | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        correlator_options: CorrelatorOptions | None = None,
    ) -> None:
        self.get_cluster = get_cluster
        self.metrics = metrics
        self.host = host or socket.gethostname()
        self.queue_size = queue_size
        self.send_timeout = send_timeout
        self.correlator_options = correlator_options or CorrelatorOptions()
        self._lock = threading.Lock()
        self._sinks: dict[str, _Sink] = {}
        self._closed = False

    def get_event_recorder_for(self, name: str) -> EventRecorder:
        """A recorder whose events name ``name`` as their source component."""
        if not name:
            raise ValueError("an event recorder needs a component name")
        return EventRecorder(self, name)

    def _dropped(self, cluster: str, reason: str, n: int = 1) -> None:
        if self.metrics is not None:
            self.metrics.event_dropped(cluster, reason, n)

    def _post(self, cluster_name: str, event: dict[str, Any]) -> bool:
        try:
            cluster = self.get_cluster(cluster_name)
        except ClusterNotFound:
            self._dropped(cluster_name, "cluster_not_engaged")
            return False
        with self._lock:
            sink = self._sinks.get(cluster_name)
            if sink is not None and sink.cluster is not cluster:  # re-engaged: a new cluster
                self._sinks.pop(cluster_name).stop()
                sink = None
            if sink is None:
                if self._closed or cluster.stopped:
                    sink = None
                else:
                    sink = self._sinks[cluster_name] = _Sink(self, cluster_name, cluster)
        if sink is None or not sink.offer(event):
            self._dropped(cluster_name, "queue_full" if sink is not None else "cluster_not_engaged")
            return False
        return True

    def forget_cluster(self, cluster_name: str, timeout: float | None = None) -> None:
        """Drop ``cluster_name``'s queued events and end its sender (waits up to ``timeout``).

        One line says how many events were dropped unwritten (those queued, and those
        the cluster's leave cut). Also removes its ``mcruntime_events_dropped_total`` series.
        """
        with self._lock:
            sink = self._sinks.pop(cluster_name, None)
        if sink is not None:
            sink.stop()
            if sink.thread is not threading.current_thread():
                sink.thread.join(self.send_timeout + 1.0 if timeout is None else timeout)
            dropped = sink.unwritten()
            if dropped:
                log.info(
                    "cluster=%s %d queued events dropped",
                    display_name(cluster_name),
                    dropped,
                    extra=log_fields(cluster=cluster_name),
                )
        if self.metrics is not None:
            self.metrics.forget_events_cluster(cluster_name)

    def flush(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds (default: the send timeout) for every cluster's
        queued events to be written; not for those of a cluster whose writes fail.

        The manager calls it as it stops, before it lets its clusters go: what the last
        reconciles recorded is written, not dropped with the clusters' queues.
        """
        deadline = time.monotonic() + (self.send_timeout if timeout is None else timeout)
        with self._lock:
            sinks = list(self._sinks.values())
        for sink in sinks:
            sink.flush(deadline)

    def stop(self, timeout: float | None = None) -> None:
        """Stop every sender; later events are dropped, and so is what is still queued
        (call `flush` first to write it)."""
        with self._lock:
            self._closed = True
            names = list(self._sinks)
        deadline = time.monotonic() + (self.send_timeout + 1.0 if timeout is None else timeout)
        for name in names:
            self.forget_cluster(name, max(0.0, deadline - time.monotonic()))

    def clusters(self) -> list[str]:
        """Clusters with a sender now."""
        with self._lock:
            return sorted(self._sinks)


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__name__


class EventRecorder:
    """Posts Events about objects, in each object's own cluster, on behalf of one component.

    Thread-safe and non-blocking. ``type`` is ``"Normal"`` or ``"Warning"``;
    ``reason`` a short UpperCamelCase word; ``message`` a human-readable sentence.
    """

    def __init__(self, provider: RecorderProvider, component: str) -> None:
        self.provider = provider
        self.component = component

    def __repr__(self) -> str:
        return f"EventRecorder({self.component!r})"

    def event(
        self,
        obj: ObjectLike,
        type: str,
        reason: str,
        message: str,
        *,
        cluster_name: str | None = None,
    ) -> bool:
        """Post an Event about ``obj``; True if queued (False: dropped and counted).

        The cluster is ``cluster_name`` when given, else the cluster of the
        reconcile running in this thread or task; outside a reconcile, without
        ``cluster_name``, a ``ValueError`` says so. A ``reason`` or ``message`` that is not
        a `str` is a ``TypeError``.
        """
        if type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be 'Normal' or 'Warning', not {type!r}")
        # refused here, naming the argument: the sender thread would drop the event later
        # (its correlator keys on them), and count it as a failure of the cluster's writes
        for what, value in (("reason", reason), ("message", message)):
            if not isinstance(value, str):
                raise TypeError(f"an event's {what} must be a str, not {_type_name(value)}")
        if not reason:
            raise ValueError("an event needs a reason")
        if cluster_name is None:
            req = current_request()
            if req is None:
                raise ValueError(
                    f"which cluster is this {reason!r} event for? Outside a reconcile pass "
                    'cluster_name= ("" for the local cluster)'
                )
            cluster_name = req.cluster_name
        return self.provider._post(cluster_name, self._build(obj, type, reason, message))

    def eventf(
        self,
        obj: ObjectLike,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        cluster_name: str | None = None,
    ) -> bool:
        """[`event`][mcruntime.recorder.EventRecorder.event] with ``message = fmt % args``."""
        return self.event(obj, type, reason, fmt % args if args else fmt, cluster_name=cluster_name)

    def _build(self, obj: ObjectLike, type: str, reason: str, message: str) -> dict[str, Any]:
        data = to_dict(obj)
        meta = data.get("metadata") or {}
        gvk = gvk_of_object(obj)
        name = meta.get("name")
        if not name:
            raise ValueError(f"an event about a {gvk.kind} needs the object's metadata.name")
        ref = {
            "apiVersion": gvk.api_version,
            "kind": gvk.kind,
            "name": name,
            **{
                k: meta[k]
                for k in ("namespace", "uid", "resourceVersion")
                if meta.get(k) is not None
            },
        }
        now = _timestamp()
        host = self.provider.host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.{time.time_ns():x}",
                "namespace": meta.get("namespace") or "default",
            },
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": self.component, "host": host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": host,
        }
