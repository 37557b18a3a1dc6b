"""The manager's cache options shape what controllers see: resync, namespaces, label selectors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import mcruntime
from mcruntime import Manager
from mcruntime import predicate as p
from mcruntime.cache import ByKind, CacheOptions
from mcruntime.cluster import Cluster
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)


def namespace(kube: Cluster, name: str) -> None:
    kube.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def test_resync_redelivers_unchanged_objects_and_resource_version_changed_filters_them(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(configmap("steady"))
    mgr = make_manager(cache=CacheOptions(resync=0.1))
    every, changed = Calls(), Calls()
    mcruntime.controller_managed_by(mgr).named("every").for_("v1/ConfigMap").complete(every.record)
    (
        mcruntime.controller_managed_by(mgr)
        .named("changed")
        .for_("v1/ConfigMap", p.ResourceVersionChanged())
        .complete(changed.record)
    )
    mgr.start()
    every.wait_count(3, "steady", timeout=10)
    kube.client.create(configmap("marker"))
    changed.wait_count(1, "marker")
    assert changed.count("steady") == 1, "resyncs keep the resourceVersion: filtered"


def test_default_namespaces_limit_what_is_reconciled(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    for ns in ("team-a", "team-b"):
        namespace(kube, ns)
        kube.client.create(configmap(f"cm-{ns}", ns))
    mgr = make_manager(cache=CacheOptions(default_namespaces=["team-a"]))
    calls = Calls()
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(calls.record)
    mgr.start()
    calls.wait_count(1, "cm-team-a")
    kube.client.create(configmap("later-b", "team-b"))
    kube.client.create(configmap("later-a", "team-a"))
    calls.wait_count(1, "later-a")
    assert {(r.namespace, r.name) for r in calls.requests()} == {
        ("team-a", "cm-team-a"),
        ("team-a", "later-a"),
    }


def test_label_selector_by_kind_limits_what_is_reconciled(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(configmap("managed", labels={"managed": "yes"}))
    kube.client.create(configmap("ignored", labels={"managed": "no"}))
    mgr = make_manager(
        cache=CacheOptions(by_kind={"v1/ConfigMap": ByKind(label_selector="managed=yes")})
    )
    calls = Calls()
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(calls.record)
    mgr.start()
    calls.wait_count(1, "managed")
    kube.client.patch(
        "v1/ConfigMap", "ignored", {"metadata": {"labels": {"managed": "yes"}}}, "default"
    )
    calls.wait_count(1, "ignored")
    kube.client.patch(
        "v1/ConfigMap", "managed", {"metadata": {"labels": {"managed": "no"}}}, "default"
    )
    calls.wait_count(2, "managed")
    names = [
        o["metadata"]["name"] for o in mgr.get_cluster("").client.list("v1/ConfigMap", "default")
    ]
    assert names == ["ignored"], "an object leaving the selector leaves the cache"
