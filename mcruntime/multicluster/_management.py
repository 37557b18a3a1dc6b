"""The management cluster: where a provider discovers the clusters it engages."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from mcruntime._lifetime import on_end
from mcruntime.client import KindLike, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import MCRuntimeError, NoKindMatch

__all__ = [
    "MANAGEMENT_CLUSTER_NAME",
    "MAX_DISCOVERY_WAIT",
    "ManagementCluster",
    "wait_until_served",
]

#: name of the management cluster a provider builds from its options
MANAGEMENT_CLUSTER_NAME = "management"
#: the longest wait between two looks at discovery in `wait_until_served`
MAX_DISCOVERY_WAIT = 30.0


def wait_until_served(
    cluster: Cluster,
    kinds: Sequence[KindLike],
    stop: threading.Event,
    *,
    missing: str,
    log: logging.Logger,
    provider: str,
    on_missing: Callable[[], None] | None = None,
) -> RESTMapping | None:
    """The mapping of the first of ``kinds`` that ``cluster`` serves, waiting with backoff
    (0.5 s doubling to `MAX_DISCOVERY_WAIT`) until one is; None once ``stop`` is set first.

    For a provider whose clusters are objects of a CRD (Cluster API's Clusters, ClusterProfiles)
    that may not be installed yet. While none of them is served, ``on_missing()`` runs (a provider
    reports its initial clusters, none, so `Manager.start` does not wait) and one warning per
    reason says ``provider=<provider> <missing>; waiting`` (a failed discovery says so
    instead); an info line follows once it is served. A stop while discovery is cut is no
    failure and is not logged.
    """
    wait, said = 0.5, ""
    while not stop.is_set():
        reason = ""
        for kind in kinds:
            try:
                mapping = cluster.rest_mapper.mapping(kind)
            except NoKindMatch:
                reason = missing
                continue
            except MCRuntimeError as exc:
                reason = f"discovery failed: {exc}"
                break
            if said:
                log.info("provider=%s the management cluster serves %s now", provider, mapping.gvk)
            return mapping
        if stop.is_set():  # the management cluster stopped with the run: no failure
            break
        if reason == missing and on_missing is not None:  # none of the kinds is served
            on_missing()
        if reason != said:
            log.warning("provider=%s %s; waiting", provider, reason)
            said = reason
        stop.wait(wait)
        wait = min(wait * 2, MAX_DISCOVERY_WAIT)
    return None


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
