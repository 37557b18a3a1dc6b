"""The ``namespace`` and ``multi`` providers under a running manager."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound, NotFound
from mcruntime.providers import clusters, multi, namespace
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_namespaces_are_virtual_clusters_with_scoped_clients(envtest_server: Any) -> None:
    admin = cluster_of(envtest_server, "admin")
    try:
        for ns in ("team-a", "team-b"):
            admin.client.create(_namespace(ns, tenant="yes"))
            admin.client.create(configmap("own", ns, owner=ns))
        admin.client.create(configmap("outside", "default"))
        provider = namespace.Provider(
            cluster_of(envtest_server, "host"), label_selector="tenant=yes"
        )
        mgr = mcruntime.Manager(provider=provider)

        def reconcile(req: mcruntime.Request) -> None:
            cm = mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
            assert cm["metadata"]["namespace"] == req.cluster_name

        rec = Recorder(reconcile)
        configmap_controller(mgr, rec)
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["team-a", "team-b"])
            wait_for(lambda: rec.seen() >= {("team-a", "team-a/own"), ("team-b", "team-b/own")})
            assert rec.clusters() == {"team-a", "team-b"}, (
                "only the virtual clusters' namespaces are cached"
            )

            team_a = mgr.get_cluster("team-a").client
            # namespaced calls default to the virtual cluster's namespace and refuse the others
            created = team_a.create(configmap("made-here", ""))
            assert created["metadata"]["namespace"] == "team-a"
            wait_for(lambda: rec.saw("team-a", "team-a/made-here"))
            assert team_a.get(CM, "made-here")["metadata"]["namespace"] == "team-a"
            with pytest.raises(PermissionError):
                team_a.get(CM, "own", "team-b")
            with pytest.raises(PermissionError):
                team_a.create(configmap("escape", "team-b"))
            assert {o["metadata"]["namespace"] for o in team_a.list(CM)} == {"team-a"}
            # typed objects are confined too, and come back typed
            with pytest.raises(PermissionError):
                team_a.create(V1ConfigMap(metadata=V1ObjectMeta(name="escape", namespace="team-b")))
            typed = team_a.create(V1ConfigMap(metadata=V1ObjectMeta(name="typed"), data={"a": "b"}))
            assert isinstance(typed, V1ConfigMap) and typed.metadata.namespace == "team-a"
            typed.data = {"a": "c"}
            assert team_a.update(typed).data == {"a": "c"}
            assert team_a.mapping(CM).namespaced
            # every write is confined, call options pass through, a field manager keeps it
            with pytest.raises(PermissionError):
                team_a.apply(configmap("escape", "team-b"), field_manager="t")
            owned = team_a.with_field_manager("tenant-op")
            applied = owned.apply(configmap("applied", ""), dry_run=True)
            assert applied["metadata"]["namespace"] == "team-a"
            assert applied["metadata"]["managedFields"][0]["manager"] == "tenant-op"
            with pytest.raises(PermissionError):
                owned.create(configmap("escape", "team-b"))
            assert team_a.get(CM, "made-here", timeout=5)["metadata"]["name"] == "made-here"
            with pytest.raises(PermissionError):
                team_a.delete_all_of(CM, "team-b")
            team_a.delete_all_of(CM, labels={"none": "such"})
            # delete(obj) is confined like the other writes
            with pytest.raises(PermissionError):
                team_a.delete(configmap("own", "team-b"))
            with pytest.raises(PermissionError):  # not team-a's "own" instead
                team_a.delete(configmap("own", ""), namespace="team-b")
            assert team_a.get(CM, "own")["metadata"]["namespace"] == "team-a"
            team_a.delete(team_a.create(configmap("short-lived", "")))
            with pytest.raises(PermissionError):
                team_a.subresource("token").create("v1/ServiceAccount", "default", {}, "team-b")

            admin.client.create(_namespace("team-c", tenant="yes"))
            admin.client.create(configmap("own", "team-c"))
            wait_for(
                lambda: rec.saw("team-c", "team-c/own"),
                what="a namespace created at run time engaged",
            )

            admin.client.delete("v1/Namespace", "team-b")
            wait_for(
                lambda: "team-b" not in mgr.engaged_clusters(),
                what="a deleted namespace disengaged",
            )
            with pytest.raises(ClusterNotFound):
                mgr.get_cluster("team-b")
            wait_for(
                lambda: threads_for("team-b") == [],
                timeout=10,
                what="the virtual cluster's threads gone",
            )
            assert mgr.engaged_clusters() == ["team-a", "team-c"]
    finally:
        admin.stop()


def test_multi_provider_names_clusters_prefix_hash_name(make_envtest_fleet: Any) -> None:
    fleet = make_envtest_fleet(3)
    eu, us = clusters.Provider(), clusters.Provider()
    eu.add("cluster-0", cluster_of(fleet["cluster-0"], "cluster-0"))
    eu.add("cluster-1", cluster_of(fleet["cluster-1"], "cluster-1"))
    us.add("cluster-0", cluster_of(fleet["cluster-2"], "cluster-0"))
    provider = multi.Provider({"eu": eu, "us": us})
    mgr = mcruntime.Manager(provider=provider)
    mgr.get_field_indexer().index_field(
        CM, "data.owner", lambda o: (o.get("data") or {}).get("owner")
    )
    rec = Recorder(
        lambda req: mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
    )
    configmap_controller(mgr, rec)
    with running(mgr):
        names = ["eu#cluster-0", "eu#cluster-1", "us#cluster-0"]
        wait_for(lambda: mgr.engaged_clusters() == names)
        assert provider.get("us#cluster-0") is us.get("cluster-0")
        # each engaged under its prefixed name, which its errors say
        assert [mgr.get_cluster(n).name for n in names] == names
        with pytest.raises(NotFound, match=r"^\[cluster us#cluster-0\] "):
            mgr.get_cluster("us#cluster-0").api_reader.get(CM, "none", "default")
        with pytest.raises(ClusterNotFound):
            provider.get("cluster-0")
        with pytest.raises(ClusterNotFound):
            provider.get("asia#cluster-0")
        for name in names:
            mgr.get_cluster(name).client.create(configmap(f"for-{name.replace('#', '-')}"))
        for name in names:
            wait_for(lambda n=name: rec.saw(n, f"default/for-{n.replace('#', '-')}"))
        # a provider added at run time and a cluster added to a child engage under the prefix
        asia = clusters.Provider()
        provider.add_provider("asia", asia)
        extra = fleet.add("cluster-3")
        asia.add("x", Cluster.from_kubeconfig(extra.kubeconfig(), name="x"))
        wait_for(lambda: "asia#x" in mgr.engaged_clusters())
        for name in ("eu#cluster-1", "asia#x"):
            client = mgr.get_cluster(name).client
            client.create(configmap("owned", owner="alice"))
            wait_for(
                lambda c=client: (
                    [o["metadata"]["name"] for o in c.list(CM, index=("data.owner", "alice"))]
                    == ["owned"]
                ),
                what=f"the index answers on {name}",
            )
        eu.remove("cluster-1")
        wait_for(lambda: mgr.engaged_clusters() == ["asia#x", "eu#cluster-0", "us#cluster-0"])


def test_a_deleted_namespace_s_cluster_ends_without_holding_up_the_other_watches(
    envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the provider removes the cluster from its informer's handler, on the thread that reads
    # every watch of the process: the cluster's own watches are read there too, so ending it
    # there waited for itself (5 s, every cluster's events held up meanwhile)
    admin = cluster_of(envtest_server, "admin")
    try:
        for ns in ("team-a", "team-b"):
            admin.client.create(_namespace(ns, tenant="yes"))
        provider = namespace.Provider(
            cluster_of(envtest_server, "host"), label_selector="tenant=yes"
        )
        mgr = mcruntime.Manager(provider=provider)
        rec = Recorder()
        configmap_controller(mgr, rec)
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["team-a", "team-b"], what="engaged")
            mgr.get_cluster("team-b").client.list(CM)  # (its informer runs)
            admin.client.delete("v1/Namespace", "team-b")
            wait_for(lambda: "team-b" not in provider, what="team-b removed by the provider")
            admin.client.create(configmap("after", "team-a"))
            wait_for(
                lambda: rec.saw("team-a", "team-a/after"),
                timeout=2,
                what="another cluster's event handled at once",
            )
            wait_for(lambda: threads_for("team-b") == [], timeout=2, what="team-b's threads gone")
        assert not [r for r in caplog.records if "did not stop within" in r.getMessage()]
    finally:
        admin.stop()


@pytest.mark.parametrize("prefix", ["", "t#"], ids=["alone", "under multi"])
def test_every_client_of_a_virtual_cluster_is_confined_to_its_namespace(
    envtest_server: Any, prefix: str
) -> None:
    # the API reader and the uncached client reached every namespace: one tenant read,
    # listed and deleted another's objects through them. Under `multi` a virtual cluster is
    # engaged (and renamed) as t#team-a: still confined to team-a
    admin = cluster_of(envtest_server, "admin")
    try:
        for ns in ("team-a", "team-b"):
            admin.client.create(_namespace(ns, tenant="yes"))
            admin.client.create(configmap("own", ns))
        provider: Any = namespace.Provider(
            cluster_of(envtest_server, "host"), label_selector="tenant=yes"
        )
        if prefix:
            provider = multi.Provider({prefix[:-1]: provider})
        mgr = mcruntime.Manager(provider=provider)
        configmap_controller(mgr, Recorder())
        a, b = f"{prefix}team-a", f"{prefix}team-b"
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == [a, b], what="engaged")
            team_a = mgr.get_cluster(a)
            assert team_a.name == a
            clone = team_a.clone()  # a clone (a shard's reader, an engagement again) alike
            clone.start()
            for cluster in (team_a, clone):
                readers = {
                    "get_api_reader": mgr.get_api_reader(a),
                    "api_reader": cluster.api_reader,
                    "client.api_reader": cluster.client.api_reader,
                    "client.reader": cluster.client.reader,
                    "uncached_client": cluster.uncached_client,
                }
                for what, reader in readers.items():
                    with pytest.raises(PermissionError, match="cannot reach namespace 'team-b'"):
                        reader.get(CM, "own", "team-b")
                    with pytest.raises(PermissionError, match="cannot reach namespace 'team-b'"):
                        reader.list(CM, "team-b")
                    listed = {o["metadata"]["namespace"] for o in reader.list(CM)}
                    assert listed == {"team-a"}, what
                    assert reader.get(CM, "own")["metadata"]["namespace"] == "team-a", what
                with pytest.raises(PermissionError):
                    next(cluster.api_reader.pages(CM, "team-b"))
                pages = list(cluster.api_reader.pages(CM))
                assert {o["metadata"]["namespace"] for p in pages for o in p.items} == {"team-a"}
                uncached = cluster.uncached_client
                with pytest.raises(PermissionError):
                    uncached.delete(CM, "own", "team-b")
                with pytest.raises(PermissionError):
                    uncached.create(configmap("escape", "team-b"))
                with pytest.raises(PermissionError):
                    asyncio.run(cluster.aclient.get(CM, "own", "team-b"))
                with pytest.raises(PermissionError):
                    asyncio.run(cluster.aclient.api_reader.get(CM, "own", "team-b"))
                made = uncached.create(configmap(f"made-{id(cluster)}", ""))
                assert made["metadata"]["namespace"] == "team-a"
            clone.stop()
            assert admin.uncached_client.get(CM, "own", "team-b")["metadata"]["name"] == "own"
    finally:
        admin.stop()


def test_a_terminating_namespace_stays_engaged_until_it_is_gone(envtest_server: Any) -> None:
    # a terminating namespace was disengaged at once: a controller that keeps a finalizer on
    # its objects never saw their deletionTimestamp, and the namespace terminated forever
    admin = cluster_of(envtest_server, "admin")
    api = admin.uncached_client
    finalizer = "example.com/cleanup"
    try:
        for ns in ("team-a", "team-b"):
            api.create(_namespace(ns, tenant="yes"))
        api.create(configmap("cm", "team-a"))
        provider = namespace.Provider(
            cluster_of(envtest_server, "host"), label_selector="tenant=yes"
        )
        mgr = mcruntime.Manager(provider=provider)

        def reconcile(req: mcruntime.Request) -> None:
            client = mgr.get_cluster(req.cluster_name).client
            try:
                meta = client.get(CM, req.name, req.namespace)["metadata"]
            except NotFound:
                return
            others = [f for f in meta.get("finalizers") or [] if f != finalizer]
            if meta.get("deletionTimestamp"):
                client.patch(CM, req.name, {"metadata": {"finalizers": others}}, req.namespace)
            elif finalizer not in (meta.get("finalizers") or []):
                patch = {"metadata": {"finalizers": [*others, finalizer]}}
                client.patch(CM, req.name, patch, req.namespace)

        configmap_controller(mgr, Recorder(reconcile))

        def namespace_exists(name: str) -> bool:
            try:
                api.get("v1/Namespace", name)
            except NotFound:
                return False
            return True

        with running(mgr):
            wait_for(
                lambda: (
                    finalizer in (api.get(CM, "cm", "team-a")["metadata"].get("finalizers") or [])
                ),
                what="the controller's finalizer on its object",
            )
            api.delete("v1/Namespace", "team-a")
            wait_for(
                lambda: not namespace_exists("team-a"),
                timeout=15,
                what="the namespace gone (the controller saw its object deleted, and let it go)",
            )
            wait_for(
                lambda: mgr.engaged_clusters() == ["team-b"],
                timeout=5,
                what="the namespace's cluster left once the namespace was gone",
            )
            api.patch("v1/Namespace", "team-b", {"metadata": {"labels": {"tenant": "no"}}})
            wait_for(
                lambda: mgr.engaged_clusters() == [],
                timeout=5,
                what="a namespace relabelled out of the selector left",
            )
    finally:
        admin.stop()
