"""``embedded``: a fleet of in-process API servers ([`mcruntime.envtest`][mcruntime.envtest]), no cluster needed.

The default of the examples: ``python -m mcruntime.examples.configmaps`` runs
on it. Clusters can be added and removed while running with
[`Provider.add_cluster()`][mcruntime.providers.embedded.Provider.add_cluster] / [`Provider.remove_cluster()`][mcruntime.providers.embedded.Provider.remove_cluster].
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pydantic import Field

from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import ProviderOptions, ProviderSpec, hookimpl

if TYPE_CHECKING:
    from mcruntime.envtest import APIServer, Fleet

__all__ = ["Provider", "Options"]


class Options(ProviderOptions):
    """``clusters`` API servers named ``<prefix>-0`` ... started on loopback ports."""

    clusters: int = Field(default=3, ge=0, le=1000)
    prefix: str = "cluster"
    history: int = Field(default=10000, ge=1)
    tls: bool = True


class Provider(Clusters):
    """Starts a [`Fleet`][mcruntime.envtest.Fleet] and engages each server as a cluster."""

    def __init__(self, options: Options | None = None) -> None:
        super().__init__("embedded")
        self.options = options or Options()
        self._fleet: Fleet | None = None
        self._fleet_lock = threading.Lock()

    @property
    def fleet(self) -> Fleet:
        """The running fleet (started on first use)."""
        return self.start_fleet()

    def start_fleet(self) -> Fleet:
        """Start the API servers (idempotent) and add each as a cluster."""
        from mcruntime.envtest import Fleet

        with self._fleet_lock:
            if self._fleet is None:
                o = self.options
                fleet = Fleet(o.clusters, prefix=o.prefix, history=o.history, tls=o.tls)
                fleet.start()
                self._fleet = fleet
                for name in fleet.names:
                    self._add_server(name, fleet[name])
            return self._fleet

    def _add_server(self, name: str, server: APIServer) -> None:
        from mcruntime.cluster import Cluster

        self.add(name, Cluster.from_kubeconfig(server.kubeconfig(), name=name))

    def add_cluster(self, name: str) -> APIServer:
        """Start one more API server and engage it as cluster ``name``."""
        server = self.fleet.add(name)
        self._add_server(name, server)
        return server

    def remove_cluster(self, name: str) -> None:
        """Disengage cluster ``name`` and stop its API server."""
        self.remove(name)
        self.fleet.remove(name)

    reports_initial_clusters = True

    def run(self, stop: threading.Event) -> None:
        try:
            self.start_fleet()
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
