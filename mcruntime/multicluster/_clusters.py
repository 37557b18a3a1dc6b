from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from mcruntime._lifetime import Lifetime
from mcruntime._local import check_cluster_name
from mcruntime._logfields import log_fields
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import on_watch_thread
from mcruntime.errors import ClusterNotFound
from mcruntime.multicluster._types import Aware, IndexFunc

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster

log = logging.getLogger("mcruntime.multicluster")

#: how long a provider's stop waits for the clusters it removed from a watch's handler to end
#: (each cluster's stop is bounded: its informers' joins, its calls cut)
_END_TIMEOUT = 30.0


@dataclass
class _Entry:
    cluster: Cluster
    lifetime: Lifetime


class Clusters:
    """A thread-safe set of named clusters, engaged with an [`Aware`][mcruntime.multicluster.Aware] while started.

    The building block of providers: discovery code calls [`add()`][mcruntime.multicluster.Clusters.add] and
    [`remove()`][mcruntime.multicluster.Clusters.remove]; this class keeps lifetimes, field indexes and engagement
    right. Adding a name again with another cluster replaces (re-engages) it, unless only
    its credentials changed: those the engaged cluster takes in place.
    It satisfies both [`Provider`][mcruntime.multicluster.Provider] and [`ProviderRunnable`][mcruntime.multicluster.ProviderRunnable].

    `wait_for_initial_clusters` tells the manager when the clusters known at
    start have been engaged: at once for clusters added before `start`; a
    subclass that discovers its first clusters in `run` sets
    ``reports_initial_clusters = True`` and calls `initial_clusters_reported`
    after its first discovery pass, and sets `discovery_error` while discovery
    fails, which the manager names when the initial clusters are late.
    """

    #: True when `run` calls `initial_clusters_reported` after its first discovery pass
    reports_initial_clusters: ClassVar[bool] = False

    def __init__(self, name: str = "clusters") -> None:
        self.provider_name = name
        #: why discovery fails, while it does (None when it works or nothing is known): a
        #: sanitised reason that names no token, kubeconfig content or URL credentials
        self.discovery_error: str | None = None
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._indexes: list[tuple[Any, str, IndexFunc]] = []
        self._aware: Aware | None = None
        self._initial = threading.Event()
        #: how many clusters the last `stop` removed (None: never stopped)
        self._removed_at_stop: int | None = None
        #: the threads ending clusters removed (or replaced) from a watch's handler
        self._ending: set[threading.Thread] = set()

    def add(self, name: str, cluster: Cluster) -> None:
        """Add (or replace) cluster ``name``; engages it at once when started.

        A cluster added again whose configuration differs from the one engaged only in its
        credentials (its kubeconfig's token, client certificate, exec plugin... were
        rotated) is not engaged again: the engaged cluster takes them in place (see
        [`Cluster.update_credentials()`][mcruntime.cluster.Cluster.update_credentials]),
        nothing is listed or reconciled again, and the `Cluster` given is stopped, unused.

        Raises `ValueError`, and keeps nothing, for a name that is no cluster name (the
        empty name is the local cluster's; a name with control characters would forge log
        lines), for a `Cluster` stopped already (removed before, say: it cannot start
        again; add its `clone()`), and when the manager refuses to engage it.
        """
        check_cluster_name(name)
        if cluster.stopped:
            raise ValueError(
                f"cluster {name!r} cannot be added: its Cluster was stopped (it was removed, "
                "or its manager stopped) and cannot start again; add cluster.clone()"
            )
        with self._lock:
            old = self._entries.get(name)
            if old is not None and old.cluster is cluster:
                return
            if old is not None and old.cluster.update_credentials(cluster):
                # its kubeconfig changed in its credentials only (rotated): the cluster engaged
                # sends them from now on, and goes on; the one given is not needed
                cluster.stop()
                return
            entry = _Entry(cluster, Lifetime())
            self._entries[name] = entry
            aware = self._aware
            indexes = list(self._indexes)
        # outside the lock: registering an index may ask the cluster's discovery
        for kind, field, fn in indexes:
            self._index(name, cluster, kind, field, fn)
        if old is not None:
            self._end(name, old)
        if old is None:
            log.info(
                "provider=%s cluster=%s added",
                self.provider_name,
                name,
                extra=log_fields(provider=self.provider_name, cluster=name),
            )
        else:
            log.info(
                "provider=%s cluster=%s replaced: engaging it again",
                self.provider_name,
                name,
                extra=log_fields(provider=self.provider_name, cluster=name),
            )
        if aware is not None:
            try:
                aware.engage(name, cluster, entry.lifetime)
            except BaseException as exc:
                # refused: nothing of it stays here (listed, returned by get(), removed at
                # stop); the cluster stays the caller's, not stopped
                with self._lock:
                    if self._entries.get(name) is entry:
                        del self._entries[name]
                entry.lifetime.set()
                log.warning(
                    "provider=%s cluster=%s not added: engaging it failed: %s",
                    self.provider_name,
                    name,
                    exc,
                    extra=log_fields(provider=self.provider_name, cluster=name),
                )
                raise

    def remove(self, name: str, *, wait: float = 0.0) -> bool:
        """Remove cluster ``name`` and end its engagement; False if it was not there.

        With ``wait``, return once the work that still needs the cluster after it left
        (the removal of the webhook configurations installed in it) is over, or after
        ``wait`` seconds, saying what still runs: for a provider about to delete the
        cluster itself, which that work would then find gone.

        Called from an informer's event handler (on the thread that reads every watch of
        the process), the cluster is stopped on a thread of its own, and this returns
        before it is: its watches are read by that very thread.
        """
        with self._lock:
            entry = self._entries.pop(name, None)
        if entry is None:
            return False
        log.info(
            "provider=%s cluster=%s removed",
            self.provider_name,
            name,
            extra=log_fields(provider=self.provider_name, cluster=name),
        )
        self._end(name, entry)
        if wait > 0:
            left = entry.lifetime.wait_released(wait)
            if left:
                log.warning(
                    "provider=%s cluster=%s removed, and after %gs still needed by: %s",
                    self.provider_name,
                    name,
                    wait,
                    "; ".join(left),
                    extra=log_fields(provider=self.provider_name, cluster=name),
                )
        return True

    def _end(self, name: str, entry: _Entry) -> None:
        if on_watch_thread():
            # called from a provider's informer handler, on the thread that reads every
            # watch: the cluster's own watches end only once this thread reads on, so its
            # stop would wait for itself (and hold up every cluster's events meanwhile)
            with self._lock:
                self._ending.add(
                    start_thread(
                        self._end_now,
                        thread_name("provider", self.provider_name, name, "end"),
                        name,
                        entry,
                    )
                )
            return
        self._end_now(name, entry)

    def _end_now(self, name: str, entry: _Entry) -> None:
        try:
            entry.lifetime.set()
            try:
                entry.cluster.stop()
            except Exception:
                log.exception(
                    "provider=%s cluster=%s stopping failed",
                    self.provider_name,
                    name,
                    extra=log_fields(provider=self.provider_name, cluster=name),
                )
        finally:
            with self._lock:
                self._ending.discard(threading.current_thread())

    def get(self, cluster_name: str) -> Cluster:
        with self._lock:
            entry = self._entries.get(cluster_name)
        if entry is None:
            raise ClusterNotFound(
                f"provider {self.provider_name!r} has no cluster {cluster_name!r}"
            )
        return entry.cluster

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def index_field(self, kind: KindLike, field: str, fn: IndexFunc) -> None:
        with self._lock:
            self._indexes.append((kind, field, fn))
            clusters = [(n, e.cluster) for n, e in self._entries.items()]
        for name, cluster in clusters:
            self._index(name, cluster, kind, field, fn)

    def _index(
        self, name: str, cluster: Cluster, kind: KindLike, field: str, fn: IndexFunc
    ) -> None:
        """Register one index on one cluster; a cluster that cannot take it now must not stop the others.

        Registering resolves the kind through the cluster's discovery, so an
        unreachable cluster fails here; the manager registers its indexes again
        when it engages the cluster.
        """
        try:
            cluster.cache.index_field(kind, field, fn)
        except Exception as exc:
            log.warning(
                "provider=%s cluster=%s index %r not registered yet: %s",
                self.provider_name,
                name,
                field,
                exc,
                extra=log_fields(provider=self.provider_name, cluster=name),
            )

    def start(self, aware: Aware, stop: threading.Event) -> None:
        """Engage every cluster with ``aware`` and run discovery until ``stop``; then remove them all.

        A provider serves one manager at a time: started while it runs for another (one
        provider given to two managers), it raises RuntimeError and leaves the other's
        clusters alone. Started again after a stop, it engages the clusters added since (and
        those its discovery finds): the stop removed, and stopped, those it had.
        """
        self._engage_all(aware)
        if not self.reports_initial_clusters:
            self._initial.set()
        try:
            self.run(stop)
        finally:
            self._initial.set()  # nobody waits for a provider that ended
            self.stop()

    def _engage_all(self, aware: Aware) -> None:
        """Engage the clusters added before start (in a call of its own: locals of `start`
        would keep a cluster removed later alive as long as `run`)."""
        with self._lock:
            if self._aware is not None:
                raise RuntimeError(
                    f"provider={self.provider_name} runs for another manager already: a provider "
                    "serves one manager at a time (the other's stop would remove the clusters "
                    "of both); give each manager a provider of its own"
                )
            self._aware = aware
            if self.reports_initial_clusters:
                self._initial.clear()  # (set by an earlier run: its clusters are gone)
            entries = list(self._entries.items())
            removed = self._removed_at_stop
        if removed and not entries and not self.reports_initial_clusters:
            log.warning(
                "provider=%s starts again with no cluster: the stop of the manager it ran for "
                "before removed (and stopped) the %d it had; add them again (a stopped "
                "Cluster's clone()), or give this manager a new provider",
                self.provider_name,
                removed,
                extra=log_fields(provider=self.provider_name),
            )
        for name, entry in entries:
            aware.engage(name, entry.cluster, entry.lifetime)

    def initial_clusters_reported(self) -> None:
        """Called by `run` once the clusters that exist at start have been added."""
        self._initial.set()

    def wait_for_initial_clusters(self, timeout: float | None = None) -> bool:
        """Block until the clusters known at start are engaged; False on timeout."""
        return self._initial.wait(timeout)

    def run(self, stop: threading.Event) -> None:
        """Discovery loop of a subclass: add and remove clusters until ``stop`` is set."""
        stop.wait()

    def stop(self) -> None:
        """End every engagement and forget the aware; clusters added later are only kept."""
        with self._lock:
            self._aware = None
            names = list(self._entries)
            self._removed_at_stop = len(names)
        for name in names:
            self.remove(name)
        with self._lock:
            ending = list(self._ending)
        deadline = time.monotonic() + _END_TIMEOUT
        for t in ending:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                log.warning(
                    "provider=%s: %s still ending its cluster after %gs",
                    self.provider_name,
                    t.name,
                    _END_TIMEOUT,
                    extra=log_fields(provider=self.provider_name),
                )
