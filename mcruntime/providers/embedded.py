"""``embedded``: a fleet of in-process API servers ([`mcruntime.envtest`][mcruntime.envtest]), no cluster needed.

The default of the examples: ``python -m mcruntime.examples.configmaps`` runs
on it. Clusters can be added and removed while running with
[`Provider.add_cluster()`][mcruntime.providers.embedded.Provider.add_cluster] / [`Provider.remove_cluster()`][mcruntime.providers.embedded.Provider.remove_cluster].
Each server gets its CRDs (``crds``, as envtest's ``CRDDirectoryPaths``) and
whatever ``prepare`` sets up before it is engaged, so a controller never sees a
cluster without the kinds it watches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import Field

from mcruntime._local import check_cluster_name
from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import (
    CommaSeparated,
    ProviderError,
    ProviderOptions,
    ProviderSpec,
    hookimpl,
)

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster
    from mcruntime.envtest import APIServer, Fleet

__all__ = ["Provider", "Options"]


class Options(ProviderOptions):
    """``clusters`` API servers named ``<prefix>-0`` ... started on loopback ports."""

    clusters: int = Field(default=3, ge=0, le=1000)
    prefix: str = "cluster"
    history: int = Field(default=10000, ge=1)
    tls: bool = True
    crds: CommaSeparated = Field(
        default_factory=list,
        description="CRD files or directories installed in every server before it is engaged",
    )


#: what `Provider` runs on each new cluster before engaging it
Prepare = Callable[["Cluster"], None]


def _load_crds(paths: list[str]) -> list[dict[str, Any]]:
    """The CRDs of the ``crds`` option; a path without any is a `ProviderError` naming it."""
    if not paths:
        return []
    from mcruntime.crd import CRDError, load_crds

    try:
        return load_crds(paths)
    except CRDError as exc:
        raise ProviderError(f"provider 'embedded': option crds: {exc}") from None


class Provider(Clusters):
    """Starts a [`Fleet`][mcruntime.envtest.Fleet] and engages each server as a cluster.

    Before a server is engaged (at start and in `add_cluster`), the CRDs of
    ``options.crds`` are installed in it and ``prepare(cluster)`` runs, with the
    cluster not engaged yet: install CRDs of your own, namespaces, RBAC. A server
    whose set-up fails is stopped and the error raised: a controller never sees a
    cluster half set up.
    """

    def __init__(self, options: Options | None = None, *, prepare: Prepare | None = None) -> None:
        super().__init__("embedded")
        self.options = options or Options()
        self.prepare = prepare
        #: read here, once: a bad path is said when the provider is made, before any server
        self._crds = _load_crds(self.options.crds)
        self._fleet: Fleet | None = None
        self._fleet_lock = threading.Lock()

    @property
    def fleet(self) -> Fleet:
        """The running fleet (started on first use)."""
        return self.start_fleet()

    def start_fleet(self) -> Fleet:
        """Start the API servers (idempotent) and add each as a cluster."""
        fleet = self._start_fleet(None)
        assert fleet is not None  # (nothing stops it)
        return fleet

    def _start_fleet(self, stop: threading.Event | None) -> Fleet | None:
        """`start_fleet`, given up (every server stopped, None) once ``stop`` is set: a
        manager stopping during the set-up of a large fleet waits for one set-up at most."""
        from mcruntime.envtest import Fleet

        with self._fleet_lock:
            if self._fleet is None:
                o = self.options
                fleet = Fleet(o.clusters, prefix=o.prefix, history=o.history, tls=o.tls)
                fleet.start()
                ready: list[tuple[str, Cluster]] = []
                try:
                    for name in fleet.names:
                        if stop is not None and stop.is_set():
                            break
                        ready.append((name, self._set_up(name, fleet[name])))
                except BaseException:
                    for _, cluster in ready:
                        cluster.stop()
                    fleet.stop()
                    raise
                if stop is not None and stop.is_set():
                    for _, cluster in ready:
                        cluster.stop()
                    fleet.stop()
                    return None
                self._fleet = fleet
                for name, cluster in ready:
                    self.add(name, cluster)
            return self._fleet

    def _set_up(self, name: str, server: APIServer) -> Cluster:
        """The cluster of ``server`` with its CRDs installed and ``prepare`` run, not engaged."""
        from mcruntime.cluster import Cluster

        cluster = Cluster.from_kubeconfig(server.kubeconfig(), name=name)
        try:
            if self._crds:
                from mcruntime.crd import install_crds

                install_crds(cluster, self._crds)
            if self.prepare is not None:
                self.prepare(cluster)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def add_cluster(self, name: str) -> APIServer:
        """Start one more API server, set it up (``crds``, ``prepare``) and engage it as cluster ``name``.

        A set-up that fails stops the new server and raises.
        """
        check_cluster_name(name)
        fleet = self.fleet
        server = fleet.add(name)
        try:
            cluster = self._set_up(name, server)
        except BaseException:
            fleet.remove(name)
            raise
        self.add(name, cluster)
        return server

    def remove_cluster(self, name: str, *, wait: float = 30.0) -> None:
        """Disengage cluster ``name`` and stop its API server.

        The server stops once what still needs it after the disengage is over (the
        removal of the webhook configurations installed in it), or after ``wait`` seconds.
        """
        self.remove(name, wait=wait)
        self.fleet.remove(name)

    reports_initial_clusters = True

    def run(self, stop: threading.Event) -> None:
        try:
            self._start_fleet(stop)
        finally:
            self.initial_clusters_reported()
        try:
            stop.wait()
        finally:
            self.close()

    def close(self) -> None:
        """Disengage every cluster and stop the API servers."""
        self.stop()
        with self._fleet_lock:
            fleet, self._fleet = self._fleet, None
        if fleet is not None:
            fleet.stop()


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "embedded",
            Options,
            Provider,
            "a fleet of in-process API servers",
            api_version=PROVIDER_API_VERSION,
        )
    ]
