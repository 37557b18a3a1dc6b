"""Writes through the ``/scale`` subresource in ``metadata.managedFields``.

kube-apiserver runs the write as an ``Update`` of the ``autoscaling/v1`` Scale
and converts the ownership back to the parent (``ScaleHandler`` in
``k8s.io/apimachinery/pkg/util/managedfields/scalehandler.go``, called from the
``ScaleREST`` of ``pkg/registry/apps/*/storage/storage.go`` and of
``apiextensions-apiserver/pkg/registry/customresource/etcd.go``): the writer's
entry has ``subresource: scale``, the parent's apiVersion and the parent's
replicas path, and no ``time`` (``ToParent`` looks the time up among the
parent's entries, under the Scale's ``autoscaling/v1`` identity, and finds
none). Server-side apply of a Scale is an ``Apply`` of the Scale the same way:
it conflicts with whoever owns the replicas, named as the Scale's entries name
them. Written against kube-apiserver's behaviour, so they pass on a real
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


def create_replicated(api: ApiClient, ns: str, resource: str, name: str) -> str:
    """Create ``replicated(resource, name)`` as the field manager "maker": its path."""
    created = raw(
        api,
        "POST",
        f"/apis/apps/v1/namespaces/{ns}/{resource}",
        query=[("fieldManager", "maker")],
        body=replicated(resource, name),
        content_type="application/json",
    )
    assert created.status == 201, created.data
    return f"/apis/apps/v1/namespaces/{ns}/{resource}/{name}"


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


def taken_over(api: ApiClient, path: str, taker: str, applier: str) -> dict[str, Any]:
    """The object at ``path``, asserting ``taker`` alone owns its replicas and ``applier``
    still its selector."""
    obj: dict[str, Any] = raw(api, "GET", path).json()
    assert owners_of(obj, "f:spec", "f:replicas") == {taker}
    assert applier in owners_of(obj, "f:spec", "f:selector")
    return obj


def reapplied(api: ApiClient, path: str, applied: str, manager: str) -> str:
    """The message of the 409 that applying ``applied`` to ``path`` again as ``manager``
    answers."""
    resp = raw(
        api, "PATCH", path, query=[("fieldManager", manager)], body=applied, content_type=APPLY
    )
    return str(assert_status(resp, 409, "Conflict")["message"])


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
    path = create_replicated(api, ns, resource, name)
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
    obj = taken_over(api, path, "scaler", "applier")
    assert entries(obj)[("applier", "")]["operation"] == "Apply"

    assert reapplied(api, path, applied, "applier") == (
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


def test_a_second_scaler_takes_the_replicas_over(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = create_replicated(api, ns, "deployments", name)
    scale(api, path, 2, "first")
    scale(api, path, 4, "second", method="PUT")
    obj = raw(api, "GET", path).json()
    assert owners_of(obj, "f:spec", "f:replicas") == {"second"}
    assert ("first", "scale") not in entries(obj)
    assert entries(obj)[("second", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


# ------------------------------------------------------------------ server-side apply


def scale_config(name: str, replicas: int) -> str:
    """An applied ``autoscaling/v1`` Scale configuration."""
    return json.dumps(
        {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": name},
            "spec": {"replicas": replicas},
        }
    )


def apply_scale(
    api: ApiClient, path: str, body: str, manager: str | None, force: bool = False
) -> Any:
    """PATCH ``{path}/scale`` with ``body`` as server-side apply; the raw response."""
    query = [("fieldManager", manager)] if manager else []
    if force:
        query.append(("force", "true"))
    return raw(api, "PATCH", path + "/scale", query=query, body=body, content_type=APPLY)


@pytest.mark.parametrize("resource", REPLICATED)
def test_applying_a_scale_sets_the_replicas_and_records_an_apply_entry(
    api: ApiClient, ns: str, resource: str
) -> None:
    name = unique("scaled")
    path = create_replicated(api, ns, resource, name)
    # the creator's Update entry is the Scale's, in autoscaling/v1
    body = assert_status(apply_scale(api, path, scale_config(name, 3), "hpa"), 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "maker" using autoscaling/v1: .spec.replicas'
    )
    resp = apply_scale(api, path, scale_config(name, 3), "hpa", force=True)
    assert resp.status == 200, resp.data
    assert (resp.json()["kind"], resp.json()["spec"]["replicas"]) == ("Scale", 3)
    obj = raw(api, "GET", path).json()
    assert obj["spec"]["replicas"] == 3
    assert entries(obj)[("hpa", "scale")] == {
        "manager": "hpa",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "subresource": "scale",
    }
    assert owners_of(obj, "f:spec", "f:replicas") == {"hpa"}
    assert "maker" in owners_of(obj, "f:spec", "f:selector")


def test_applying_a_scale_conflicts_with_the_applier_of_the_replicas(
    api: ApiClient, ns: str
) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    applied = json.dumps(deployment(name, 1))
    deployer = [("fieldManager", "deployer")]
    assert raw(api, "PATCH", path, query=deployer, body=applied, content_type=APPLY).status == 201

    resp = apply_scale(api, path, scale_config(name, 4), "hpa")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "deployer": .spec.replicas'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "deployer"',
            "field": ".spec.replicas",
        }
    ]
    assert raw(api, "GET", path).json()["spec"]["replicas"] == 1

    forced = apply_scale(api, path, scale_config(name, 4), "hpa", force=True)
    assert forced.status == 200, forced.data
    obj = taken_over(api, path, "hpa", "deployer")
    assert obj["spec"]["replicas"] == 4
    assert entries(obj)[("hpa", "scale")]["operation"] == "Apply"

    # the Deployment's applier now conflicts with the Scale's, named with its subresource
    assert reapplied(api, path, applied, "deployer") == (
        'Apply failed with 1 conflict: conflict with "hpa" with subresource "scale": .spec.replicas'
    )


def test_applying_the_replicas_a_scale_has_shares_them(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    applied = json.dumps(deployment(name, 2))
    raw(api, "PATCH", path, query=[("fieldManager", "deployer")], body=applied, content_type=APPLY)
    resp = apply_scale(api, path, scale_config(name, 2), "watcher")
    assert resp.status == 200, resp.data
    obj = raw(api, "GET", path).json()
    assert owners_of(obj, "f:spec", "f:replicas") == {"deployer", "watcher"}
    # a scale write then takes the replicas from both
    scale(api, path, 5, "scaler")
    assert owners_of(raw(api, "GET", path).json(), "f:spec", "f:replicas") == {"scaler"}


def test_applying_a_scale_needs_a_field_manager_and_a_scale(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = create_replicated(api, ns, "deployments", name)
    body = assert_status(apply_scale(api, path, scale_config(name, 2), None), 422, "Invalid")
    assert "fieldManager: Required value: is required for apply patch" in body["message"]
    wrong = json.loads(scale_config(name, 2))
    wrong["apiVersion"] = "autoscaling/v2"
    resp = apply_scale(api, path, json.dumps(wrong), "hpa", force=True)
    body = assert_status(resp, 400, "BadRequest")
    assert body["message"] == "invalid object type: autoscaling/v2, Kind=Scale"
    assert raw(api, "GET", path).json()["spec"]["replicas"] == 1


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


@pytest.mark.parametrize("operation", ["Update", "Apply"])
def test_a_custom_resource_scale_write_owns_the_spec_replicas_path(
    api: ApiClient, ns: str, pools: str, operation: str
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
    if operation == "Update":
        scale(api, path, 3, "scaler")
    else:
        resp = apply_scale(api, path, scale_config(name, 3), "scaler", force=True)
        assert resp.status == 200, resp.data
    obj = raw(api, "GET", path).json()
    assert obj["spec"] == {"size": 3, "color": "red"}
    entry = entries(obj)[("scaler", "scale")]
    assert (entry["operation"], entry["apiVersion"]) == (operation, f"{WIDGET_GROUP}/v1")
    assert entry["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert owners_of(obj, "f:spec", "f:size") == {"scaler"}
    assert owners_of(obj, "f:spec", "f:color") == {"maker"}


def test_force_is_refused_on_a_scale_patch_that_is_not_an_apply(api: ApiClient, ns: str) -> None:
    path = create_replicated(api, ns, "deployments", unique("forced"))
    answer = raw(
        api,
        "PATCH",
        f"{path}/scale",
        query=[("force", "true"), ("fieldManager", "hpa")],
        body={"spec": {"replicas": 2}},
        content_type=MERGE,
    )
    status = assert_status(answer, 422, "Invalid")
    assert "force: Forbidden: may not be specified for non-apply patch" in status["message"]
