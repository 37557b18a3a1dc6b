"""Cross-cluster patterns: watch in one cluster, enqueue for others, write into provider clusters."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from mcruntime.handler import enqueue_requests_from_map_func
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    running,
)

pytestmark = pytest.mark.timeout(60)


def _data(mgr: mcruntime.Manager, cluster: str, name: str) -> dict[str, str] | None:
    try:
        obj = mgr.get_cluster(cluster).api_reader.get(CM, name, "default")
    except NotFound:
        return None
    return dict(obj.get("data") or {})


def test_a_local_kind_fans_out_to_provider_clusters_and_the_reconciler_writes_there(
    make_envtest_server: Any,
) -> None:
    local = make_envtest_server("hub")
    spokes = {name: make_envtest_server(name) for name in ("spoke-0", "spoke-1")}
    provider = clusters.Provider()
    for name, srv in spokes.items():
        provider.add(name, cluster_of(srv, name))
    mgr = mcruntime.Manager(local.kubeconfig(), provider=provider)

    def to_every_spoke(obj: dict[str, Any]) -> list[Request]:
        return [Request("default", obj["metadata"]["name"], c) for c in mgr.engaged_clusters()]

    def propagate(req: Request) -> None:
        assert req.cluster_name, "requests name the provider cluster to write to"
        source = mgr.get_cluster("").client.get(CM, req.name, req.namespace)
        target = mgr.get_cluster(req.cluster_name).client
        try:
            current = target.get(CM, req.name, req.namespace)
        except NotFound:
            target.create(configmap(req.name, req.namespace, **source.get("data", {})))
            return
        current["data"] = source.get("data", {})
        target.update(current)

    rec = Recorder(propagate)
    (
        mcruntime.controller_managed_by(mgr)
        .named("propagate")
        .watches(
            CM,
            enqueue_requests_from_map_func(to_every_spoke, cross_cluster=True),
            cluster_filter=lambda name: name == "",
        )
        .engage_with_local_cluster(True)
        .complete(rec)
    )
    with running(mgr):
        wait_for(lambda: set(mgr.engaged_clusters()) == set(spokes))
        mgr.get_cluster("").client.create(configmap("settings", color="blue"))
        for name in spokes:
            wait_for(
                lambda n=name: _data(mgr, n, "settings") == {"color": "blue"},
                what=f"copy in {name}",
            )
        hub = mgr.get_cluster("").client
        cm = hub.get(CM, "settings", "default")
        cm["data"] = {"color": "green"}
        hub.update(cm)
        for name in spokes:
            wait_for(
                lambda n=name: _data(mgr, n, "settings") == {"color": "green"},
                what=f"update in {name}",
            )
        assert rec.clusters() == set(spokes), "the map function's clusters are kept, not re-stamped"


def test_a_provider_clusters_event_can_enqueue_a_request_for_another_cluster(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(2)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)

    def mirror(obj: dict[str, Any]) -> list[Request]:
        return [Request("default", f"mirror-of-{obj['metadata']['name']}", "cluster-1")]

    stamped, kept = Recorder(), Recorder()
    (
        mcruntime.controller_managed_by(mgr)
        .named("kept")
        .watches(
            CM,
            enqueue_requests_from_map_func(mirror, cross_cluster=True),
            cluster_filter=lambda n: n == "cluster-0",
        )
        .complete(kept)
    )
    (
        mcruntime.controller_managed_by(mgr)
        .named("stamped")
        .watches(
            CM, enqueue_requests_from_map_func(mirror), cluster_filter=lambda n: n == "cluster-0"
        )
        .complete(stamped)
    )
    with running(mgr):
        wait_for(lambda: set(mgr.engaged_clusters()) == {"cluster-0", "cluster-1"})
        mgr.get_cluster("cluster-0").client.create(configmap("a"))
        wait_for(lambda: kept.saw("cluster-1", "default/mirror-of-a"))
        # without cross_cluster the event's own cluster is stamped on every request
        wait_for(lambda: stamped.saw("cluster-0", "default/mirror-of-a"))
        assert kept.clusters() == {"cluster-1"}
        assert stamped.clusters() == {"cluster-0"}


def test_a_channel_source_delivers_per_engaged_cluster(make_envtest_fleet: Any) -> None:
    from mcruntime.source import Channel

    fleet = make_envtest_fleet(2)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    channel = Channel()
    rec = Recorder()
    mcruntime.controller_managed_by(mgr).named("from-code").watches(channel).complete(rec)
    obj = configmap("poke")
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0", "cluster-1"])
        wait_for(
            lambda: sorted(mgr.controllers[0].engaged_clusters()) == ["cluster-0", "cluster-1"]
        )
        channel.send(obj, "cluster-1")
        wait_for(lambda: rec.saw("cluster-1", "default/poke"))
        channel.send(obj, "elsewhere")  # no controller engaged it: dropped
        provider.remove("cluster-1")
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        channel.send({**obj, "metadata": {"name": "after", "namespace": "default"}}, "cluster-1")
        channel.send(obj, "cluster-0")
        wait_for(lambda: rec.saw("cluster-0", "default/poke"))
        assert rec.clusters() == {"cluster-0", "cluster-1"}
        assert not rec.saw("cluster-1", "default/after")


def test_a_reconcile_asking_for_a_cluster_that_is_not_there_fails_said_and_counted(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a Placement-style reconcile of cluster-0 names a member mistyped (or gone): retried as
    # any failure, and said; it was retried for ever without a line or an error counted
    fleet = make_envtest_fleet(1)
    provider = clusters.Provider()
    provider.add("cluster-0", cluster_of(fleet["cluster-0"], "cluster-0"))
    mgr = mcruntime.Manager(provider=provider)

    def reconcile(req: Request) -> None:
        mgr.get_cluster("cluster-9").client.get(CM, req.name, req.namespace)

    mcruntime.controller_managed_by(mgr).named("placement").for_(CM).complete(reconcile)
    errors = {"controller": "placement", "cluster": "cluster-0"}
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        mgr.get_cluster("cluster-0").client.create(configmap("p"))
        wait_for(
            lambda: (
                (mgr.metrics.sample("controller_runtime_reconcile_errors_total", errors) or 0) >= 2
            ),
            what="two failures counted",
        )
    failed = logged(caplog, logging.ERROR, starting="controller=placement cluster=cluster-0 ")
    assert failed and "request=default/p: reconcile failed (retry " in failed[0], failed
    assert failed[0].endswith("ClusterNotFound: cluster 'cluster-9' is not engaged"), failed
