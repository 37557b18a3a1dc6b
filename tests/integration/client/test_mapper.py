"""RESTMapper against an embedded API server: discovery, CRDs installed later, helpful misses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from mcruntime.client import Client, GroupVersionKind, RESTMapper
from mcruntime.envtest import wait_for
from mcruntime.errors import NoKindMatch, NotFound

pytestmark = pytest.mark.timeout(60)


def test_core_and_group_kinds_map_to_resources(mapper: RESTMapper) -> None:
    cm = mapper.mapping("v1/ConfigMap")
    assert (cm.resource, cm.namespaced) == ("configmaps", True)
    assert {"get", "list", "watch", "create"} <= cm.verbs
    assert mapper.mapping(V1ConfigMap) == cm
    ns = mapper.mapping(GroupVersionKind("", "v1", "Namespace"))
    assert (ns.resource, ns.namespaced) == ("namespaces", False)
    assert "status" in ns.subresources
    assert mapper.mapping_for_resource("", "v1", "configmaps") == cm


def test_wrong_kind_suggests_close_matches(mapper: RESTMapper) -> None:
    with pytest.raises(NoKindMatch) as err:
        mapper.mapping("v1/Configmap")
    assert "did you mean 'v1/ConfigMap'" in str(err.value)
    assert err.value.kind == "v1/Configmap" and "c1" in str(err.value)
    with pytest.raises(NoKindMatch, match="no kind 'nope.io/v1/Thing'"):
        mapper.mapping("nope.io/v1/Thing")


def test_a_custom_kind_not_served_asks_for_its_crd(mapper: RESTMapper) -> None:
    with pytest.raises(NoKindMatch) as err:
        mapper.mapping("demo.example.com/v1/Widget")
    assert str(err.value).endswith(
        "no kind 'demo.example.com/v1/Widget' is served by cluster c1: "
        "is its CustomResourceDefinition installed (and Established)?"
    )
    with pytest.raises(NoKindMatch, match="is its CustomResourceDefinition installed"):
        mapper.mapping("gateway.networking.k8s.io/v1/Gateway")  # a CRD, though in k8s.io
    with pytest.raises(NoKindMatch) as err:  # a built-in group: no CRD to install
        mapper.mapping("networking.k8s.io/v1/Gateway")
    assert "CustomResourceDefinition" not in str(err.value)
    with pytest.raises(NoKindMatch) as err:  # an aggregated API (metrics-server): no CRD
        mapper.mapping("metrics.k8s.io/v1beta1/PodMetrics")
    assert str(err.value).endswith(
        "is the API server that serves it (its APIService) installed and available?"
    )


def test_crd_created_later_is_found_after_refresh(
    mapper: RESTMapper, client: Client, wait_until: Any, make_crd: Any
) -> None:
    crd = make_crd("later.example.com", "Gadget", "gadgets")
    with pytest.raises(NoKindMatch):
        mapper.mapping("later.example.com/v1/Gadget")
    client.create(crd)

    def found() -> Any:
        try:
            return mapper.mapping("later.example.com/v1/Gadget")
        except NoKindMatch:
            return None

    m = wait_until(found, timeout=10)
    assert (m.resource, m.namespaced) == ("gadgets", True)
    with pytest.raises(NoKindMatch) as err:
        mapper.mapping("v1/Gadget")
    assert "later.example.com/v1/Gadget" in str(err.value)


def test_reset_forgets_discovery(mapper: RESTMapper) -> None:
    mapper.mapping("v1/ConfigMap")
    mapper.reset()
    assert mapper.mapping("v1/ConfigMap").resource == "configmaps"


def test_clusters_serving_the_same_api_share_tables_and_different_apis_stay_apart(
    make_crd: Any, wait_until: Any
) -> None:
    from mcruntime import Cluster
    from mcruntime.envtest import APIServer

    servers = [APIServer(f"share-{i}").start() for i in range(3)]
    clusters = [Cluster.from_kubeconfig(s.kubeconfig(), name=s.name) for s in servers]
    try:
        a, b, c = (cl.rest_mapper for cl in clusters)
        cm = a.mapping("v1/ConfigMap")
        # the same discovery answer: one table for every cluster
        assert b.mapping("v1/ConfigMap") is cm
        assert b.mapping_for_resource("", "v1", "configmap") is cm
        # a group-version served by one cluster only (a CRD in cluster b) ...
        clusters[1].client.create(make_crd("only-b.example.com", "Gizmo", "gizmos"))

        def found() -> Any:
            try:
                return b.mapping("only-b.example.com/v1/Gizmo")
            except NoKindMatch:
                return None

        gizmo = wait_until(found, timeout=10)
        assert (gizmo.resource, gizmo.namespaced) == ("gizmos", True)
        # ... is not served by the others, although b's table of it exists
        for other in (a, c):
            with pytest.raises(NoKindMatch):
                other.mapping("only-b.example.com/v1/Gizmo")
            with pytest.raises(NoKindMatch):
                other.mapping_for_resource("only-b.example.com", "v1", "gizmos")
        # the same group-version with different resources in two clusters: each its own
        clusters[2].client.create(make_crd("only-b.example.com", "Gadget", "gadgets"))

        def found_c() -> Any:
            try:
                return c.mapping("only-b.example.com/v1/Gadget")
            except NoKindMatch:
                return None

        gadget = wait_until(found_c, timeout=10)
        assert gadget.resource == "gadgets"
        with pytest.raises(NoKindMatch):
            c.mapping("only-b.example.com/v1/Gizmo")
        with pytest.raises(NoKindMatch):
            b.mapping("only-b.example.com/v1/Gadget")
        assert b.mapping("only-b.example.com/v1/Gizmo") is gizmo
        # the core group is still shared by all three
        assert c.mapping("v1/ConfigMap") is cm
    finally:
        for cl in clusters:
            cl.stop()
        for s in servers:
            s.close()


def test_kinds_every_server_serves_map_without_a_request_and_others_ask_discovery() -> None:
    from mcruntime import Cluster
    from mcruntime.client import deadline
    from mcruntime.envtest import APIServer
    from mcruntime.errors import DeadlineExceeded

    server = APIServer("well-known").start()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name=server.name)
    try:
        mapper = cluster.rest_mapper
        discovery = cluster.client.rest.request("GET", "/api/v1")["resources"]
        served = {r["kind"]: r for r in discovery if "/" not in r["name"]}
        mapper.reset()
        server.freeze()  # a hung server: any request would wait for its deadline
        for kind in ("ConfigMap", "Secret", "ServiceAccount", "Event", "Namespace"):
            m = mapper.mapping(f"v1/{kind}")
            # what the server's own discovery says (envtest follows kube-apiserver)
            assert m.resource == served[kind]["name"] and m.namespaced == served[kind]["namespaced"]
        assert mapper.mapping_for_resource("", "v1", "secret").gvk.kind == "Secret"
        assert {"status", "finalize"} <= mapper.mapping("v1/Namespace").subresources
        with pytest.raises(DeadlineExceeded), deadline(0.3):  # any other kind asks the cluster
            mapper.mapping("v1/Pod")
        server.thaw()
        assert mapper.mapping("v1/Pod").resource == "pods"
    finally:
        cluster.stop()
        server.close()


def test_cancelling_a_reset_callback_does_not_wait_for_a_discovery_in_flight(
    make_envtest_server: Any,
) -> None:
    # a cluster that leaves cancels its engagement's callback while its discovery of a kind
    # waits on the hung server: the cancel must not wait for that request's deadline
    import contextlib
    import sys
    import threading
    import time

    from mcruntime.cluster import Cluster
    from mcruntime.envtest import wait_for

    srv = make_envtest_server("hung")
    cluster = Cluster.from_kubeconfig(srv.kubeconfig(), name="hung")
    mapper = cluster.rest_mapper
    cancel = mapper.on_reset(lambda: None)
    srv.freeze()

    def ask() -> None:  # answered once thawed: the kind is not served
        with contextlib.suppress(NoKindMatch):
            mapper.mapping("hung.example.com/v1/Thing")

    asking = threading.Thread(target=ask, daemon=True, name="discovery")

    def in_discovery() -> bool:  # the asking thread waits in the mapper's fetch (its lock held)
        frame = sys._current_frames().get(asking.ident or 0)
        while frame is not None:
            if frame.f_code.co_name == "_fetch":
                return True
            frame = frame.f_back
        return False

    try:
        asking.start()
        wait_for(in_discovery, timeout=5, what="discovery in flight")
        began = time.monotonic()
        cancel()
        took = time.monotonic() - began
        assert took < 0.5, f"the cancel waited {took:.1f}s for the discovery"
    finally:
        srv.thaw()
        asking.join(10)
        cluster.stop()


def test_a_version_no_longer_served_is_no_kind_match_not_a_deleted_object(
    make_envtest_server: Any, make_crd: Any
) -> None:
    from mcruntime import Cluster

    server = make_envtest_server("eu-1")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-1")
    try:
        c = cluster.uncached_client
        crd = make_crd("retire.example.com", "Widget", "widgets")
        v1 = crd["spec"]["versions"][0]
        crd["spec"]["versions"] = [v1, {**v1, "name": "v2", "storage": False}]
        c.create(crd)
        w1 = {"apiVersion": "retire.example.com/v1", "kind": "Widget"}
        w1["metadata"] = {"name": "w1", "namespace": "default"}
        wait_for(lambda: c.create(w1), timeout=10, ignore=NoKindMatch)
        assert c.get("retire.example.com/v1/Widget", "w1", "default")["metadata"]["name"] == "w1"
        with pytest.raises(NotFound):  # a missing object: still NotFound
            c.get("retire.example.com/v1/Widget", "w2", "default")

        live = c.get("apiextensions.k8s.io/v1/CustomResourceDefinition", crd["metadata"]["name"])
        live["spec"]["versions"][0].update(served=False, storage=False)
        live["spec"]["versions"][1].update(storage=True)
        c.update(live)

        def retired() -> bool:  # a NotFound (the object "deleted") fails the test at once
            try:
                c.get("retire.example.com/v1/Widget", "w1", "default")
            except NoKindMatch:
                return True
            return False

        wait_for(retired, timeout=10)
        with pytest.raises(NoKindMatch) as err:
            c.list("retire.example.com/v1/Widget", "default")
        assert "did you mean 'retire.example.com/v2/Widget'?" in str(err.value)
        assert c.get("retire.example.com/v2/Widget", "w1", "default")["metadata"]["name"] == "w1"
    finally:
        cluster.stop()


_RETIRED = "retire.example.com/v1/Widget"

#: every write of the client, each on the object w1 of the retired version
_WRITES: dict[str, Callable[[Client, dict[str, Any]], Any]] = {
    "create": lambda c, w: c.create({**w, "metadata": {"name": "w2", "namespace": "default"}}),
    "update": lambda c, w: c.update(w),
    "update_status": lambda c, w: c.update_status({**w, "status": {"ready": True}}),
    "patch": lambda c, w: c.patch(_RETIRED, "w1", {"metadata": {"labels": {"a": "b"}}}, "default"),
    "patch_status": lambda c, w: c.patch_status(_RETIRED, "w1", {"status": {"ok": 1}}, "default"),
    "apply": lambda c, w: c.apply(
        {"apiVersion": w["apiVersion"], "kind": "Widget", "metadata": w["metadata"]},
        field_manager="test",
    ),
    "delete": lambda c, w: c.delete(_RETIRED, "w1", "default"),
    "delete(obj)": lambda c, w: c.delete(w),
    "delete_all_of": lambda c, w: c.delete_all_of(_RETIRED, "default"),
    "pages": lambda c, w: next(iter(c.api_reader.pages(_RETIRED, "default"))),
}


def _served_versions(client: Client) -> list[str]:
    """The versions of retire.example.com the server's discovery lists."""
    group = client.rest.request("GET", "/apis/retire.example.com", expect_object=True)
    return [v["version"] for v in group["versions"]]


