"""A provider written against the Protocols alone (no mcruntime base class, plain Event lifetimes)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound
from mcruntime.multicluster import Aware, Provider, ProviderRunnable
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


class PlainProvider:
    """Engages the clusters it is given with plain ``threading.Event`` lifetimes."""

    def __init__(self, clusters: dict[str, Cluster]) -> None:
        self.clusters = dict(clusters)
        self.lifetimes: dict[str, threading.Event] = {}
        self.indexes: list[tuple[Any, str, Any]] = []

    def get(self, cluster_name: str) -> Cluster:
        try:
            return self.clusters[cluster_name]
        except KeyError:
            raise ClusterNotFound(cluster_name) from None

    def index_field(self, kind: Any, field: str, fn: Any) -> None:
        self.indexes.append((kind, field, fn))
        for c in self.clusters.values():
            c.cache.index_field(kind, field, fn)

    def start(self, aware: Aware, stop: threading.Event) -> None:
        for name, cluster in self.clusters.items():
            self.lifetimes[name] = threading.Event()
            aware.engage(name, cluster, self.lifetimes[name])
        stop.wait()
        for ev in self.lifetimes.values():
            ev.set()


def test_a_protocol_only_provider_with_plain_event_lifetimes(make_envtest_fleet: Any) -> None:
    fleet = make_envtest_fleet(2)
    for srv in fleet:
        create_cms(srv, [f"cm-{srv.name}"])
    provider = PlainProvider({srv.name: cluster_of(srv, srv.name) for srv in fleet})
    assert isinstance(provider, Provider) and isinstance(provider, ProviderRunnable)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(
            lambda: (
                rec.seen()
                >= {("cluster-0", "default/cm-cluster-0"), ("cluster-1", "default/cm-cluster-1")}
            )
        )
        provider.lifetimes["cluster-1"].set()
        wait_for(
            lambda: mgr.engaged_clusters() == ["cluster-0"], what="a set Event ends the engagement"
        )
        wait_for(
            lambda: threads_for("cluster-1") == [],
            timeout=10,
            what="no thread of the ended cluster",
        )
        assert provider.clusters["cluster-1"].stopped
