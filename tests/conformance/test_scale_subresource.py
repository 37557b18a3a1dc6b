"""Writes through the ``/scale`` subresource in ``metadata.managedFields``.

kube-apiserver runs the write as an ``Update`` of the ``autoscaling/v1`` Scale
and converts the ownership back to the parent (``ScaleHandler`` in
``k8s.io/apimachinery/pkg/util/managedfields/scalehandler.go``, called from the
``ScaleREST`` of ``pkg/registry/apps/*/storage/storage.go`` and of
``apiextensions-apiserver/pkg/registry/customresource/etcd.go``): the writer's
entry has ``subresource: scale``, the parent's apiVersion and the parent's
replicas path, and no ``time`` (``ToParent`` looks the time up among the
parent's entries, under the Scale's ``autoscaling/v1`` identity, and finds
none). Written against kube-apiserver's behaviour, so they pass on a real
cluster too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    WIDGET_GROUP,
    assert_status,
    crd_manifest,
    deployment,
    raw,
    served_crd,
    unique,
)

pytestmark = pytest.mark.timeout(30)

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
POOLS = "pools"
REPLICATED = ["deployments", "replicasets", "statefulsets"]


def replicated(resource: str, name: str, replicas: int = 1) -> dict[str, Any]:
    """A Deployment, ReplicaSet or StatefulSet named ``name``."""
    obj = deployment(name, replicas)
    obj["kind"] = {"deployments": "Deployment", "replicasets": "ReplicaSet"}.get(
        resource, "StatefulSet"
    )
    if resource == "statefulsets":
        obj["spec"]["serviceName"] = name
    return obj


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """``managedFields`` by (manager, subresource)."""
    return {
        (e["manager"], e.get("subresource", "")): e
        for e in obj["metadata"].get("managedFields") or []
    }


def owners_of(obj: dict[str, Any], *path: str) -> set[str]:
    """The managers whose ``fieldsV1`` hold ``path`` (FieldsV1 elements, ``f:spec``...)."""
    out = set()
    for e in obj["metadata"].get("managedFields") or []:
        node: Any = e.get("fieldsV1") or {}
        for el in path:
            node = node.get(el) if isinstance(node, dict) else None
        if node is not None:
            out.add(e["manager"])
    return out


def scale(
    api: ApiClient, path: str, replicas: int, manager: str, method: str = "PATCH"
) -> dict[str, Any]:
    """Set the replicas through ``{path}/scale`` as ``kubectl scale`` does (a merge patch),
    or with a PUT of the Scale; the Scale returned."""
    body: Any = {"spec": {"replicas": replicas}}
    content_type = MERGE
    if method == "PUT":
        body = raw(api, "GET", path + "/scale").json()
        body["spec"]["replicas"] = replicas
        del body["metadata"]["resourceVersion"]  # unconditional: a controller may write too
        content_type = "application/json"
    query = [("fieldManager", manager)]
    resp = raw(api, method, path + "/scale", query=query, body=body, content_type=content_type)
    assert resp.status == 200, resp.data
    out: dict[str, Any] = resp.json()
    return out


@pytest.mark.parametrize("resource", REPLICATED)
@pytest.mark.parametrize("method", ["PATCH", "PUT"])
def test_a_scale_write_is_an_update_through_the_scale_subresource(
    api: ApiClient, ns: str, resource: str, method: str
) -> None:
    name = unique("scaled")
    path = f"/apis/apps/v1/namespaces/{ns}/{resource}/{name}"
    created = raw(
        api,
        "POST",
        f"/apis/apps/v1/namespaces/{ns}/{resource}",
        query=[("fieldManager", "maker")],
        body=replicated(resource, name),
        content_type="application/json",
    )
    assert created.status == 201, created.data
    assert scale(api, path, 3, "scaler", method)["spec"]["replicas"] == 3
    obj = raw(api, "GET", path).json()
    assert obj["spec"]["replicas"] == 3
    entry = entries(obj)[("scaler", "scale")]
    assert entry == {
        "manager": "scaler",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "subresource": "scale",
    }
    assert ("scaler", "") not in entries(obj)
    assert owners_of(obj, "f:spec", "f:replicas") == {"scaler"}
    assert "maker" in owners_of(obj, "f:spec", "f:selector")


def test_scaling_takes_the_replicas_from_their_applier(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    applied = json.dumps(deployment(name, 1))
    apply = [("fieldManager", "applier")]
    assert raw(api, "PATCH", path, query=apply, body=applied, content_type=APPLY).status == 201
    scale(api, path, 5, "scaler")
    obj = raw(api, "GET", path).json()
    assert owners_of(obj, "f:spec", "f:replicas") == {"scaler"}
    assert "applier" in owners_of(obj, "f:spec", "f:selector")
    assert entries(obj)[("applier", "")]["operation"] == "Apply"

    again = raw(api, "PATCH", path, query=apply, body=applied, content_type=APPLY)
    body = assert_status(again, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "scaler" with subresource "scale" '
        "using apps/v1: .spec.replicas"
    )
    forced = raw(
        api, "PATCH", path, query=[*apply, ("force", "true")], body=applied, content_type=APPLY
    )
    assert forced.status == 200
    obj = forced.json()
    assert obj["spec"]["replicas"] == 1
    assert owners_of(obj, "f:spec", "f:replicas") == {"applier"}
    assert ("scaler", "scale") not in entries(obj)


def test_a_scale_patch_of_the_status_alone_changes_no_ownership(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    applied = json.dumps(deployment(name, 1))
    raw(api, "PATCH", path, query=[("fieldManager", "applier")], body=applied, content_type=APPLY)
    resp = raw(
        api,
        "PATCH",
        path + "/scale",
        query=[("fieldManager", "scaler")],
        body={"status": {"replicas": 42}},
        content_type=MERGE,
    )
    assert resp.status == 200
    obj = raw(api, "GET", path).json()
    assert obj["spec"]["replicas"] == 1
    assert owners_of(obj, "f:spec", "f:replicas") == {"applier"}
    assert "scaler" not in {manager for manager, _ in entries(obj)}


def test_a_second_scaler_takes_the_replicas_over(
    apps: client.AppsV1Api, api: ApiClient, ns: str
) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    apps.create_namespaced_deployment(ns, deployment(name), field_manager="maker")
    scale(api, path, 2, "first")
    scale(api, path, 4, "second", method="PUT")
    obj = raw(api, "GET", path).json()
    assert owners_of(obj, "f:spec", "f:replicas") == {"second"}
    assert ("first", "scale") not in entries(obj)
    assert entries(obj)[("second", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


# ------------------------------------------------------------------ custom resources


@pytest.fixture(scope="module")
def pools(kube_backend: KubeBackend) -> Iterator[str]:
    """A CRD whose scale subresource keeps the replicas at ``.spec.size``: its path."""
    manifest = crd_manifest(WIDGET_GROUP, POOLS, "Pool")
    manifest["spec"]["versions"][0]["subresources"]["scale"] = {
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.size",
    }
    with served_crd(kube_backend, manifest) as path:
        yield path


def test_a_custom_resource_scale_write_owns_the_spec_replicas_path(
    api: ApiClient, ns: str, pools: str
) -> None:
    name = unique("pool")
    body = {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Pool",
        "metadata": {"name": name},
        "spec": {"size": 1, "color": "red"},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        WIDGET_GROUP, "v1", ns, POOLS, body, field_manager="maker"
    )
    path = f"{pools}/namespaces/{ns}/{POOLS}/{name}"
    scale(api, path, 3, "scaler")
    obj = raw(api, "GET", path).json()
    assert obj["spec"] == {"size": 3, "color": "red"}
    entry = entries(obj)[("scaler", "scale")]
    assert (entry["operation"], entry["apiVersion"]) == ("Update", f"{WIDGET_GROUP}/v1")
    assert entry["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert owners_of(obj, "f:spec", "f:size") == {"scaler"}
    assert owners_of(obj, "f:spec", "f:color") == {"maker"}
