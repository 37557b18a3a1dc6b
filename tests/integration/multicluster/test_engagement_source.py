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


def test_a_cluster_leaving_fires_a_delete_event_the_hub_can_roll_up(
    make_envtest_fleet, make_envtest_server
):
    fleet = make_envtest_fleet(2)
    hub = make_envtest_server("hub")
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(hub.kubeconfig(), provider=provider)
    rollups: list[list[str]] = []
    lock = threading.Condition()

    def reconcile(req: Request) -> None:
        with lock:  # a status roll-up over the members engaged now
            rollups.append(mgr.engaged_clusters())
            lock.notify_all()

    to_hub = enqueue_requests_from_map_func(
        lambda obj: [Request("", "rollup", "")], cross_cluster=True
    )
    (
        mcruntime.controller_managed_by(mgr)
        .named("rollup")
        .watches(Engagements(to_hub, cluster_filter=lambda name: name != ""))
        .complete(reconcile)
    )
    with mgr:
        with lock:
            assert lock.wait_for(lambda: rollups and rollups[-1] == ["cluster-0", "cluster-1"], 15)
        provider.remove("cluster-0")
        with lock:
            assert lock.wait_for(lambda: rollups[-1] == ["cluster-1"], 15), rollups
        seen = len(rollups)
    assert len(rollups) == seen  # stopping the manager is not a cluster leaving


def test_user_metrics_are_dropped_per_cluster_on_disengagement(make_envtest_fleet):
    from prometheus_client import Gauge

    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(provider=provider)
    widgets = Gauge("widgets", "Widgets per cluster", ["cluster"], registry=mgr.metrics.registry)
    gone = threading.Event()

    def drop(cluster_name: str) -> None:
        widgets.remove(cluster_name)
        gone.set()

    mgr.on_cluster_disengaged(drop)
    with mgr:
        widgets.labels("cluster-0").set(3)
        widgets.labels("cluster-1").set(4)
        provider.remove("cluster-0")
        assert gone.wait(15)
        assert mgr.metrics.sample("widgets", {"cluster": "cluster-0"}) is None
        assert mgr.metrics.sample("widgets", {"cluster": "cluster-1"}) == 4


def _join_and_leave(mgr, provider, srv, engaged):
    """Run ``mgr`` while cluster eu-1 (``srv``) joins, is ``engaged()``, and leaves, until the
    manager's teardown of it ran to its end (its disengaged callbacks)."""
    from mcruntime.envtest import wait_for

    gone: list[str] = []
    mgr.on_cluster_disengaged(gone.append)
    mgr.start()
    try:
        provider.add("eu-1", Cluster.from_kubeconfig(srv.kubeconfig(), name="eu-1"))
        wait_for(engaged, what="eu-1 engaged")
        provider.remove("eu-1")
        wait_for(lambda: gone == ["eu-1"], what="eu-1's disengaged callbacks")
    finally:
        mgr.stop(10)


def test_a_handler_failing_on_a_leave_event_does_not_cut_the_clusters_teardown_short(
    make_envtest_server, caplog
):
    # the leave event is delivered while the controller lets go of the cluster: what its
    # handler raises is logged (naming the source and the cluster) and the teardown goes on to
    # its end (the disengaged callbacks run), as an informer's failing handler is said and
    # skipped
    import logging

    from mcruntime.handler import Funcs

    srv = make_envtest_server("eu-1")
    provider = Provider()
    mgr = mcruntime.Manager(provider=provider)

    def on_leave(event, queue):
        raise RuntimeError("bookkeeping failed")

    (
        mcruntime.controller_managed_by(mgr)
        .named("members")
        .for_("v1/ConfigMap")
        .watches(Engagements(Funcs(delete=on_leave)))
        .complete(lambda req: None)
    )
    with caplog.at_level(logging.ERROR, logger="mcruntime.source"):
        _join_and_leave(mgr, provider, srv, lambda: mgr.engaged_clusters() == ["eu-1"])
    (line,) = [r.getMessage() for r in caplog.records if r.name == "mcruntime.source"]
    assert line.startswith("cluster=eu-1 <controller 'members' source Engagements(): ")
    assert line.endswith("a predicate or the handler failed for the cluster's leave event")


def test_a_source_whose_handle_fails_to_stop_does_not_cut_the_clusters_teardown_short(
    make_envtest_server, caplog
):
    # a Source written by the user whose handle raises in stop(): said, and the controller's
    # other sources stop and the manager's teardown of the cluster runs to its end
    import logging

    class Handle:
        def wait_for_sync(self, timeout=None):
            return True

        def stop(self):
            raise RuntimeError("cannot close the feed")

        def __repr__(self):
            return "Handle(feed)"

    class Feed:
        def start(self, cluster_name, cluster, queue):
            return Handle()

        def informers(self, cluster):
            return ()

        def accepts(self, cluster_name):
            return True

    srv = make_envtest_server("eu-1")
    provider = Provider()
    mgr = mcruntime.Manager(provider=provider)
    ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("fed")
        .watches(Feed())
        .for_("v1/ConfigMap")
        .complete(lambda req: None)
    )
    with caplog.at_level(logging.ERROR, logger="mcruntime.controller"):
        _join_and_leave(mgr, provider, srv, lambda: ctrl.engaged_clusters() == ["eu-1"])
    lines = [r.getMessage() for r in caplog.records if r.name == "mcruntime.controller"]
    assert "controller=fed cluster=eu-1: stopping the source handle Handle(feed) failed" in lines
