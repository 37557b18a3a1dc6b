"""ManagerOptions.cache reaches provider clusters built without cache options of their own."""

from __future__ import annotations

import threading

import pytest

import mcruntime
from mcruntime.cache import ByKind, CacheOptions
from mcruntime.cluster import Cluster
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(60)


def cm(name: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
    }


def test_manager_cache_options_restrict_what_provider_clusters_cache(make_envtest_fleet):
    fleet = make_envtest_fleet(2)
    own = CacheOptions(by_kind={"v1/ConfigMap": ByKind(label_selector="team=b")})
    provider = Provider()
    provider.add(
        "cluster-0", Cluster.from_kubeconfig(fleet["cluster-0"].kubeconfig(), name="cluster-0")
    )
    provider.add(
        "cluster-1",
        Cluster.from_kubeconfig(
            fleet["cluster-1"].kubeconfig(), name="cluster-1", cache_options=own
        ),
    )
    opts = ManagerOptions(
        cache=CacheOptions(by_kind={"v1/ConfigMap": ByKind(label_selector="team=a")})
    )
    mgr = mcruntime.Manager(provider=provider, options=opts)
    seen: set[tuple[str, str]] = set()
    done = threading.Event()

    def reconcile(req: mcruntime.Request) -> None:
        seen.add((req.cluster_name, req.name))
        if {("cluster-0", "a"), ("cluster-1", "b")} <= seen:
            done.set()

    mcruntime.controller_managed_by(mgr).named("cms").for_("v1/ConfigMap").complete(reconcile)
    for name in fleet.names:
        admin = Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name)
        for obj in (cm("a", {"team": "a"}), cm("b", {"team": "b"}), cm("none")):
            admin.client.create(obj)
        admin.stop()
    with mgr:
        assert done.wait(15), seen

        def cached(name: str) -> set[str]:
            return {o["metadata"]["name"] for o in mgr.get_cluster(name).cache.list("v1/ConfigMap")}

        assert cached("cluster-0") == {"a"}  # the manager's default
        assert cached("cluster-1") == {"b"}  # the cluster's own options win
        assert seen == {("cluster-0", "a"), ("cluster-1", "b")}