@contextlib.contextmanager
def _stale_writer(
    make_envtest_server: Any,
    crd: dict[str, Any],
    kind: str,
    upgrade: Callable[[dict[str, Any]], None],
    upgraded: Callable[[Client], bool],
) -> Iterator[tuple[Client, Client, dict[str, Any]]]:
    """A server with ``crd`` and its object w1 of ``kind``; a client (the second) that maps
    ``kind``, then ``upgrade(spec)`` of the live CRD, until ``upgraded(first client)``: the
    second client's mapping is from before the upgrade. Yields both clients and w1."""
    from mcruntime import Cluster

    server = make_envtest_server("eu-1")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-1")
    other = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-1")
    try:
        c = cluster.uncached_client
        c.create(crd)
        group_version, _, name = kind.rpartition("/")
        w1: dict[str, Any] = {"apiVersion": group_version, "kind": name}
        w1["metadata"] = {"name": "w1", "namespace": "default"}
        w1 = wait_for(lambda: c.create(w1), timeout=10, ignore=NoKindMatch)
        writer = other.uncached_client
        writer.mapping(kind)  # it maps the kind now, and keeps that mapping
        live = c.get("apiextensions.k8s.io/v1/CustomResourceDefinition", crd["metadata"]["name"])
        upgrade(live["spec"])
        c.update(live)
        wait_for(lambda: upgraded(c), timeout=10, what="the upgrade in discovery")
        yield c, writer, w1
    finally:
        other.stop()
        cluster.stop()


