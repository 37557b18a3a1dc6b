"""The management cluster: where a provider discovers the clusters it engages."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mcruntime._lifetime import on_end
from mcruntime._streak import describe_error
from mcruntime.client import KindLike, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import Forbidden, MCRuntimeError, NoKindMatch, Unauthorized

if TYPE_CHECKING:
    from mcruntime.cache import Informer
    from mcruntime.multicluster._clusters import Clusters

__all__ = [
    "MANAGEMENT_CLUSTER_NAME",
    "MAX_DISCOVERY_WAIT",
    "ManagementCluster",
    "management_list_error",
    "wait_for_first_lists",
    "wait_until_served",
]

#: name of the management cluster a provider builds from its options
MANAGEMENT_CLUSTER_NAME = "management"
#: the longest wait between two looks at discovery in `wait_until_served`
MAX_DISCOVERY_WAIT = 30.0
#: how often `wait_for_first_lists` looks at its informers' errors
_LIST_POLL = 0.1


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


def management_list_error(informers: Sequence[Informer]) -> str | None:
    """Why a provider's ``informers`` on its management cluster fail to list or watch now
    (the first failing one's last error, which names the cluster), None while they work.

    What a provider keeps in ``discovery_error``, which the manager names when the
    provider's initial clusters are late: a refused list (RBAC) is said there, not only in
    the informer's own log line.
    """
    for informer in informers:
        error = informer.last_error
        if error is not None:
            return f"listing {informer.gvk}: {describe_error(error)}"
    return None


def wait_for_first_lists(
    provider: Clusters,
    informers: Sequence[Informer],
    stop: threading.Event,
    timeout: float,
) -> bool:
    """Wait until each of ``informers`` (started, on ``provider``'s management cluster) has
    its first list in; True once they all have.

    False once ``stop`` is set, ``timeout`` seconds passed, or the management cluster
    refused a list (401 or 403: no cluster can come from it until its RBAC or credentials
    change, so holding `Manager.start` up would only delay the others). Meanwhile, and when
    it returns, ``provider.discovery_error`` is [`management_list_error()`][mcruntime.multicluster.management_list_error].
    The informers keep retrying with backoff either way: a list allowed later engages
    its clusters then.
    """
    end = time.monotonic() + timeout
    try:
        for informer in informers:
            while not informer.wait_for_sync(
                min(_LIST_POLL, max(0.0, end - time.monotonic())), stop=stop
            ):
                provider.discovery_error = management_list_error(informers)
                if stop.is_set() or informer.stopped or time.monotonic() >= end:
                    return False
                if any(isinstance(i.last_error, Forbidden | Unauthorized) for i in informers):
                    return False
        return True
    finally:
        provider.discovery_error = management_list_error(informers)


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
