"""A static set of clusters, each a kubeconfig file (optionally ``path#context``)."""

from __future__ import annotations

import threading

from mcruntime.cluster import Cluster
from mcruntime.multicluster import Clusters
from mcruntime.plugins import ProviderOptions

__all__ = ["Options", "StaticProvider"]


class Options(ProviderOptions):
    """``clusters``: cluster name -> kubeconfig path, with ``#context`` to pick a context."""

    clusters: dict[str, str]


class StaticProvider(Clusters):
    """Engages a fixed set of clusters named in the options."""

    def __init__(self, options: Options) -> None:
        super().__init__("static")
        self.options = options

    def run(self, stop: threading.Event) -> None:
        for name, location in self.options.clusters.items():
            path, _, context = location.partition("#")
            self.add(name, Cluster.from_kubeconfig(path, context=context or None, name=name))
        stop.wait()
