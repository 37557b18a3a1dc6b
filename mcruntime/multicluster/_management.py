"""The management cluster: where a provider discovers the clusters it engages."""

from __future__ import annotations

import threading
from collections.abc import Callable

from mcruntime._lifetime import on_end
from mcruntime.cluster import Cluster

__all__ = ["MANAGEMENT_CLUSTER_NAME", "ManagementCluster"]

#: name of the management cluster a provider builds from its options
MANAGEMENT_CLUSTER_NAME = "management"


class ManagementCluster:
    """The cluster a provider watches to discover others (kubeconfig Secrets, Cluster API objects).

    A cluster the caller passes in is the caller's: it starts and stops it. A run of the
    provider reads it through connections of its own (a clone with its configuration),
    which the run's stop cuts, so that a list held by a hung management cluster ends at
    the stop, not at its deadline on a thread nobody waits for. One the provider builds
    from its options ([`from_kubeconfig()`][mcruntime.multicluster.ManagementCluster.from_kubeconfig])
    is *owned*: [`release()`][mcruntime.multicluster.ManagementCluster.release] at the end
    of a run stops it, and [`acquire()`][mcruntime.multicluster.ManagementCluster.acquire]
    at the start of the next run builds it afresh.
    """

    def __init__(self, cluster: Cluster, *, owned: bool = False) -> None:
        self.cluster = cluster
        self.owned = owned
        self._unlink: Callable[[], None] | None = None
        #: the run's own connections to a caller's cluster (None between runs, or when owned)
        self._run: Cluster | None = None

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        name: str = MANAGEMENT_CLUSTER_NAME,
    ) -> ManagementCluster:
        """An owned management cluster from a kubeconfig file and context (default: the
        default kubeconfig, or the in-cluster config)."""
        return cls(Cluster.from_kubeconfig(kubeconfig, context=context, name=name), owned=True)

    def acquire(self, stop: threading.Event | None = None) -> Cluster:
        """The cluster for a run of the provider; an owned one an earlier run stopped is rebuilt.

        With ``stop`` (the run's), the cluster the run reads through (an owned one, or the
        run's connections to the caller's) stops as soon as the run is told to: a call that a
        hung management cluster holds (discovery, a list) ends then with
        [`ClusterLeft`][mcruntime.errors.ClusterLeft], not at its deadline.
        """
        if self.owned and self.cluster.stopped:
            self.cluster = Cluster.from_config(self.cluster.config, name=self.cluster.name)
        if self.owned:
            run = self.cluster
        else:
            if self._run is None or self._run.stopped:
                self._run = self.cluster.clone()
            run = self._run
        if stop is not None and self._unlink is None:
            self._unlink = on_end(stop, run.stop, name=run.name, join=True)
        return run

    def release(self) -> None:
        """End of a run: stop the cluster if the provider owns it (and the run's own
        connections to a caller's cluster)."""
        unlink, self._unlink = self._unlink, None
        if unlink is not None:
            unlink()
        run, self._run = self._run, None
        if run is not None:
            run.stop()
        if self.owned:
            self.cluster.stop()
