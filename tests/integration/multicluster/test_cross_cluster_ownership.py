"""Cross-cluster ownership on an envtest fleet: the garbage collector and the owner handler.

Owners are ConfigMaps in the hub (the manager's local cluster); dependents are
ConfigMaps in the spokes and in the hub itself (an owner in the same cluster).
"""

from __future__ import annotations

import datetime
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import mcruntime
import mcruntime.controllerutil._gc as gc_module
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import (
    ANNOTATION_CLEARED,
    FINALIZER_FOREGROUND,
    LABEL_OWNER_UID,
    CrossClusterGarbageCollector,
    get_cross_cluster_owner,
    set_cross_cluster_owner,
    set_cross_cluster_propagation,
)
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from mcruntime.handler import enqueue_request_for_cross_cluster_owner, enqueue_request_for_object
from mcruntime.predicate import label_selector
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    CM,
    cluster_of,
    configmap,
    running,
    thread_names,
)

pytestmark = pytest.mark.timeout(60)

SPOKES = ("spoke-0", "spoke-1")
HOLD = "test.mcruntime.io/hold"


class Fleet:
    def __init__(self, make_server: Any) -> None:
        self.hub = make_server("hub")
        self.spokes = {n: make_server(n) for n in SPOKES}
        self.clients = {"": Cluster.from_kubeconfig(self.hub.kubeconfig(), name="writer")}
        for n, s in self.spokes.items():
            self.clients[n] = Cluster.from_kubeconfig(s.kubeconfig(), name=f"writer-{n}")

    def manager(self, **gc: Any) -> tuple[mcruntime.Manager, CrossClusterGarbageCollector]:
        provider = clusters.Provider()
        for n, s in self.spokes.items():
            provider.add(n, cluster_of(s, n))
        mgr = mcruntime.Manager(self.hub.kubeconfig(), provider=provider)
        options: dict[str, Any] = {
            "owner_kinds": [CM],
            "dependent_kinds": [CM],
            "interval": 0.1,
            "grace_period": 0,
            "call_timeout": 1.0,
            **gc,
        }
        collector = CrossClusterGarbageCollector(mgr, **options)
        mgr.add(collector)
        return mgr, collector

    def owner(self, name: str, propagation: str = "Background") -> dict[str, Any]:
        o = configmap(name)
        set_cross_cluster_propagation(o, propagation)  # type: ignore[arg-type]
        created: dict[str, Any] = self.clients[""].client.create(o)
        return created

    def dependents(self, owner: dict[str, Any], *, hold: str | None = None) -> None:
        for cluster, c in self.clients.items():
            d = configmap(f"{owner['metadata']['name']}-dep")
            set_cross_cluster_owner("", owner, d)
            if cluster == hold:
                d["metadata"]["finalizers"] = [HOLD]
            c.client.create(d)

    def get(self, cluster: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.clients[cluster].api_reader.get(CM, name, "default")
            return obj
        except NotFound:
            return None

    def gone_everywhere(self, name: str) -> bool:
        return all(self.get(c, name) is None for c in self.clients)

    def close(self) -> None:
        for c in self.clients.values():
            c.stop()


@pytest.fixture
def fleet(make_envtest_server: Any) -> Iterator[Fleet]:
    f = Fleet(make_envtest_server)
    yield f
    f.close()


def engaged(mgr: mcruntime.Manager) -> None:
    wait_for(lambda: mgr.engaged_clusters() == list(SPOKES), what="spokes engaged")


def passed_over_spoke_1(mgr: mcruntime.Manager, collector: CrossClusterGarbageCollector) -> None:
    engaged(mgr)
    wait_for(lambda: collector.passes.get("spoke-1", 0) > 0, what="a pass over spoke-1")


def test_deleting_the_owner_deletes_its_dependents_in_every_cluster(fleet: Fleet) -> None:
    mgr, _ = fleet.manager()
    with running(mgr):
        engaged(mgr)
        owner = fleet.owner("web")
        fleet.dependents(owner)
        other = fleet.owner("api")
        fleet.dependents(other)
        fleet.clients[""].client.delete(CM, "web", "default")
        wait_for(lambda: fleet.gone_everywhere("web-dep"), what="web's dependents gone")
        assert all(fleet.get(c, "api-dep") is not None for c in fleet.clients), (
            "a live owner's dependents stay"
        )


def test_foreground_keeps_the_owner_until_every_cluster_has_no_dependent_left(
    fleet: Fleet,
) -> None:
    mgr, _ = fleet.manager()
    with running(mgr):
        engaged(mgr)
        owner = fleet.owner("web", "Foreground")
        fleet.dependents(owner, hold="spoke-1")
        fleet.clients[""].client.delete(CM, "web", "default")
        wait_for(
            lambda: fleet.get("spoke-0", "web-dep") is None and fleet.get("", "web-dep") is None
        )

        # each cluster's dependents are deleted on their own: spoke-1's may come last
        def held_and_deleting() -> dict[str, Any] | None:
            obj = fleet.get("spoke-1", "web-dep")
            return obj if obj is not None and obj["metadata"].get("deletionTimestamp") else None

        held = wait_for(held_and_deleting, what="the held dependent being deleted")
        assert held is not None and HOLD in held["metadata"]["finalizers"], "its finalizer holds it"
        still = fleet.get("", "web")
        assert still is not None and FINALIZER_FOREGROUND in still["metadata"]["finalizers"]
        fleet.clients["spoke-1"].client.patch(
            CM, "web-dep", {"metadata": {"finalizers": None}}, "default"
        )
        wait_for(lambda: fleet.get("", "web") is None, what="owner gone once spoke-1 is clear")


def test_orphan_keeps_the_dependents_and_removes_their_owner_record(fleet: Fleet) -> None:
    mgr, _ = fleet.manager()
    with running(mgr):
        engaged(mgr)
        owner = fleet.owner("web", "Orphan")
        fleet.dependents(owner)
        fleet.clients[""].client.delete(CM, "web", "default")
        wait_for(lambda: fleet.get("", "web") is None, what="owner gone")
        for c in fleet.clients:
            dep = fleet.get(c, "web-dep")
            assert dep is not None, f"{c or 'hub'} kept its dependent"
            assert get_cross_cluster_owner(dep) is None
            assert LABEL_OWNER_UID not in (dep["metadata"].get("labels") or {})


def test_a_dependent_of_an_owner_recreated_under_the_same_name_is_collected(
    fleet: Fleet,
) -> None:
    mgr, _ = fleet.manager(grace_period=1.0)
    old = fleet.owner("web")
    fleet.dependents(old)
    fleet.clients[""].client.delete(CM, "web", "default")
    new = fleet.owner("web")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    with running(mgr):
        engaged(mgr)
        wait_for(lambda: fleet.get("spoke-0", "web-dep") is None, what="old uid's dependent gone")
        assert fleet.get("", "web") is not None, "the new owner stays"


@pytest.mark.parametrize("skew", [300.0, -7200.0])
def test_the_grace_period_of_a_dependent_without_owner_does_not_depend_on_the_operators_clock(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    # the operator's wall clock is off from the member clusters' (which wrote each
    # dependent's creationTimestamp): 5 min ahead skipped the grace, 2 h behind added 2 h
    class Skewed(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Any:
            return datetime.datetime.now(tz) + datetime.timedelta(seconds=skew)

    monkeypatch.setattr(gc_module, "datetime", Skewed, raising=False)
    mgr, collector = fleet.manager(grace_period=2.0)
    owner = fleet.owner("web")
    fleet.dependents(owner)
    fleet.clients[""].client.delete(CM, "web", "default")
    with running(mgr):
        engaged(mgr)
        wait_for(
            lambda: all(collector.passes.get(c, 0) >= 3 for c in fleet.clients),
            what="three passes over every cluster",
        )
        for c in fleet.clients:
            assert fleet.get(c, "web-dep") is not None, f"{c}: collected within its grace"
        wait_for(lambda: fleet.gone_everywhere("web-dep"), timeout=15, what="collected")


def test_a_cluster_down_during_the_owners_deletion_is_cleaned_once_it_is_back(
    fleet: Fleet,
) -> None:
    mgr, collector = fleet.manager()
    with running(mgr):
        engaged(mgr)
        owner = fleet.owner("web", "Foreground")
        fleet.dependents(owner)
        fleet.spokes["spoke-1"].stop()
        try:
            fleet.clients[""].client.delete(CM, "web", "default")
            wait_for(lambda: fleet.get("spoke-0", "web-dep") is None)
            before = collector.passes.get("", 0)
            wait_for(lambda: collector.passes.get("", 0) > before + 3, what="more passes")
            assert fleet.get("", "web") is not None, "the owner waits for the cluster that is down"
        finally:
            fleet.spokes["spoke-1"].start()
        wait_for(lambda: fleet.get("spoke-1", "web-dep") is None, what="spoke-1 cleaned")
        wait_for(lambda: fleet.get("", "web") is None, what="owner released")


def test_a_cluster_down_is_named_in_one_warning_per_failure_streak_and_one_info_when_back(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcruntime.gc")

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting="cluster=spoke-1 ", logger="mcruntime.gc")

    mgr, collector = fleet.manager()
    with running(mgr):
        passed_over_spoke_1(mgr, collector)
        fleet.spokes["spoke-1"].stop()
        try:
            wait_for(
                lambda: any("still failing (3)" in m for m in lines(logging.DEBUG)),
                what="three failed passes over spoke-1",
            )
            (warning,) = lines(logging.WARNING)
            assert warning.startswith(
                "cluster=spoke-1 garbage collection: listing ConfigMap failed: "
            )
            assert "; retrying at the next pass (every 0.1s); further failures" in warning
        finally:
            fleet.spokes["spoke-1"].start()
        wait_for(lambda: lines(logging.INFO), what="the recovery logged")
        (recovery,) = lines(logging.INFO)
        assert recovery.startswith(
            "cluster=spoke-1 garbage collection: listing ConfigMap works again after "
        )
        assert len(lines(logging.WARNING)) == 1
        others = [
            r.getMessage()
            for r in caplog.records
            if r.name == "mcruntime.gc" and r.levelno >= logging.WARNING
        ]
        assert others == [warning], "the other clusters' collection is not affected"


def test_an_owners_cluster_down_is_one_warning_however_many_owners_it_holds(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    # dependents in the hub whose owners are in spoke-0: the hub's passes read every owner
    caplog.set_level(logging.DEBUG, logger="mcruntime.gc")
    reading = "cluster=spoke-0 garbage collection: reading owner "

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting=reading, logger="mcruntime.gc")

    mgr, collector = fleet.manager()
    with running(mgr):
        engaged(mgr)
        for name in ("web", "api", "db"):
            owner = fleet.clients["spoke-0"].client.create(configmap(name))
            dependent = configmap(f"{name}-dep")
            set_cross_cluster_owner("spoke-0", owner, dependent)
            fleet.clients[""].client.create(dependent)
        before = collector.passes.get("", 0)
        wait_for(lambda: collector.passes.get("", 0) > before + 1, what="a pass over the hub")
        fleet.spokes["spoke-0"].stop()
        try:
            wait_for(
                lambda: len(lines(logging.WARNING) + lines(logging.DEBUG)) >= 6,
                what="owners read in vain in two passes",
            )
            (warning,) = lines(logging.WARNING)
            assert warning.startswith(f"{reading}ConfigMaps failed: [cluster spoke-0] ")
        finally:
            fleet.spokes["spoke-0"].start()
        wait_for(lambda: lines(logging.INFO), what="the recovery logged")
        assert lines(logging.INFO)[0].startswith(f"{reading}ConfigMaps works again after ")
        assert len(lines(logging.WARNING)) == 1
        assert fleet.get("", "web-dep") is not None, "an owner not read is not gone"


def _calling(thread_name: str, function: str) -> bool:
    """Whether the thread ``thread_name`` is inside a call of ``function`` now."""
    threads = [t for t in threading.enumerate() if t.name == thread_name]
    frame = sys._current_frames().get(threads[0].ident or 0) if threads else None
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def test_a_cluster_leaving_while_its_pass_lists_in_it_is_no_failure_logged(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """A cluster that left while the collector listed in it was a warning, "listing ConfigMap
    failed: [cluster spoke-1] the cluster left: ... cancelled (it was disengaged ...)",
    for what is no failure: its calls are cut because it left, and its worker stops."""
    caplog.set_level(logging.DEBUG, logger="mcruntime.gc")
    mgr, collector = fleet.manager(call_timeout=30.0)  # the hung list ends when spoke-1 leaves
    with running(mgr):
        passed_over_spoke_1(mgr, collector)
        fleet.spokes["spoke-1"].freeze()
        try:
            wait_for(
                lambda: _calling("mcruntime/gc/spoke-1", "list"),
                what="spoke-1's worker listing in the frozen spoke-1",
            )
            assert mgr.provider is not None
            mgr.provider.remove("spoke-1")  # type: ignore[attr-defined]
            wait_for(lambda: "spoke-1" not in collector.passes, what="spoke-1's worker stopped")
        finally:
            fleet.spokes["spoke-1"].thaw()
    problems = [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcruntime.gc" and r.levelno >= logging.WARNING
    ]
    assert problems == []


def test_a_dependent_edited_or_deleted_by_hand_enqueues_its_owner_and_is_repaired(
    fleet: Fleet,
) -> None:
    mgr, _ = fleet.manager()
    hub = mgr.get_cluster("")
    seen: list[Request] = []
    lock = threading.Lock()

    def reconcile(req: Request) -> None:
        with lock:
            seen.append(req)
        try:
            owner = hub.client.get(CM, req.name, req.namespace)
        except NotFound:
            return
        for name in mgr.engaged_clusters():
            c = mgr.get_cluster(name).client
            want = configmap(f"{req.name}-dep", **owner.get("data", {}))
            set_cross_cluster_owner("", owner, want)
            try:
                cur = c.get(CM, want["metadata"]["name"], "default")
            except NotFound:
                c.create(want)
                continue
            if cur.get("data") != want["data"]:
                cur["data"] = want["data"]
                c.update(cur)

    (
        mcruntime.controller_managed_by(mgr)
        .named("owners")
        .engage_with_local_cluster()
        .watches(
            CM,
            enqueue_request_for_object(),
            label_selector("!" + LABEL_OWNER_UID),
            cluster_filter=lambda n: n == "",
        )
        .watches(CM, enqueue_request_for_cross_cluster_owner(CM), cluster_filter=lambda n: n != "")
        .complete(reconcile)
    )
    with running(mgr):
        engaged(mgr)
        fleet.clients[""].client.create(configmap("web", color="blue"))
        wait_for(lambda: fleet.get("spoke-1", "web-dep"), what="dependent created")
        with lock:
            seen.clear()
        fleet.clients["spoke-1"].client.delete(CM, "web-dep", "default")
        wait_for(lambda: fleet.get("spoke-1", "web-dep"), what="re-created")
        with lock:
            assert Request("default", "web", "") in seen, "the owner's request names the hub"
        fleet.clients["spoke-0"].client.patch(CM, "web-dep", {"data": {"color": "red"}}, "default")
        wait_for(
            lambda: (fleet.get("spoke-0", "web-dep") or {}).get("data") == {"color": "blue"},
            what="edit repaired",
        )


def test_nothing_leaks_after_100_owners_are_created_and_deleted(fleet: Fleet) -> None:
    before = thread_names()
    mgr, collector = fleet.manager()
    with running(mgr):
        engaged(mgr)
        owners = [fleet.owner(f"o{i}", "Foreground" if i % 2 else "Background") for i in range(100)]
        for o in owners:
            d = configmap(f"{o['metadata']['name']}-dep")
            set_cross_cluster_owner("", o, d)
            fleet.clients["spoke-0"].client.create(d)
        for o in owners:
            fleet.clients[""].client.delete(CM, o["metadata"]["name"], "default")
        wait_for(lambda: not fleet.clients[""].api_reader.list(CM, "default"), what="owners gone")
        wait_for(
            lambda: not fleet.clients["spoke-0"].api_reader.list(CM, "default"),
            what="dependents gone",
        )
        gc = sorted(n for n in thread_names() if n.startswith("mcruntime/gc/"))
        assert gc == ["mcruntime/gc/local", "mcruntime/gc/spoke-0", "mcruntime/gc/spoke-1"]
    assert not collector.passes, "no worker left"
    assert thread_names() <= before


@pytest.mark.parametrize("policy", ["keep", "delete"])
def test_dependents_of_an_owner_whose_cluster_left_the_fleet_follow_the_policy(
    make_envtest_server: Any, policy: str
) -> None:
    hub = make_envtest_server("hub")
    spoke = make_envtest_server("spoke-0")
    provider = clusters.Provider()
    provider.add("spoke-0", cluster_of(spoke, "spoke-0"))
    mgr = mcruntime.Manager(hub.kubeconfig(), provider=provider)
    collector = CrossClusterGarbageCollector(
        mgr,
        owner_kinds=[CM],
        dependent_kinds=[CM],
        interval=0.05,
        grace_period=0,
        owner_cluster_gone=policy,  # type: ignore[arg-type]
        owner_cluster_gone_grace=0.3,
    )
    mgr.add(collector)
    writer = Cluster.from_kubeconfig(spoke.kubeconfig(), name="writer")
    local = Cluster.from_kubeconfig(hub.kubeconfig(), name="writer-hub")
    try:
        owner = writer.client.create(configmap("web"))
        dep = configmap("web-dep")
        set_cross_cluster_owner("spoke-0", owner, dep)
        local.client.create(dep)
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["spoke-0"])
            provider.remove("spoke-0")
            wait_for(lambda: not mgr.engaged_clusters(), what="spoke-0 left")
            before = collector.passes.get("", 0)
            wait_for(lambda: collector.passes.get("", 0) > before + 10, what="passes")
            left = local.api_reader.list(CM, "default", labels=LABEL_OWNER_UID)
            assert [d["metadata"]["name"] for d in left] == (
                [] if policy == "delete" else ["web-dep"]
            )
            assert not [n for n in thread_names() if n == "mcruntime/gc/spoke-0"], (
                "nothing of the departed cluster remains"
            )
            # clusters come and go daily, each name once: the collector keeps when it found
            # one gone only while a dependent's owner is in it
            gone = collector._gone_since  # noqa: SLF001
            if policy == "delete":
                wait_for(lambda: "spoke-0" not in gone, what="spoke-0 forgotten")
            else:
                assert "spoke-0" in gone
    finally:
        writer.stop()
        local.stop()


def test_a_cluster_down_since_the_start_holds_a_foreground_owner_until_it_is_back(
    fleet: Fleet,
) -> None:
    # spoke-1 down when the manager starts: a controller watching ConfigMaps there cannot
    # sync, so it is not engaged; the owner was released at once, its dependent left behind
    owner = fleet.owner("web", "Foreground")
    fleet.dependents(owner)
    fleet.spokes["spoke-1"].stop()
    mgr, collector = fleet.manager()

    def reconcile(req: Request) -> None:
        return None

    mcruntime.controller_managed_by(mgr).named("cms").for_(CM).complete(reconcile)
    try:
        with running(mgr):
            fleet.clients[""].client.delete(CM, "web", "default")
            wait_for(lambda: fleet.get("spoke-0", "web-dep") is None, what="spoke-0 cleaned")
            before = collector.passes.get("", 0)
            wait_for(lambda: collector.passes.get("", 0) > before + 3, what="more passes")
            assert mgr.engaged_clusters() == ["spoke-0"]
            assert fleet.get("", "web") is not None, "the owner waits for spoke-1"
            fleet.spokes["spoke-1"].start()
            wait_for(lambda: fleet.get("spoke-1", "web-dep") is None, what="spoke-1 cleaned")
            wait_for(lambda: fleet.get("", "web") is None, what="owner released")
    finally:
        if not fleet.spokes["spoke-1"].running:
            fleet.spokes["spoke-1"].start()


def test_a_cluster_not_engaged_when_the_owner_goes_is_cleaned_when_it_joins(
    make_envtest_server: Any,
) -> None:
    f = Fleet(make_envtest_server)
    provider = clusters.Provider()
    provider.add("spoke-0", cluster_of(f.spokes["spoke-0"], "spoke-0"))
    mgr = mcruntime.Manager(f.hub.kubeconfig(), provider=provider)
    mgr.add(
        CrossClusterGarbageCollector(
            mgr, owner_kinds=[CM], dependent_kinds=[CM], interval=0.05, grace_period=0
        )
    )
    try:
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["spoke-0"])
            owner = f.owner("web", "Foreground")
            f.dependents(owner)  # spoke-1 has one too, but is not in the fleet
            f.clients[""].client.delete(CM, "web", "default")
            wait_for(lambda: f.get("", "web") is None, what="owner waits for no outside cluster")
            assert f.get("spoke-1", "web-dep") is not None
            provider.add("spoke-1", cluster_of(f.spokes["spoke-1"], "spoke-1"))
            wait_for(lambda: f.get("spoke-1", "web-dep") is None, what="collected on joining")
    finally:
        f.close()


def test_a_dependent_kind_a_cluster_does_not_serve_does_not_hold_a_foreground_owner(
    fleet: Fleet,
) -> None:
    mgr, _ = fleet.manager(dependent_kinds=["example.mcruntime.io/v1/Nothing", CM])
    with running(mgr):
        engaged(mgr)
        owner = fleet.owner("web", "Foreground")
        fleet.dependents(owner)
        fleet.clients[""].client.delete(CM, "web", "default")
        wait_for(lambda: fleet.gone_everywhere("web-dep"), what="dependents gone")
        wait_for(lambda: fleet.get("", "web") is None, what="owner released")


def test_a_new_collector_carries_on_from_the_reports_in_the_objects(fleet: Fleet) -> None:
    owner = fleet.owner("web", "Foreground")
    fleet.dependents(owner, hold="spoke-1")

    def cleared() -> list[str]:
        obj = fleet.get("", "web") or {}
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CLEARED)
        return sorted(orjson.loads(raw)) if raw else []

    first, _ = fleet.manager()
    with running(first):
        engaged(first)
        fleet.clients[""].client.delete(CM, "web", "default")
        wait_for(lambda: cleared() == ["", "spoke-0"], what="two clusters reported")
    assert fleet.get("", "web") is not None, "held by spoke-1's dependent"
    fleet.clients["spoke-1"].client.patch(
        CM, "web-dep", {"metadata": {"finalizers": None}}, "default"
    )
    second, _ = fleet.manager()
    with running(second):
        wait_for(lambda: fleet.get("", "web") is None, what="released by the new collector")
