"""A ConfigMap-to-Secret controller that owns what it creates: create, GC on delete, revert edits."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def secret_reconciler(mgr: Manager, calls: Calls) -> Callable[[Request], None]:
    """For each ConfigMap, a Secret of the same name holding its data, controlled by the ConfigMap."""

    def reconcile(req: Request) -> None:
        calls.record(req)
        client = mgr.get_cluster(req.cluster_name).client
        try:
            cm = client.get("v1/ConfigMap", req.name, req.namespace)
        except NotFound:
            return  # the Secret goes with it (garbage collection)
        want = {k: _b64(v) for k, v in (cm.get("data") or {}).items()}
        try:
            secret = client.get("v1/Secret", req.name, req.namespace)
        except NotFound:
            meta = cm["metadata"]
            client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": req.name,
                        "namespace": req.namespace,
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "ConfigMap",
                                "name": meta["name"],
                                "uid": meta["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "data": want,
                }
            )
            return
        if (secret.get("data") or {}) != want:
            client.patch(
                "v1/Secret",
                req.name,
                [{"op": "replace", "path": "/data", "value": want}],
                req.namespace,
                type="json",
            )

    return reconcile


@pytest.fixture
def running(make_manager: Callable[..., Manager]) -> tuple[Manager, Calls]:
    mgr = make_manager()
    calls = Calls()
    (
        mcruntime.controller_managed_by(mgr)
        .named("cm-to-secret")
        .for_("v1/ConfigMap")
        .owns("v1/Secret")
        .complete(secret_reconciler(mgr, calls))
    )
    mgr.start()
    return mgr, calls


def _secret(kube: Cluster, name: str) -> dict[str, Any] | None:
    try:
        return kube.api_reader.get("v1/Secret", name, "default")
    except NotFound:
        return None


def test_creates_a_secret_controlled_by_each_configmap(
    kube: Cluster, running: tuple[Manager, Calls]
) -> None:
    cm = kube.client.create(configmap("app", data={"k": "v"}))
    secret = wait_for(lambda: _secret(kube, "app"), what="secret created")
    assert secret["data"] == {"k": _b64("v")}
    (ref,) = secret["metadata"]["ownerReferences"]
    assert ref["controller"] is True
    assert (ref["kind"], ref["name"], ref["uid"]) == ("ConfigMap", "app", cm["metadata"]["uid"])


def test_deleting_the_configmap_removes_its_secret_through_gc(
    kube: Cluster, running: tuple[Manager, Calls]
) -> None:
    kube.client.create(configmap("gone", data={"k": "v"}))
    wait_for(lambda: _secret(kube, "gone"), what="secret created")
    kube.client.delete("v1/ConfigMap", "gone", "default")
    wait_for(lambda: _secret(kube, "gone") is None, what="secret garbage-collected")


def test_a_hand_edited_secret_is_reverted_because_owns_reenqueues_the_owner(
    kube: Cluster, running: tuple[Manager, Calls]
) -> None:
    _, calls = running
    kube.client.create(configmap("guarded", data={"k": "v"}))
    wait_for(lambda: _secret(kube, "guarded"), what="secret created")
    before = calls.count("guarded")
    kube.client.patch(
        "v1/Secret", "guarded", {"data": {"k": _b64("tampered"), "extra": _b64("x")}}, "default"
    )
    wait_for(
        lambda: (s := _secret(kube, "guarded")) is not None and s.get("data") == {"k": _b64("v")},
        what="secret reverted",
    )
    assert calls.count("guarded") > before
    assert all(r.name == "guarded" and r.namespace == "default" for r in calls.requests())


def test_editing_the_configmap_updates_the_secret(
    kube: Cluster, running: tuple[Manager, Calls]
) -> None:
    kube.client.create(configmap("live", data={"k": "v1"}))
    wait_for(lambda: _secret(kube, "live"), what="secret created")
    kube.client.patch("v1/ConfigMap", "live", {"data": {"k": "v2"}}, "default")
    wait_for(
        lambda: (s := _secret(kube, "live")) is not None and s.get("data") == {"k": _b64("v2")},
        what="secret follows the configmap",
    )


def test_owns_enqueues_a_cluster_scoped_owner_without_a_namespace(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    """A namespaced object may be owned by a cluster-scoped one: the request must name the owner
    exactly as the owner's own events do, or one object is two requests (and two workers)."""
    ns = kube.client.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant"}}
    )
    mgr = make_manager()
    calls = Calls()
    mcruntime.controller_managed_by(mgr).for_("v1/Namespace").owns("v1/ConfigMap").complete(
        calls.record
    )
    mgr.start()
    calls.wait_count(1, "tenant")
    cm = configmap("owned", "tenant")
    cm["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "name": "tenant",
            "uid": ns["metadata"]["uid"],
            "controller": True,
        }
    ]
    kube.client.create(cm)
    calls.wait_count(2, "tenant")
    assert {r for r in calls.requests() if r.name == "tenant"} == {Request("", "tenant")}
