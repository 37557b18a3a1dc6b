"""The cross-cluster garbage collector with sharded replicas: each collects the clusters it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import orjson
import pytest

from mcruntime.cluster import Cluster
from mcruntime.controllerutil import (
    ANNOTATION_CLEARED,
    CrossClusterGarbageCollector,
    set_cross_cluster_owner,
    set_cross_cluster_propagation,
)
from mcruntime.envtest import APIServer, Fleet, wait_for
from mcruntime.errors import NotFound
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.manager.coordinator import Sharded
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(60)

CM = "v1/ConfigMap"
HOLD = "test.mcruntime.io/hold"
TIMINGS: dict[str, float] = {
    "lease_duration": 2.0,
    "renew_period": 0.5,
    "renew_deadline": 1.3,
    "probe_interval": 0.5,
}


class Replica:
    def __init__(self, mgmt: APIServer, fleet: Fleet, peer: str) -> None:
        provider = Provider()
        for s in fleet:
            provider.add(s.name, Cluster.from_kubeconfig(s.kubeconfig(), name=s.name))
        self.coordinator = Sharded(namespace="default", peer_id=peer, **TIMINGS)
        self.mgr = Manager(
            mgmt.kubeconfig(),
            provider=provider,
            options=ManagerOptions(coordinator=self.coordinator, graceful_shutdown_timeout=5),
        )
        self.gc = CrossClusterGarbageCollector(
            self.mgr,
            owner_kinds=[CM],
            dependent_kinds=[CM],
            interval=0.1,
            grace_period=0,
            call_timeout=1.0,
        )
        self.mgr.add(self.gc)


@pytest.fixture
def setup(
    make_envtest_server: Callable[..., APIServer], make_envtest_fleet: Callable[..., Fleet]
) -> Iterator[tuple[APIServer, Fleet, list[Replica]]]:
    mgmt = make_envtest_server("mgmt")
    fleet = make_envtest_fleet(4, prefix="gc")
    replicas = [Replica(mgmt, fleet, "a"), Replica(mgmt, fleet, "b")]
    try:
        yield mgmt, fleet, replicas
    finally:
        for r in replicas:
            r.mgr.stop(5)


def test_sharded_replicas_each_collect_their_clusters_and_the_owner_waits_for_all(
    setup: tuple[APIServer, Fleet, list[Replica]],
) -> None:
    mgmt, fleet, (a, b) = setup
    hub = Cluster.from_kubeconfig(mgmt.kubeconfig(), name="writer")
    spokes = {s.name: Cluster.from_kubeconfig(s.kubeconfig(), name=f"w-{s.name}") for s in fleet}
    try:
        owner = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "default"},
        }
        set_cross_cluster_propagation(owner, "Foreground")
        owner = hub.client.create(owner)
        for r in (a, b):
            r.mgr.start()
        wait_for(
            lambda: (
                a.coordinator.owned()
                and b.coordinator.owned()
                and sorted(a.coordinator.owned() + b.coordinator.owned()) == sorted(fleet.names)
            ),
            what="clusters split across both replicas",
        )
        held = b.coordinator.owned()[0]
        for name, c in spokes.items():
            d = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "web-dep", "namespace": "default"},
            }
            set_cross_cluster_owner("", owner, d)
            if name == held:
                d["metadata"]["finalizers"] = [HOLD]
            c.client.create(d)
        for r in (a, b):  # each replica runs collectors only for its own clusters
            wait_for(lambda r=r: set(r.gc.passes) == {"", *r.coordinator.owned()})
        hub.client.delete(CM, "web", "default")

        def cleared() -> set[str]:
            obj = hub.api_reader.get(CM, "web", "default")
            raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_CLEARED)
            return set(orjson.loads(raw)) if raw else set()

        others = {"", *fleet.names} - {held}
        wait_for(lambda: cleared() == others, what="every other cluster reported")
        assert hub.api_reader.get(CM, "web", "default")["metadata"]["finalizers"], (
            "the owner waits for the held cluster"
        )
        spokes[held].client.patch(CM, "web-dep", {"metadata": {"finalizers": None}}, "default")

        def owner_gone() -> bool:
            try:
                hub.api_reader.get(CM, "web", "default")
            except NotFound:
                return True
            return False

        wait_for(owner_gone, what="owner released once every cluster reported")
        for c in spokes.values():
            with pytest.raises(NotFound):
                c.api_reader.get(CM, "web-dep", "default")
    finally:
        hub.stop()
        for c in spokes.values():
            c.stop()
