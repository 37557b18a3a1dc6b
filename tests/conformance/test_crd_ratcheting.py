"""Validation ratcheting (kube-apiserver 1.30+, ``CRDValidationRatcheting``): after a CRD's
schema is tightened, the objects stored before it may still be updated where they keep
their old values, and are refused only for what an update changes.

What an operator's upgrade does: the new release's CRD adds a ``maxLength``, a ``maximum``
or an ``enum``; the objects users wrote before break it, and their controller still adds
finalizers and labels, writes their status, and migrates their storage.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from mcruntime.envtest import wait_for

from ._support import check_object, crd_manifest, create_crd, raises_status

pytestmark = pytest.mark.timeout(60)

_LOOSE: dict[str, Any] = {
    "name": {"type": "string"},
    "n": {"type": "integer"},
    "ports": {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
        },
    },
    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "hosts": {"type": "array", "items": {"type": "string"}},
}


def _tightened() -> dict[str, Any]:
    spec = copy.deepcopy(_LOOSE)
    spec["name"]["maxLength"] = 3
    spec["n"]["maximum"] = 10
    spec["ports"]["items"]["properties"]["port"]["maximum"] = 10
    spec["tags"]["items"]["enum"] = ["y"]
    spec["hosts"]["items"]["maxLength"] = 3
    return spec


def _crd(group: str, spec: dict[str, Any]) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    schema = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"] = {"type": "object", "properties": spec}
    schema["properties"]["status"] = {
        "type": "object",
        "properties": {"phase": {"type": "string", "maxLength": 5}},
    }
    return manifest


_OLD_SPEC: dict[str, Any] = {
    "name": "toolong",
    "n": 50,
    "ports": [{"name": "a", "port": 50}],
    "tags": ["x"],
    "hosts": ["longhost", "h"],
}


@pytest.fixture
def stored(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> dict[str, Any]:
    """An object stored under the loose schema, and the CRD tightened under it since."""
    group = fresh_group
    create_crd(api, _crd(group, _LOOSE))
    obj = custom.create_namespaced_custom_object(
        group, "v1", ns, "checks", check_object(group, **_OLD_SPEC)
    )
    ext = client.ApiextensionsV1Api(api)
    name = f"checks.{group}"
    crd = ext.read_custom_resource_definition(name)
    tightened = _crd(group, _tightened())
    tightened["metadata"]["resourceVersion"] = crd.metadata.resource_version
    ext.replace_custom_resource_definition(name, tightened)

    def refused() -> bool:  # the new schema is in effect (a cluster serves it a moment later)
        try:
            custom.create_namespaced_custom_object(
                group,
                "v1",
                ns,
                "checks",
                {**check_object(group, n=50), "metadata": {"name": "probe"}},
            )
        except ApiException as e:
            return e.status == 422
        custom.delete_namespaced_custom_object(group, "v1", ns, "checks", "probe")
        return False

    wait_for(refused, 15, "the tightened schema to be in effect", interval=0.05)
    return obj


def _update(
    custom: client.CustomObjectsApi, ns: str, obj: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    group = obj["apiVersion"].split("/")[0]
    name = obj["metadata"]["name"]
    current = custom.get_namespaced_custom_object(group, "v1", ns, "checks", name)
    current["spec"] = {**current["spec"], **spec}
    result: dict[str, Any] = custom.replace_namespaced_custom_object(
        group, "v1", ns, "checks", name, current
    )
    return result


def _refused_fields(
    custom: client.CustomObjectsApi, ns: str, obj: dict[str, Any], **spec: Any
) -> set[str]:
    with raises_status(422, "Invalid") as status:
        _update(custom, ns, obj, **spec)
    return {c["field"] for c in status["details"]["causes"]}


def test_an_object_breaking_the_tightened_schema_takes_labels_and_status_where_unchanged(
    custom: client.CustomObjectsApi, ns: str, stored: dict[str, Any]
) -> None:
    group = stored["apiVersion"].split("/")[0]
    name = stored["metadata"]["name"]
    labelled = custom.patch_namespaced_custom_object(
        group, "v1", ns, "checks", name, {"metadata": {"labels": {"upgraded": "yes"}}}
    )
    assert labelled["metadata"]["labels"] == {"upgraded": "yes"}
    assert labelled["spec"] == _OLD_SPEC
    # written back as it is, what a storage migration does
    again = custom.replace_namespaced_custom_object(group, "v1", ns, "checks", name, labelled)
    assert again["spec"] == _OLD_SPEC
    done = custom.patch_namespaced_custom_object_status(
        group, "v1", ns, "checks", name, {"status": {"phase": "Ready"}}
    )
    assert done["status"] == {"phase": "Ready"}
    # the status is checked by the schema as ever
    with raises_status(422, "Invalid") as status:
        custom.patch_namespaced_custom_object_status(
            group, "v1", ns, "checks", name, {"status": {"phase": "Running"}}
        )
    assert {c["field"] for c in status["details"]["causes"]} == {"status.phase"}


def test_only_the_values_an_update_changes_are_checked_against_the_tightened_schema(
    custom: client.CustomObjectsApi, ns: str, stored: dict[str, Any]
) -> None:
    # the name, unchanged, is let through; the changed count is not
    assert _refused_fields(custom, ns, stored, n=40) == {"spec.n"}
    assert _update(custom, ns, stored, n=4)["spec"]["name"] == "toolong"
    # a map list's items are matched by their keys: port a, unchanged but now second, passes
    ports = [{"name": "b", "port": 60}, {"name": "a", "port": 50}]
    assert _refused_fields(custom, ns, stored, ports=ports) == {"spec.ports[0].port"}
    # the items of a list without a list type (atomic), as of a set, are not matched: once
    # the list changes, every item is checked again; unchanged, it passes as a whole
    assert _refused_fields(custom, ns, stored, hosts=["longhost", "h", "a"]) == {"spec.hosts[0]"}
    assert _update(custom, ns, stored, hosts=["longhost", "h"])["spec"]["hosts"][0] == "longhost"
    # a set's items are not matched: the kept "x" is checked again once the set changes
    assert _refused_fields(custom, ns, stored, tags=["x", "y"]) == {"spec.tags[0]"}


def test_a_status_write_passes_spec_rules_and_required_fields_added_after_the_object(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # a status write is validated by the status schema alone, and the CEL rules ratchet
    # (a rule failing on the unchanged spec is a warning): the controller of an object
    # stored before the CRD added them still reports its status
    group = fresh_group
    create_crd(api, _crd(group, _LOOSE))
    spare = custom.create_namespaced_custom_object(
        group, "v1", ns, "checks", {**check_object(group), "spec": None}
    )
    big = custom.create_namespaced_custom_object(
        group, "v1", ns, "checks", check_object(group, n=50)
    )
    assert "spec" not in spare
    ext = client.ApiextensionsV1Api(api)
    name = f"checks.{group}"
    tightened = _crd(group, _LOOSE)
    schema = tightened["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["required"] = ["spec"]
    schema["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self.n <= 10", "message": "n at most 10"}
    ]
    tightened["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(
        name
    ).metadata.resource_version
    ext.replace_custom_resource_definition(name, tightened)

    def refused() -> bool:
        try:
            custom.create_namespaced_custom_object(
                group, "v1", ns, "checks", {**check_object(group), "metadata": {"name": "probe"}}
            )
        except ApiException as e:
            return e.status == 422
        custom.delete_namespaced_custom_object(group, "v1", ns, "checks", "probe")
        return False

    wait_for(refused, 15, "the tightened schema to be in effect", interval=0.05)
    for obj in (spare, big):
        done = custom.patch_namespaced_custom_object_status(
            group, "v1", ns, "checks", obj["metadata"]["name"], {"status": {"phase": "Done"}}
        )
        assert done["status"] == {"phase": "Done"}
    # the main resource's update still answers for the spec it changes
    with raises_status(422, "Invalid") as status:
        _update(custom, ns, big, n=40)
    assert [c["message"] for c in status["details"]["causes"]] == [
        'Invalid value: "object": n at most 10'
    ]
