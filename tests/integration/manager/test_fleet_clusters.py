"""``Manager.fleet_clusters()``: every provider cluster, engaged or not, and only once the provider
has named them all; what a cleanup in every member walks (a member left out keeps its copy)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound, FleetNotKnown
from mcruntime.multicluster import Clusters
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import cluster_of, fleet_provider

pytestmark = pytest.mark.timeout(60)


def _watching_configmaps(mgr: mcruntime.Manager) -> None:
    """A controller with a ConfigMap source: a member that does not answer cannot sync."""

    def reconcile(req: Request) -> None:
        return None

    mcruntime.controller_managed_by(mgr).named("cms").for_("v1/ConfigMap").complete(reconcile)


def test_a_member_down_since_the_start_is_in_the_fleet_but_not_engaged(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    fleet["cluster-1"].stop()  # down when the manager starts: its engagement stays syncing
    mgr = mcruntime.Manager(
        provider=fleet_provider(fleet), options=mcruntime.ManagerOptions(engage_sync_timeout=2)
    )
    _watching_configmaps(mgr)
    with pytest.raises(FleetNotKnown, match="the manager has not started"):
        mgr.fleet_clusters()
    with mgr:
        assert mgr.engaged_clusters() == ["cluster-0", "cluster-2"]
        assert mgr.fleet_clusters() == ["cluster-0", "cluster-1", "cluster-2"]
        with pytest.raises(ClusterNotFound, match="cluster-1"):
            mgr.get_cluster("cluster-1")  # work that must reach it fails, and runs again
        fleet["cluster-1"].start()
        wait_for(lambda: "cluster-1" in mgr.engaged_clusters(), timeout=30, interval=0.05)
        assert mgr.fleet_clusters() == ["cluster-0", "cluster-1", "cluster-2"]
    with pytest.raises(FleetNotKnown, match="the manager is stopping"):
        mgr.fleet_clusters()


class _Late(Clusters):
    """A provider whose first discovery pass ends when the test says so."""

    reports_initial_clusters = True

    def __init__(self, cluster: Any) -> None:
        super().__init__("late-fleet")
        self.cluster = cluster
        self.go = threading.Event()

    def run(self, stop: threading.Event) -> None:
        if not (self.go.wait(30) and not stop.is_set()):
            return
        self.add("member", self.cluster)
        self.initial_clusters_reported()
        stop.wait()


def test_the_fleet_is_not_known_until_the_provider_reported_its_initial_clusters(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(1)
    provider = _Late(cluster_of(fleet["cluster-0"], "member"))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=0.2)
    )
    with mgr:
        # a cleanup walking the fleet now would find no member and conclude "all done"
        assert mgr.engaged_clusters() == []
        with pytest.raises(
            FleetNotKnown,
            match="provider=late-fleet has not reported its initial clusters yet",
        ):
            mgr.fleet_clusters()
        provider.go.set()
        wait_for(lambda: mgr.engaged_clusters() == ["member"], timeout=30, interval=0.05)
        assert mgr.fleet_clusters() == ["member"]


def test_no_provider_no_fleet(make_envtest_server: Any) -> None:
    mgr = mcruntime.Manager(make_envtest_server("hub").kubeconfig())
    with mgr:
        assert mgr.fleet_clusters() == []
