"""A slow or unreachable local cluster does not hold up the provider's clusters at start."""

from __future__ import annotations

import threading
import time

import pytest

import mcruntime
from mcruntime.cluster import Cluster
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
        provider.add("c", stale)
        deadline = time.monotonic() + 10
        while mgr.cluster_states().get("c", ("", None))[0] != "failed":
            assert time.monotonic() < deadline, mgr.cluster_states()
            time.sleep(0.02)
        state, error = mgr.cluster_states()["c"]
        assert "was stopped" in (error or "") and "Cluster.clone()" in (error or "")
        provider.add("c", stale.clone())
        deadline = time.monotonic() + 10
        while "c" not in mgr.engaged_clusters():
            assert time.monotonic() < deadline, mgr.cluster_states()
            time.sleep(0.02)
