"""A CRD's versions over its life: the storage version moves, the old one leaves
``status.storedVersions`` and then ``spec.versions``; what a conversion needs to be
accepted; watches of its objects end when its spec changes."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for

from ._support import assert_status, crd_manifest, create_crd, raises_status, raw

pytestmark = pytest.mark.timeout(60)


def two_versions(group: str, storage: str = "v1alpha1") -> dict[str, Any]:
    """A CRD serving ``v1alpha1`` and ``v1``, stored in ``storage``."""
    manifest = crd_manifest(group, "gadgets", "Gadget", status=False)
    (v1,) = manifest["spec"]["versions"]
    manifest["spec"]["versions"] = [
        {**copy.deepcopy(v1), "name": v, "storage": v == storage} for v in ("v1alpha1", "v1")
    ]
    return manifest


def _replace(ext: client.ApiextensionsV1Api, name: str, change: Any) -> dict[str, Any]:
    """GET the CRD as a dict, let ``change`` edit it, PUT it back."""
    crd = ext.api_client.sanitize_for_serialization(ext.read_custom_resource_definition(name))
    change(crd)
    out: dict[str, Any] = ext.api_client.sanitize_for_serialization(
        ext.replace_custom_resource_definition(name, crd)
    )
    return out


def _store_in(version: str) -> Any:
    def change(crd: dict[str, Any]) -> None:
        for v in crd["spec"]["versions"]:
            v["storage"] = v["name"] == version

    return change


def _drop_version(version: str) -> Any:
    def change(crd: dict[str, Any]) -> None:
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] != version]

    return change


def test_a_version_stays_in_spec_versions_until_a_migration_drops_it_from_stored_versions(
    api: ApiClient, fresh_group: str
) -> None:
    group = fresh_group
    ext = client.ApiextensionsV1Api(api)
    name = create_crd(api, two_versions(group))["metadata"]["name"]
    moved = _replace(ext, name, _store_in("v1"))
    assert moved["status"]["storedVersions"] == ["v1alpha1", "v1"]
    with raises_status(422, "Invalid") as status:
        _replace(ext, name, _drop_version("v1alpha1"))
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "status.storedVersions[0]",
            "message": 'Invalid value: "v1alpha1": missing from spec.versions; v1alpha1 was '
            "previously a storage version, and must remain in spec.versions until a storage "
            "migration ensures no data remains persisted in v1alpha1 and removes v1alpha1 "
            "from status.storedVersions",
        }
    ]
    # what the storage version migrator does once every object is written in v1
    crd = ext.api_client.sanitize_for_serialization(ext.read_custom_resource_definition(name))
    crd["status"]["storedVersions"] = ["v1"]
    ext.replace_custom_resource_definition_status(name, crd)
    left = _replace(ext, name, _drop_version("v1alpha1"))
    assert [v["name"] for v in left["spec"]["versions"]] == ["v1"]
    assert left["status"]["storedVersions"] == ["v1"]


@pytest.mark.parametrize(
    ("conversion", "field", "message"),
    [
        (
            {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}},
            "spec.conversion.webhookClientConfig",
            "Required value: required when strategy is set to Webhook",
        ),
        (
            {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://127.0.0.1:1/c"}}},
            "spec.conversion.conversionReviewVersions",
            "Required value",
        ),
        (
            {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v2"],
                    "clientConfig": {"url": "https://127.0.0.1:1/c"},
                },
            },
            "spec.conversion.conversionReviewVersions",
            # the value is shown as JSON since Kubernetes 1.33, as %#v before
            "must include at least one of v1, v1beta1",
        ),
        (
            {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "http://127.0.0.1:1/c"},
                },
            },
            "spec.conversion.webhookClientConfig.url",
            "Invalid value: \"http\": 'https' is the only allowed URL scheme; "
            "desired format: https://host[/path]",
        ),
        (
            {"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}},
            "spec.conversion.conversionReviewVersions",
            "Forbidden: should not be set when strategy is not set to Webhook",
        ),
    ],
    ids=["no-webhook", "no-review-versions", "unknown-review-versions", "http", "not-webhook"],
)
def test_a_conversion_kube_apiserver_cannot_call_is_refused(
    api: ApiClient, fresh_group: str, conversion: dict[str, Any], field: str, message: str
) -> None:
    group = fresh_group
    manifest = two_versions(group, storage="v1")
    manifest["spec"]["conversion"] = conversion
    # raw: the kubernetes client refuses some of these itself, before sending
    refused = raw(
        api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=manifest
    )
    status = assert_status(refused, 422, "Invalid")
    ((at, said),) = ((c["field"], c["message"]) for c in status["details"]["causes"])
    assert (at, said.endswith(message)) == (field, True), said


def test_a_watch_of_a_crd_s_objects_ends_when_its_spec_changes(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    """kube-apiserver tears down a CRD's storage when its spec changes (its conversion, its
    schemas): the watches on it end and clients watch again, in the CRD as it is now."""
    group = fresh_group
    ext = client.ApiextensionsV1Api(api)
    name = create_crd(api, two_versions(group, storage="v1"))["metadata"]["name"]
    custom = client.CustomObjectsApi(api)
    started, ended = threading.Event(), threading.Event()

    def watching() -> None:
        w = watch.Watch()
        try:
            for _event in w.stream(
                custom.list_cluster_custom_object,
                group,
                "v1alpha1",
                "gadgets",
                timeout_seconds=30,
                _request_timeout=40,
            ):
                started.set()  # the one object's ADDED: the watch is open
        finally:
            ended.set()

    custom.create_namespaced_custom_object(
        group,
        "v1",
        ns,
        "gadgets",
        {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}},
    )
    thread = threading.Thread(target=watching, name="conformance/crd-watch", daemon=True)
    thread.start()

    def schema_changed(crd: dict[str, Any]) -> None:
        for v in crd["spec"]["versions"]:
            v["schema"]["openAPIV3Schema"]["description"] = "changed"

    try:
        assert started.wait(20), "the watch did not start"
        _replace(ext, name, schema_changed)
        assert ended.wait(20), "the watch did not end after the CRD's spec changed"
    finally:
        custom.delete_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
        thread.join(45)


def _schema_of(field: str) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {field: {"type": "integer"}}}},
        }
    }


def test_an_object_read_in_another_version_without_a_webhook_is_pruned_to_its_schema(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    """Strategy ``None`` changes only ``apiVersion``, then kube-apiserver prunes the object
    to the schema of the version read: a field renamed between versions is not shown."""
    group = fresh_group
    manifest = two_versions(group, storage="v1alpha1")
    for version, field in zip(manifest["spec"]["versions"], ("size", "replicas"), strict=True):
        version["schema"] = _schema_of(field)
    create_crd(api, manifest)
    custom = client.CustomObjectsApi(api)
    old = {"apiVersion": f"{group}/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}}
    custom.create_namespaced_custom_object(
        group, "v1alpha1", ns, "gadgets", {**old, "spec": {"size": 2}}
    )
    got = custom.get_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
    assert (got["apiVersion"], got["spec"]) == (f"{group}/v1", {})
    (listed,) = custom.list_namespaced_custom_object(group, "v1", ns, "gadgets")["items"]
    assert listed["spec"] == {}
    events = watch.Watch().stream(
        custom.list_namespaced_custom_object, group, "v1", ns, "gadgets", timeout_seconds=5
    )
    first = next(iter(events))
    assert (first["type"], first["object"]["spec"]) == ("ADDED", {})
    stored = custom.get_namespaced_custom_object(group, "v1alpha1", ns, "gadgets", "g")
    assert stored["spec"] == {"size": 2}, "the object stored is as written"


@pytest.mark.parametrize("patch_type", ["merge", "json", "apply"])
def test_an_object_stored_in_another_version_is_patched_in_the_version_asked_for(
    api: ApiClient, fresh_group: str, ns: str, patch_type: str
) -> None:
    """Strategy ``None``: kube-apiserver converts the stored object to the request's version
    before it applies the patch, so the patch never sees the stored ``apiVersion``."""
    group = fresh_group
    create_crd(api, two_versions(group, storage="v1alpha1"))
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        group,
        "v1alpha1",
        ns,
        "gadgets",
        {"apiVersion": f"{group}/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}},
    )
    path = f"/apis/{group}/v1/namespaces/{ns}/gadgets/g"
    body, ctype = {
        "merge": ({"metadata": {"labels": {"p": "x"}}}, "application/merge-patch+json"),
        "json": (
            [{"op": "add", "path": "/metadata/labels", "value": {"p": "x"}}],
            "application/json-patch+json",
        ),
        "apply": (
            {
                "apiVersion": f"{group}/v1",
                "kind": "Gadget",
                "metadata": {"name": "g", "labels": {"p": "x"}},
            },
            "application/apply-patch+yaml",
        ),
    }[patch_type]
    query = [("fieldManager", "test")] if patch_type == "apply" else None
    resp = raw(api, "PATCH", path, query=query, body=body, content_type=ctype)
    assert resp.status == 200, resp.data
    out = resp.json()
    assert (out["apiVersion"], out["metadata"]["labels"]) == (f"{group}/v1", {"p": "x"})


def _size_defaulted(defaults: dict[str, int]) -> Any:
    """A change giving each version named in ``defaults`` ``spec.size`` with that default."""

    def change(crd: dict[str, Any]) -> None:
        for v in crd["spec"]["versions"]:
            size = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]
            if v["name"] in defaults:
                size["default"] = defaults[v["name"]]

    return change


def test_an_object_stored_before_a_default_was_added_is_read_with_it(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    """kube-apiserver defaults an object as it decodes it from storage, with the schema of
    the version it is stored in: a default added to the CRD after the object was written
    shows in get, list and watch (in any version read), though the object stored has not
    changed."""
    group = fresh_group
    ext = client.ApiextensionsV1Api(api)
    manifest = two_versions(group, storage="v1alpha1")
    for version in manifest["spec"]["versions"]:
        version["schema"] = _schema_of("size")
    name = create_crd(api, manifest)["metadata"]["name"]
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{group}/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}}
    created = custom.create_namespaced_custom_object(
        group, "v1alpha1", ns, "gadgets", {**body, "spec": {}}
    )
    assert created["spec"] == {}
    # v1's own default is not the one read: the object is stored in v1alpha1
    _replace(ext, name, _size_defaulted({"v1alpha1": 3, "v1": 5}))

    def defaulted() -> dict[str, Any] | None:
        got = custom.get_namespaced_custom_object(group, "v1alpha1", ns, "gadgets", "g")
        return got if got["spec"].get("size") == 3 else None

    got = wait_for(defaulted, 20, "the default added to the CRD on a get", interval=0.05)
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    for version in ("v1alpha1", "v1"):
        (listed,) = custom.list_namespaced_custom_object(group, version, ns, "gadgets")["items"]
        assert (version, listed["spec"]) == (version, {"size": 3})
        events = watch.Watch().stream(
            custom.list_namespaced_custom_object, group, version, ns, "gadgets", timeout_seconds=5
        )
        first = next(iter(events))
        assert (version, first["type"], first["object"]["spec"]) == (version, "ADDED", {"size": 3})
    read_in_v1 = custom.get_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
    assert read_in_v1["spec"] == {"size": 3}


def _spec_schema(**fields: str) -> dict[str, Any]:
    props = {name: {"type": kind} for name, kind in fields.items()}
    spec = {"type": "object", "properties": props}
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}


def test_an_object_written_in_another_version_is_stored_in_the_storage_version(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    """kube-apiserver stores every object of a CRD in its storage version, converted and
    pruned to that version's schema (the ``schemaCoercingConverter`` of its storage codec),
    and answers a write by decoding what it stored: written through ``v1``, an object of a
    CRD stored as ``v1alpha1`` comes back with ``v1alpha1``'s defaults, and what only ``v1``
    declares is lost (the caveat of conversion strategy ``None``)."""
    group = fresh_group
    manifest = two_versions(group, storage="v1alpha1")
    alpha, v1 = manifest["spec"]["versions"]
    alpha["schema"] = _spec_schema(size="integer")
    alpha["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["default"] = 3
    v1["schema"] = _spec_schema(size="integer", color="string")
    create_crd(api, manifest)
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    created = custom.create_namespaced_custom_object(
        group, "v1", ns, "gadgets", {**body, "spec": {"color": "red"}}
    )
    assert (created["apiVersion"], created["spec"]) == (f"{group}/v1", {"size": 3})
    got = custom.get_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
    assert got["spec"] == {"size": 3}
    replaced = custom.replace_namespaced_custom_object(
        group, "v1", ns, "gadgets", "g", {**got, "spec": {"color": "blue"}}
    )
    assert replaced["spec"] == {"size": 3}
    patched = custom.patch_namespaced_custom_object(
        group, "v1", ns, "gadgets", "g", {"spec": {"color": "green", "size": 4}}
    )
    assert patched["spec"] == {"size": 4}
    in_alpha = custom.get_namespaced_custom_object(group, "v1alpha1", ns, "gadgets", "g")
    assert (in_alpha["apiVersion"], in_alpha["spec"]) == (f"{group}/v1alpha1", {"size": 4})


def gadget_stored_in_v1alpha1(api: ApiClient, group: str, ns: str) -> client.CustomObjectsApi:
    """A CRD of ``group`` whose two versions declare ``spec.size``, stored in ``v1alpha1``,
    and its Gadget ``g`` (size 1) written in ``v1alpha1``."""
    manifest = two_versions(group, storage="v1alpha1")
    for version in manifest["spec"]["versions"]:
        version["schema"] = _schema_of("size")
    create_crd(api, manifest)
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{group}/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}}
    custom.create_namespaced_custom_object(
        group, "v1alpha1", ns, "gadgets", {**body, "spec": {"size": 1}}
    )
    return custom


def test_an_update_in_another_version_that_stores_nothing_new_is_not_written(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    """kube-apiserver compares an update with the object as stored (in the storage version)
    and skips a write that would store the same: an unchanged object put back through
    another version keeps its resourceVersion, and its watchers see no event."""
    group = fresh_group
    custom = gadget_stored_in_v1alpha1(api, group, ns)
    got = custom.get_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
    again = custom.replace_namespaced_custom_object(group, "v1", ns, "gadgets", "g", got)
    assert again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
    assert again["apiVersion"] == f"{group}/v1"
