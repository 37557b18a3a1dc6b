"""The management cluster: where a provider discovers the clusters it engages."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mcruntime._lifetime import on_end
from mcruntime._local import display_name
from mcruntime._readyz import PROBE_PATH, PROBE_QUERY, not_ready
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import KindLike, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import (
    APIError,
    ClusterLeft,
    DeadlineExceeded,
    Forbidden,
    MCRuntimeError,
    NoKindMatch,
    Unauthorized,
)

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
#: a management cluster that has answered no request for this long (seconds; watch bytes do
#: not count) is probed, as the manager probes its members (``cluster_health_interval``)
HEALTH_INTERVAL = 10.0
#: deadline of one probe of the management cluster (``cluster_health_timeout``)
HEALTH_TIMEOUT = 5.0
#: how often a management cluster that does not answer is probed again
#: (``cluster_health_retry_interval``): how fast its recovery is noticed
HEALTH_RETRY = 1.0
#: what the management cluster's failure streak is about
_PROBING = f"probing GET {PROBE_PATH}"

log = logging.getLogger("mcruntime.multicluster")


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


def management_list_error(
    informers: Sequence[Informer], management: ManagementCluster | None = None
) -> str | None:
    """Why a provider's ``informers`` on its management cluster fail to list or watch now
    (the first failing one's last error, which names the cluster), None while they work.

    What a provider keeps in ``discovery_error``, which the manager names when the
    provider's initial clusters are late and in ``/readyz``: a refused list (RBAC) is said
    there, not only in the informer's own log line. With ``management`` (whose
    [`check_health()`][mcruntime.multicluster.ManagementCluster.check_health] runs), a
    management cluster that does not answer at all (hung: its lists and watches wait
    without an error) is said first.
    """
    if management is not None and (problem := management.health_problem) is not None:
        return problem
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
    *,
    management: ManagementCluster | None = None,
) -> bool:
    """Wait until each of ``informers`` (started, on ``provider``'s management cluster) has
    its first list in; True once they all have.

    False once ``stop`` is set, ``timeout`` seconds passed, or the management cluster
    refused a list (401 or 403: no cluster can come from it until its RBAC or credentials
    change, so holding `Manager.start` up would only delay the others), or, with
    ``management`` (whose [`check_health()`][mcruntime.multicluster.ManagementCluster.check_health]
    runs), its probe got no answer or a not-ready one (hung: the list would wait its whole
    deadline), or it cannot be reached. Meanwhile, and when it returns, ``provider.discovery_error`` is
    [`management_list_error()`][mcruntime.multicluster.management_list_error].
    The informers keep retrying with backoff either way: a list allowed later engages
    its clusters then.
    """
    end = time.monotonic() + timeout
    try:
        for informer in informers:
            while not informer.wait_for_sync(
                min(_LIST_POLL, max(0.0, end - time.monotonic())), stop=stop
            ):
                provider.discovery_error = management_list_error(informers, management)
                if stop.is_set() or informer.stopped or time.monotonic() >= end:
                    return False
                if any(isinstance(i.last_error, Forbidden | Unauthorized) for i in informers):
                    return False
                if management is not None and management.health_problem is not None:
                    return False
        return True
    finally:
        provider.discovery_error = management_list_error(informers, management)


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

    A run may [`check_health()`][mcruntime.multicluster.ManagementCluster.check_health]: a
    management cluster that hangs (its watches fall silent, its lists wait; no error) is
    then said, as the manager says it of a member.
    """

    def __init__(self, cluster: Cluster, *, owned: bool = False) -> None:
        self.cluster = cluster
        self.owned = owned
        self._unlink: Callable[[], None] | None = None
        #: the run's own connections to a caller's cluster (None between runs, or when owned)
        self._run: Cluster | None = None
        #: the cluster the current run reads through (None between runs)
        self._current: Cluster | None = None
        #: the current run's health check (None when it runs none)
        self._health: _HealthCheck | None = None

    @property
    def health_problem(self) -> str | None:
        """Why the management cluster does not answer now, as the run's
        [`check_health()`][mcruntime.multicluster.ManagementCluster.check_health] last found
        (``management cluster hub: probing GET /readyz: no answer within 5s``); None while it
        answers, or when no check runs."""
        health = self._health
        return None if health is None else health.problem

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
        self._current = run
        return run

    def check_health(self, provider: Clusters, informers: Sequence[Informer]) -> None:
        """Check, until [`release()`][mcruntime.multicluster.ManagementCluster.release], that
        the management cluster of this run (`acquire()` first) answers; ``informers`` are
        ``provider``'s on it.

        A management cluster that accepts connections and never answers (a frozen
        kube-apiserver, a black-holed path) fails nothing: the provider's watches fall
        silent and its lists wait. So, as the manager checks each member, once the cluster
        has answered no request for `HEALTH_INTERVAL` seconds (10; watch bytes do not count)
        it is sent ``GET /readyz`` with a `HEALTH_TIMEOUT` (5 s) deadline. No answer, or a
        5xx one (its storage is down), is one warning per streak naming the provider, the
        cluster and what it means (no cluster is engaged or disengaged from it meanwhile;
        those engaged keep running), and `health_problem` says it (the provider's
        ``discovery_error``); it is probed every `HEALTH_RETRY` second until it answers,
        which is one info line, and the informers watch again at once (no backoff wait,
        no relist: their clusters stay engaged). A cluster that refuses connections or cannot
        be reached is said alike, with the cause. One thread, ended by `release()`.
        """
        run = self._current
        if run is None:
            raise RuntimeError("check_health() needs a run: call acquire() first")
        if self._health is not None:
            self._health.stop()
        self._health = _HealthCheck(run, provider, informers)

    def release(self) -> None:
        """End of a run: stop its health check, and the cluster if the provider owns it (and
        the run's own connections to a caller's cluster)."""
        health, self._health = self._health, None
        self._current = None
        if health is not None:
            health.end()
        unlink, self._unlink = self._unlink, None
        if unlink is not None:
            unlink()
        run, self._run = self._run, None
        if run is not None:
            run.stop()
        if self.owned:
            self.cluster.stop()
        if health is not None:
            # a probe in flight ended with the run's cluster (a run's own): joined at once
            health.join()


class _HealthCheck:
    """The thread of [`ManagementCluster.check_health()`][mcruntime.multicluster.ManagementCluster.check_health]."""

    def __init__(self, cluster: Cluster, provider: Clusters, informers: Sequence[Informer]) -> None:
        self.cluster = cluster
        self.provider = provider
        self.informers = list(informers)
        #: why the cluster does not answer (None while it answers)
        self.problem: str | None = None
        self._end = threading.Event()
        self._streaks = FailureStreaks(log, f"provider={provider.provider_name} management cluster")
        self._thread = start_thread(
            self._run, thread_name("management-health", cluster.name, provider.provider_name)
        )

    def end(self) -> None:
        """Tell the check to end (no probe starts from now on)."""
        self._end.set()

    def join(self) -> None:
        """Wait for the check's thread: a probe in flight ends at once when the run's cluster
        stopped, else by its deadline."""
        if self._thread is not threading.current_thread():
            self._thread.join(HEALTH_TIMEOUT + 1)

    def stop(self) -> None:
        """`end` and `join`."""
        self.end()
        self.join()

    def _run(self) -> None:
        rest = self.cluster.rest
        started = last_probe = time.monotonic()
        while not self._end.wait(min(HEALTH_RETRY, HEALTH_INTERVAL) / 2):
            now = time.monotonic()
            if self.problem is None:
                answered = rest.last_response
                # not answered since the run began (its first lists are due at once): probed
                # once silent for the probe's deadline, as the manager probes a new member
                silent = (
                    HEALTH_INTERVAL if answered >= started else min(HEALTH_INTERVAL, HEALTH_TIMEOUT)
                )
                if now - max(answered, last_probe) < silent:
                    continue
            elif now - last_probe < HEALTH_RETRY:
                continue
            last_probe = now
            try:
                reason = self._probe()
            except ClusterLeft:  # the run stopped: no failure
                return
            if not self._end.is_set():
                self._report(reason)

    def _probe(self) -> str | None:
        """Why the cluster does not answer (no answer, or not ready); None when it answers."""
        try:
            self.cluster.rest.request(
                "GET", PROBE_PATH, query=PROBE_QUERY, timeout=HEALTH_TIMEOUT, probe=True
            )
        except ClusterLeft:
            raise
        except APIError as exc:
            # a 5xx: its storage is down, every list waits; any other answer (401, 403, 404:
            # a proxy, RBAC) is an answer
            return not_ready(exc) if exc.status >= 500 else None
        except DeadlineExceeded:
            return f"no answer within {HEALTH_TIMEOUT:g}s"
        except MCRuntimeError as exc:
            # refused, unreachable: no answer either (and no recovery of a hung one)
            return describe_error(exc)
        return None

    def _report(self, reason: str | None) -> None:
        name = self.cluster.name
        was = self.problem
        if reason is not None:
            self.problem = f"management cluster {display_name(name)}: {_PROBING}: {reason}"
            self._streaks.failed(
                name,
                _PROBING,
                reason,
                key=_PROBING,
                retry=(
                    "no cluster is engaged or disengaged from it until it answers"
                    f"{_keep_running(len(self.provider))}; probing every {HEALTH_RETRY:g}s"
                ),
            )
        elif was is not None:
            self.problem = None
            self._streaks.recovered(name, _PROBING, key=_PROBING, detail="; watching again")
            for informer in self.informers:
                informer.retry_now()


def _keep_running(engaged: int) -> str:
    """What a hung management cluster leaves running, for its warning."""
    if engaged == 0:
        return ""
    return (
        f" (the {engaged} engaged keep running)"
        if engaged > 1
        else " (the one engaged keeps running)"
    )
