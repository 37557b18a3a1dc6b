"""Helpers of the multi-cluster integration tests: polling, ConfigMaps, a recording reconciler, thread checks."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mcruntime
from mcruntime._threads import described, mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import WaitTimeout, wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import Request

CM = "v1/ConfigMap"

#: short health timings: a cluster that stops answering is noticed within about
#: INTERVAL + TIMEOUT + a scheduler tick (RETRY / 2) of its last answer
INTERVAL, TIMEOUT, RETRY = 0.5, 0.5, 0.2
#: well before the calls' 30 s deadline: the health check's bound, and room for a loaded machine
NOTICED = INTERVAL + TIMEOUT + RETRY + 3.0


def fast_health(**options: Any) -> mcruntime.ManagerOptions:
    """Manager options with the short health timings (and ``options``)."""
    return mcruntime.ManagerOptions(
        cluster_health_interval=INTERVAL,
        cluster_health_timeout=TIMEOUT,
        cluster_health_retry_interval=RETRY,
        **options,
    )


#: the embedded API servers' shared loop outlives any one manager
_ENVTEST = "mcruntime/envtest/"


def configmap(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data),
    }


def cluster_of(server: Any, name: str, **options: Any) -> Cluster:
    """A new Cluster for an embedded server, named ``name``."""
    return Cluster.from_kubeconfig(server.kubeconfig(), name=name, **options)


def fleet_provider(fleet: Any) -> clusters.Provider:
    """A ``clusters`` provider holding a Cluster for each server of ``fleet``, under its name."""
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    return provider


def create_cms(server: Any, names: list[str], namespace: str = "default") -> None:
    """Create ConfigMaps directly on ``server`` (a short-lived cluster of its own)."""
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="test-writer")
    try:
        for n in names:
            c.client.create(configmap(n, namespace))
    finally:
        c.stop()


class Recorder:
    """A reconciler that records every request; ``fn(req)`` may add behaviour (its return is returned)."""

    def __init__(self, fn: Callable[[Request], Any] | None = None) -> None:
        self.fn = fn
        self.requests: list[Request] = []
        self.times: dict[Request, float] = {}
        self._lock = threading.Lock()

    def __call__(self, req: Request) -> Any:
        with self._lock:
            self.requests.append(req)
            self.times.setdefault(req, time.monotonic())
        return self.fn(req) if self.fn else None

    def clear(self) -> None:
        """Forget what was recorded (churn tests keep memory flat this way)."""
        with self._lock:
            self.requests.clear()
            self.times.clear()

    def seen(self) -> set[tuple[str, str]]:
        """``{(cluster_name, namespace/name)}`` reconciled so far."""
        with self._lock:
            return {(r.cluster_name, r.key) for r in self.requests}

    def saw(self, cluster: str, key: str) -> bool:
        return (cluster, key) in self.seen()

    def count(self, cluster: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if cluster is None or r.cluster_name == cluster)

    def clusters(self) -> set[str]:
        with self._lock:
            return {r.cluster_name for r in self.requests}


def configmap_controller(
    mgr: mcruntime.Manager, rec: Any, name: str = "configmaps", **opts: Any
) -> Any:
    b = mcruntime.controller_managed_by(mgr).named(name).for_(CM)
    if opts:
        b = b.with_options(**opts)
    return b.complete(rec)


def threads_for(cluster: str) -> list[str]:
    """Names of live mcruntime threads working for ``cluster``: ``mcruntime/<component>/<cluster>/...``."""
    return sorted(
        t.name for t in mcruntime_threads() if t.is_alive() and t.name.split("/")[2:3] == [cluster]
    )


def thread_names() -> set[str]:
    return {t.name for t in mcruntime_threads() if t.is_alive() and not t.name.startswith(_ENVTEST)}


def thread_count() -> int:
    return len(thread_names())


@contextmanager
def running(mgr: mcruntime.Manager) -> Iterator[mcruntime.Manager]:
    """Start ``mgr``, stop it at the end (even when the test fails), then check no thread of it is left."""
    before = thread_names()
    mgr.start()
    try:
        yield mgr
    finally:
        mgr.stop(10)
    with contextlib.suppress(WaitTimeout):  # the assertion below names the threads left
        wait_for(lambda: thread_names() <= before, timeout=10)
    new = thread_names() - before
    left = [t for t in mcruntime_threads() if t.is_alive() and t.name in new]
    assert not left, f"threads left after stop: {described(left)}"
