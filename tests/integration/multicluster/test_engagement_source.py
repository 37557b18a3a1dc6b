"""source.Engagements: a controller hears of every cluster it engages, including one added later."""

from __future__ import annotations

import threading

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.handler import enqueue_requests_from_map_func
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request
from mcruntime.source import Engagements

pytestmark = pytest.mark.timeout(60)


def test_each_engaged_cluster_fires_one_event_mapped_across_clusters(
    make_envtest_fleet, make_envtest_server
):
    fleet = make_envtest_fleet(2)
    hub = make_envtest_server("hub")
    provider = Provider()
    provider.add(
        "cluster-0", Cluster.from_kubeconfig(fleet["cluster-0"].kubeconfig(), name="cluster-0")
    )
    mgr = mcruntime.Manager(hub.kubeconfig(), provider=provider)
    joined: list[str] = []
    lock = threading.Condition()

    def reconcile(req: Request) -> None:
        with lock:
            joined.append(req.name)
            lock.notify_all()

    # A cluster joining enqueues a request in the local (hub) cluster that names it.
    to_hub = enqueue_requests_from_map_func(
        lambda obj: [Request("", obj["metadata"]["name"], "")], cross_cluster=True
    )
    (
        mcruntime.controller_managed_by(mgr)
        .named("joins")
        .watches(Engagements(to_hub, cluster_filter=lambda name: name != ""))
        .complete(reconcile)
    )
    with mgr:
        with lock:
            assert lock.wait_for(lambda: joined == ["cluster-0"], 15), joined
        provider.add(
            "cluster-1", Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig(), name="cluster-1")
        )
        with lock:
            assert lock.wait_for(lambda: sorted(joined) == ["cluster-0", "cluster-1"], 15), joined
