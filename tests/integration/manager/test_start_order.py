"""A slow or unreachable local cluster does not hold up the provider's clusters at start."""

from __future__ import annotations

import threading
import time

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(60)


def test_provider_clusters_engage_while_start_waits_for_the_local_cluster(make_envtest_server):
    local_srv = make_envtest_server("local")
    remote = make_envtest_server("remote")
    local_kubeconfig = local_srv.kubeconfig()
    local_srv.stop()
    provider = Provider()
    provider.add("remote", Cluster.from_kubeconfig(remote.kubeconfig(), name="remote"))
    mgr = mcruntime.Manager(
        local_kubeconfig, provider=provider, options=ManagerOptions(engage_sync_timeout=8)
    )
    seen = threading.Event()
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").engage_with_local_cluster().complete(
        lambda req: seen.set() if req.cluster_name == "remote" else None
    )
    writer = Cluster.from_kubeconfig(remote.kubeconfig())
    writer.client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    )
    writer.stop()
    started = threading.Event()
    t = threading.Thread(target=lambda: (mgr.start(), started.set()), name="test-start")
    began = time.monotonic()
    t.start()
    try:
        assert seen.wait(6), "the provider cluster waited for the unreachable local cluster"
        assert not started.is_set(), "start() should still be waiting for the local cluster"
        assert time.monotonic() - began < 6
        t.join(15)
        assert started.is_set()
        assert mgr.cluster_states()[""][0] == "syncing"
    finally:
        mgr.stop()


def test_engaging_a_stopped_cluster_is_reported_as_failed(make_envtest_server):
    srv = make_envtest_server("c")
    stale = Cluster.from_kubeconfig(srv.kubeconfig(), name="c")
    stale.start()
    stale.stop()
    provider = Provider()
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    with mgr:
        with pytest.raises(ValueError, match="its Cluster was stopped"):
            provider.add("c", stale)  # a `Clusters` provider refuses it at once
        # a provider of its own engages it through the Aware contract: the engagement fails
        mgr.engage("c", stale, threading.Event())
        wait_for(
            lambda: mgr.cluster_states().get("c", ("", None))[0] == "failed",
            timeout=10,
            what="cluster c failed",
        )
        state, error = mgr.cluster_states()["c"]
        assert "was stopped" in (error or "") and "Cluster.clone()" in (error or "")
        provider.add("c", stale.clone())
        wait_for(lambda: "c" in mgr.engaged_clusters(), timeout=10, what="cluster c engaged")


def test_a_manager_refuses_a_stopped_local_cluster_at_once(make_envtest_server):
    """A notebook's manager cell run again with the Cluster of an earlier cell: the first
    manager's stop stopped it. Before, the new manager was made and started "fine", logged an
    error, and ran without its local cluster (every call raised ClusterLeft)."""
    srv = make_envtest_server("local")
    cluster = Cluster.from_kubeconfig(srv.kubeconfig())
    with mcruntime.Manager(cluster):
        pass
    with pytest.raises(ValueError, match=r"cluster local was stopped .* cluster\.clone\(\)"):
        mcruntime.Manager(cluster)
    with mcruntime.Manager(cluster.clone()) as mgr:
        assert mgr.cluster_states()[""][0] == "engaged"


def test_start_returns_once_the_providers_initial_clusters_are_engaged(
    tmp_path, make_envtest_fleet
):
    from mcruntime.providers import file

    fleet = make_envtest_fleet(3, prefix="f")
    for server in fleet:
        server.write_kubeconfig(tmp_path / f"{server.name}.yaml")
    provider = file.Provider(file.Options(paths=[str(tmp_path)], interval=60))
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    mgr.start()
    try:
        # the file provider scans before start() returns; every cluster is usable at once
        names = mgr.engaged_clusters()
        assert len(names) == 3, mgr.cluster_states()
        for name in names:
            assert mgr.get_cluster(name).client.list("v1/ConfigMap", "default") == []
    finally:
        mgr.stop(10)


def test_a_hung_initial_cluster_does_not_hold_start_for_long(make_envtest_fleet):
    fleet = make_envtest_fleet(2, prefix="s")
    provider = Provider()
    for server in fleet:
        provider.add(server.name, Cluster.from_kubeconfig(server.kubeconfig(), name=server.name))
    fleet.freeze("s-0")
    mgr = mcruntime.Manager(
        provider=provider,
        options=ManagerOptions(
            engage_sync_timeout=30, cluster_health_interval=0.5, cluster_health_timeout=0.5
        ),
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    began = time.monotonic()
    try:
        mgr.start()
        took = time.monotonic() - began
        assert took < 5, took  # the health check flags s-0; start does not wait it out
        assert mgr.engaged_clusters() == ["s-1"]
    finally:
        fleet.thaw("s-0")
        mgr.stop(10)
