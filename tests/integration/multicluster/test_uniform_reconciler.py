"""One reconciler over a fleet of embedded API servers with the ``clusters`` provider, and unchanged on one cluster."""

from __future__ import annotations

from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    fleet_provider,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


def test_every_configmap_is_reconciled_with_its_clusters_name(make_envtest_fleet: Any) -> None:
    fleet = make_envtest_fleet(3)
    for srv in fleet:
        create_cms(srv, [f"cm-{srv.name}"])
    provider = fleet_provider(fleet)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        for srv in fleet:
            wait_for(
                lambda s=srv: rec.saw(s.name, f"default/cm-{s.name}"),
                what=f"reconcile on {srv.name}",
            )
        assert "" not in rec.clusters(), "no local cluster: nothing reconciled with an empty name"
        # a ConfigMap of one cluster is never reconciled under another's name
        for cluster, key in rec.seen():
            assert key.endswith(cluster) or key.startswith("kube-"), (cluster, key)

        # one more ConfigMap later, in cluster-1: its request names cluster-1
        mgr.get_cluster("cluster-1").client.create(configmap("later"))
        wait_for(lambda: rec.saw("cluster-1", "default/later"))
        assert not rec.saw("cluster-0", "default/later")
        assert str(Request("default", "later", "cluster-1")) == "cluster://cluster-1/default/later"


def test_a_cluster_added_at_run_time_is_reconciled_and_a_removed_one_leaves_nothing(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    provider = fleet_provider(fleet)
    mgr = mcruntime.Manager(provider=provider)

    def reconcile(req: Request) -> None:
        # the reconciler reaches its cluster through the manager, as real ones do
        mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)

    rec = Recorder(reconcile)
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: set(mgr.engaged_clusters()) == {"cluster-0", "cluster-1", "cluster-2"})
        base_threads = {c: len(threads_for(c)) for c in fleet.names}
        assert all(base_threads.values()), base_threads

        new = fleet.add("cluster-3")
        create_cms(new, ["early"])
        provider.add("cluster-3", cluster_of(new, "cluster-3"))
        wait_for(
            lambda: rec.saw("cluster-3", "default/early"),
            what="the new cluster's object reconciled",
        )
        mgr.get_cluster("cluster-3").client.create(configmap("late"))
        wait_for(lambda: rec.saw("cluster-3", "default/late"))
        assert len(threads_for("cluster-3")) == base_threads["cluster-0"]

        removed = "cluster-1"
        provider.remove(removed)
        wait_for(lambda: removed not in mgr.engaged_clusters())
        wait_for(
            lambda: threads_for(removed) == [],
            timeout=10,
            what="the removed cluster's threads gone",
        )
        with pytest.raises(ClusterNotFound):
            mgr.get_cluster(removed)
        before = rec.count(removed)
        # writes to the removed cluster's server are no longer watched
        create_cms(fleet[removed], ["after-removal"])
        mgr.get_cluster("cluster-0").client.create(configmap("marker"))
        wait_for(lambda: rec.saw("cluster-0", "default/marker"))
        assert rec.count(removed) == before
        assert not rec.saw(removed, "default/after-removal")
        # the others keep their threads
        for c in ("cluster-0", "cluster-2", "cluster-3"):
            assert len(threads_for(c)) == base_threads["cluster-0"], (c, threads_for(c))
    for c in ("cluster-0", "cluster-2", "cluster-3"):
        wait_for(lambda c=c: threads_for(c) == [], timeout=10, what=f"{c} threads gone after stop")


def test_the_same_reconciler_runs_single_cluster_without_a_provider(envtest_server: Any) -> None:
    create_cms(envtest_server, ["solo"])
    mgr = mcruntime.Manager(envtest_server.kubeconfig())

    def reconcile(req: Request) -> None:
        mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)

    rec = Recorder(reconcile)
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: rec.saw("", "default/solo"))
        mgr.get_cluster().client.create(configmap("two"))
        wait_for(lambda: rec.saw("", "default/two"))
        assert rec.clusters() == {""}
        assert str(Request("default", "two")) == "default/two"
