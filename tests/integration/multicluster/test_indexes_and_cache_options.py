"""Field indexes registered once answer on every cluster; per-cluster cache options restrict and transform."""

from __future__ import annotations

from typing import Any

import pytest

import mcruntime
from mcruntime.cache import ByKind, CacheOptions
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)


def _owner(obj: dict[str, Any]) -> str | None:
    return (obj.get("data") or {}).get("owner")


def _names(objs: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objs}


def test_a_field_index_registered_once_answers_on_every_cluster_including_later_ones(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    provider = clusters.Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, cluster_of(fleet[name], name))
    mgr = mcruntime.Manager(fleet["cluster-2"].kubeconfig(), provider=provider)
    mgr.get_field_indexer().index_field(CM, "data.owner", _owner)
    configmap_controller(mgr, Recorder())
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0", "cluster-1"])
        extra = fleet.add("cluster-3")
        provider.add("cluster-3", cluster_of(extra, "cluster-3"))
        wait_for(lambda: "cluster-3" in mgr.engaged_clusters())
        for name in ("", "cluster-0", "cluster-1", "cluster-3"):
            client = mgr.get_cluster(name).client
            client.create(configmap("alice-1", owner="alice"))
            client.create(configmap("alice-2", owner="alice"))
            client.create(configmap("bob-1", owner="bob"))
        for name in ("", "cluster-0", "cluster-1", "cluster-3"):
            client = mgr.get_cluster(name).client
            wait_for(
                lambda c=client: (
                    _names(c.list(CM, index=("data.owner", "alice"))) == {"alice-1", "alice-2"}
                ),
                what=f"index answers on {name or 'local'}",
            )
            wait_for(lambda c=client: _names(c.list(CM, fields={"data.owner": "bob"})) == {"bob-1"})
            assert _names(client.list(CM, "default", index=("data.owner", "carol"))) == set()


def test_an_index_reaches_a_cluster_that_was_unreachable_when_it_was_added(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fleet = make_envtest_fleet(3)
    down = fleet["cluster-2"]
    down.stop()
    provider = clusters.Provider()
    mgr = mcruntime.Manager(
        fleet["cluster-0"].kubeconfig(),
        provider=provider,
        options=ManagerOptions(engage_sync_timeout=0.5),
    )
    mgr.get_field_indexer().index_field(CM, "data.owner", _owner)
    configmap_controller(mgr, Recorder())
    with running(mgr):
        provider.add(
            "cluster-2", cluster_of(down, "cluster-2")
        )  # must neither raise nor block the others
        provider.add("cluster-1", cluster_of(fleet["cluster-1"], "cluster-1"))
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-1"])
        assert "cluster=cluster-2" in caplog.text
        down.start()
        create_cms(down, ["plain"])
        wait_for(lambda: "cluster-2" in mgr.engaged_clusters(), timeout=20)
        client = mgr.get_cluster("cluster-2").client
        client.create(configmap("owned", owner="alice"))
        wait_for(lambda: _names(client.list(CM, index=("data.owner", "alice"))) == {"owned"})


def test_cache_options_restrict_what_each_cluster_caches(make_envtest_fleet: Any) -> None:
    fleet = make_envtest_fleet(2)
    for srv in fleet:
        c = cluster_of(srv, "writer")
        try:
            c.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
            c.client.create(
                {
                    **configmap("labelled", "apps"),
                    "metadata": {"name": "labelled", "namespace": "apps", "labels": {"team": "a"}},
                }
            )
            c.client.create(configmap("plain", "apps"))
            c.client.create(
                {
                    **configmap("labelled-default"),
                    "metadata": {
                        "name": "labelled-default",
                        "namespace": "default",
                        "labels": {"team": "a"},
                    },
                }
            )
        finally:
            c.stop()
    provider = clusters.Provider()
    provider.add(
        "by-label",
        cluster_of(
            fleet["cluster-0"],
            "by-label",
            cache_options=CacheOptions(by_kind={CM: ByKind(label_selector="team=a")}),
        ),
    )
    provider.add(
        "by-namespace",
        cluster_of(
            fleet["cluster-1"],
            "by-namespace",
            cache_options=CacheOptions(by_kind={CM: ByKind(namespaces=["apps"])}),
        ),
    )
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(
            lambda: (
                rec.seen()
                >= {
                    ("by-label", "apps/labelled"),
                    ("by-label", "default/labelled-default"),
                    ("by-namespace", "apps/labelled"),
                    ("by-namespace", "apps/plain"),
                }
            )
        )
        by_label = mgr.get_cluster("by-label").client
        by_ns = mgr.get_cluster("by-namespace").client
        assert _names(by_label.list(CM)) == {"labelled", "labelled-default"}
        assert {o["metadata"]["namespace"] for o in by_ns.list(CM)} == {"apps"}
        with pytest.raises(NotFound):
            by_label.get(CM, "plain", "apps")
        # a marker in each cluster proves the excluded objects were never delivered
        create_cms(fleet["cluster-0"], ["unlabelled-marker"], "apps")
        by_label.create(
            {
                **configmap("labelled-marker", "apps"),
                "metadata": {
                    "name": "labelled-marker",
                    "namespace": "apps",
                    "labels": {"team": "a"},
                },
            }
        )
        wait_for(lambda: rec.saw("by-label", "apps/labelled-marker"))
        by_ns.create(configmap("marker", "apps"))
        wait_for(lambda: rec.saw("by-namespace", "apps/marker"))
        seen = rec.seen()
        assert ("by-label", "apps/plain") not in seen
        assert ("by-label", "apps/unlabelled-marker") not in seen
        assert not any(c == "by-namespace" and k.startswith("default/") for c, k in seen)


def _drop_data(obj: dict[str, Any]) -> dict[str, Any]:
    obj.pop("data", None)
    obj.setdefault("metadata", {}).setdefault("annotations", {})["transformed"] = "yes"
    return obj


def test_field_selectors_and_transforms_per_kind(envtest_server: Any) -> None:
    create_cms(envtest_server, ["wanted", "unwanted"])
    provider = clusters.Provider()
    provider.add(
        "c",
        cluster_of(
            envtest_server,
            "c",
            cache_options=CacheOptions(
                by_kind={CM: ByKind(field_selector="metadata.name=wanted", transform=_drop_data)}
            ),
        ),
    )
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: rec.saw("c", "default/wanted"))
        client = mgr.get_cluster("c").client
        cached = client.get(CM, "wanted", "default")
        assert "data" not in cached and cached["metadata"]["annotations"]["transformed"] == "yes"
        fresh = mgr.get_cluster("c").api_reader.get(CM, "wanted", "default")
        assert "annotations" not in fresh["metadata"]  # the API reader's objects untransformed
        assert _names(client.list(CM)) == {"wanted"}
        assert not rec.saw("c", "default/unwanted")


def test_the_default_transform_drops_managed_fields(envtest_server: Any) -> None:
    provider = clusters.Provider()
    provider.add("c", cluster_of(envtest_server, "c"))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    managed = [
        {
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}},
        }
    ]
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["c"])
        client = mgr.get_cluster("c").client
        obj = configmap("big", k="v")
        obj["metadata"]["managedFields"] = managed
        client.create(obj)
        wait_for(lambda: rec.saw("c", "default/big"))
        assert (
            mgr.get_cluster("c")
            .api_reader.get(CM, "big", "default")["metadata"]
            .get("managedFields")
        )
        cached = client.get(CM, "big", "default")
        assert "managedFields" not in cached["metadata"]
        assert cached["data"] == {"k": "v"}