def _retire_v1(spec: dict[str, Any]) -> None:
    spec["versions"][0].update(served=False, storage=False)
    spec["versions"][1].update(storage=True)


@pytest.mark.parametrize("write", list(_WRITES))
def test_a_write_to_a_version_no_longer_served_is_no_kind_match_not_a_missing_object(
    make_envtest_server: Any, make_crd: Any, write: str
) -> None:
    # the client mapped v1 before the CRD stopped serving it: the server's 404 for the path
    # names no object, and a reconciler's `with ignore_not_found(): client.delete(...)`
    # would take the child for deleted (and an update for an object gone) while it is live
    from mcruntime.errors import ignore_not_found

    crd = make_crd("retire.example.com", "Widget", "widgets")
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [v1, {**v1, "name": "v2", "storage": False}]
    with _stale_writer(
        make_envtest_server, crd, _RETIRED, _retire_v1, lambda c: "v1" not in _served_versions(c)
    ) as (c, writer, w1):
        with pytest.raises(NoKindMatch) as err, ignore_not_found():
            _WRITES[write](writer, w1)
        assert "did you mean 'retire.example.com/v2/Widget'?" in str(err.value)
        assert err.value.cluster_name == "eu-1"
        # and nothing was written: w1 is as it was, and there is no w2
        now = c.get("retire.example.com/v2/Widget", "w1", "default")
        assert now["metadata"]["resourceVersion"] == w1["metadata"]["resourceVersion"]
        assert [o["metadata"]["name"] for o in c.list("retire.example.com/v2/Widget")] == ["w1"]


def test_a_status_subresource_an_upgrade_removed_is_named_missing_not_a_missing_object(
    make_envtest_server: Any, make_crd: Any
) -> None:
    # the client's mapping lists `status` from before the CRD's version dropped it
    def resources(c: Client) -> list[str]:
        doc = c.rest.request("GET", "/apis/nostatus.example.com/v1", expect_object=True)
        return [r["name"] for r in doc["resources"]]

    crd = make_crd("nostatus.example.com", "Widget", "widgets")
    with _stale_writer(
        make_envtest_server,
        crd,
        "nostatus.example.com/v1/Widget",
        lambda spec: spec["versions"][0].pop("subresources"),
        lambda c: "widgets/status" not in resources(c),
    ) as (_c, writer, w1):
        assert "status" in writer.mapping("nostatus.example.com/v1/Widget").subresources
        with pytest.raises(NotFound, match="widgets has no 'status' subresource"):
            writer.update_status({**w1, "status": {"ready": True}})
