"""CustomResourceDefinitions: conditions, serving, discovery, custom objects, deletion."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import (
    crd_condition,
    crd_manifest,
    create_crd,
    delete_crd,
    gone,
    raises_status,
    raw,
    to_dict,
    unique,
    wait_for,
    watch_events,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fresh_group(api: ApiClient) -> Iterator[str]:
    """A unique API group; CRDs created in it are deleted after the test."""
    group = f"{unique('g')}.conformance.mcruntime.io"
    yield group
    ext = client.ApiextensionsV1Api(api)
    for crd in ext.list_custom_resource_definition().items:
        if crd.spec.group == group:
            delete_crd(api, crd.metadata.name)


def thing(group: str, name: str, kind: str = "Thing", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec or {"n": 1},
    }


def test_created_crd_is_established_and_names_accepted(api: ApiClient, fresh_group: str) -> None:
    crd = create_crd(api, crd_manifest(fresh_group, "things", "Thing"))
    assert crd_condition(crd, "NamesAccepted") == "True"
    assert crd_condition(crd, "Established") == "True"
    accepted = crd["status"]["acceptedNames"]
    assert accepted["plural"] == "things"
    assert accepted["kind"] == "Thing"
    assert crd["status"]["storedVersions"] == ["v1"]


def test_crd_group_and_resource_become_discoverable(api: ApiClient, fresh_group: str) -> None:
    create_crd(api, crd_manifest(fresh_group, "things", "Thing", short_names=["th"]))
    groups = {g["name"]: g for g in raw(api, "GET", "/apis").json()["groups"]}
    assert groups[fresh_group]["preferredVersion"]["groupVersion"] == f"{fresh_group}/v1"
    resources = {
        r["name"]: r for r in raw(api, "GET", f"/apis/{fresh_group}/v1").json()["resources"]
    }
    assert resources["things"]["kind"] == "Thing"
    assert resources["things"]["namespaced"] is True
    assert resources["things"]["singularName"] == "thing"
    assert resources["things"]["shortNames"] == ["th"]
    assert {
        "create",
        "get",
        "list",
        "watch",
        "update",
        "patch",
        "delete",
        "deletecollection",
    } <= set(resources["things"]["verbs"])
    assert resources["things/status"]["kind"] == "Thing"
    assert {"get", "patch", "update"} == set(resources["things/status"]["verbs"])


def test_crd_without_status_subresource_lists_none(api: ApiClient, fresh_group: str) -> None:
    create_crd(api, crd_manifest(fresh_group, "plains", "Plain", scope="Cluster", status=False))
    resources = {
        r["name"]: r for r in raw(api, "GET", f"/apis/{fresh_group}/v1").json()["resources"]
    }
    assert resources["plains"]["namespaced"] is False
    assert "plains/status" not in resources


def test_namespaced_custom_objects_round_trip(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "things", "Thing"))
    g = fresh_group
    created = custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "t1", n=1))
    assert created["apiVersion"] == f"{g}/v1"
    assert created["kind"] == "Thing"
    assert created["metadata"]["namespace"] == ns
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"].isdigit()

    got = custom.get_namespaced_custom_object(g, "v1", ns, "things", "t1")
    assert got["spec"] == {"n": 1}
    got["spec"] = {"n": 2}
    replaced = custom.replace_namespaced_custom_object(g, "v1", ns, "things", "t1", got)
    assert replaced["spec"] == {"n": 2}
    assert int(replaced["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )

    listed = custom.list_namespaced_custom_object(g, "v1", ns, "things")
    assert listed["kind"] == "ThingList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["t1"]
    everywhere = custom.list_cluster_custom_object(g, "v1", "things")
    assert "t1" in [i["metadata"]["name"] for i in everywhere["items"]]

    custom.delete_namespaced_custom_object(g, "v1", ns, "things", "t1")
    with raises_status(404, "NotFound"):
        custom.get_namespaced_custom_object(g, "v1", ns, "things", "t1")


def test_cluster_scoped_custom_objects_round_trip(
    api: ApiClient, custom: client.CustomObjectsApi, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "plains", "Plain", scope="Cluster", status=False))
    g = fresh_group
    created = custom.create_cluster_custom_object(g, "v1", "plains", thing(g, "p1", "Plain"))
    assert "namespace" not in created["metadata"]
    assert custom.get_cluster_custom_object(g, "v1", "plains", "p1")["spec"] == {"n": 1}
    patched = custom.patch_cluster_custom_object(g, "v1", "plains", "p1", {"spec": {"n": 5}})
    assert patched["spec"] == {"n": 5}
    custom.delete_cluster_custom_object(g, "v1", "plains", "p1")
    with raises_status(404, "NotFound"):
        custom.get_cluster_custom_object(g, "v1", "plains", "p1")


def test_custom_objects_can_be_watched(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "things", "Thing"))
    g = fresh_group
    custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "w1"))
    custom.patch_namespaced_custom_object(g, "v1", ns, "things", "w1", {"spec": {"n": 2}})
    events = watch_events(
        custom.list_namespaced_custom_object,
        g,
        "v1",
        ns,
        "things",
        resource_version="0",
        until=lambda ev: len(ev) >= 1,
        timeout=10,
    )
    assert events[0]["type"] == "ADDED"
    assert events[0]["raw_object"]["spec"] == {"n": 2}


def test_custom_object_of_missing_namespace_is_not_found(
    api: ApiClient, custom: client.CustomObjectsApi, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "things", "Thing"))
    with raises_status(404, "NotFound"):
        custom.create_namespaced_custom_object(
            fresh_group, "v1", unique("missing"), "things", thing(fresh_group, "x")
        )


def test_deleting_crd_stops_serving_and_deletes_its_objects(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    manifest = crd_manifest(fresh_group, "things", "Thing")
    create_crd(api, manifest)
    g = fresh_group
    custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "doomed"))
    ext = client.ApiextensionsV1Api(api)
    ext.delete_custom_resource_definition(manifest["metadata"]["name"])
    wait_for(
        gone(lambda: ext.read_custom_resource_definition(manifest["metadata"]["name"])),
        30,
        "CRD deleted",
        interval=0.05,
    )
    wait_for(
        lambda: raw(api, "GET", f"/apis/{g}/v1/namespaces/{ns}/things").status == 404,
        10,
        "resource no longer served",
        interval=0.05,
    )
    groups = [grp["name"] for grp in raw(api, "GET", "/apis").json()["groups"]]
    assert g not in groups

    create_crd(api, manifest)
    assert custom.list_namespaced_custom_object(g, "v1", ns, "things")["items"] == []


def test_crd_is_listed_and_readable(
    api: ApiClient, apiext: client.ApiextensionsV1Api, fresh_group: str
) -> None:
    manifest = crd_manifest(fresh_group, "things", "Thing")
    create_crd(api, manifest)
    names = [c.metadata.name for c in apiext.list_custom_resource_definition().items]
    assert manifest["metadata"]["name"] in names
    crd = to_dict(api, apiext.read_custom_resource_definition(manifest["metadata"]["name"]))
    assert crd["spec"]["group"] == fresh_group
    assert crd["spec"]["scope"] == "Namespaced"


def typed_crd(group: str) -> dict[str, Any]:
    """A CRD whose schema types ``spec.replicas`` (integer, minimum 0) and ``spec.title``."""
    manifest = crd_manifest(group, "typeds", "Typed")
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "title": {"type": "string"},
        },
    }
    return manifest


@pytest.mark.parametrize(
    ("schema", "field", "detail"),
    [
        (
            {"properties": {"spec": {"properties": {"size": {"type": "integer"}}}}},
            "properties[spec].type",
            "Required value: must not be empty for specified object fields",
        ),
        (
            {"properties": {"spec": {"type": "array", "items": {"minLength": 1}}}},
            "properties[spec].items.type",
            "Required value: must not be empty for specified array items",
        ),
        (
            {
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {"a": {"type": "string"}},
                        "additionalProperties": {"type": "string"},
                    }
                }
            },
            "properties[spec].additionalProperties",
            "Forbidden: additionalProperties and properties are mutual exclusive",
        ),
        ({"type": "string"}, "type", 'Invalid value: "string": must be object at the root'),
    ],
)
def test_a_crd_whose_schema_is_not_structural_is_refused(
    api: ApiClient, fresh_group: str, schema: dict[str, Any], field: str, detail: str
) -> None:
    # apiextensions.k8s.io/v1 needs structural schemas (validateStructuralInvariants)
    manifest = crd_manifest(fresh_group, "loose", "Loose")
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "object", **schema}
    where = f"spec.versions[0].schema.openAPIV3Schema.{field}"
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    assert status["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "loose.{fresh_group}" is invalid: '
        f"{where}: {detail}"
    )
    assert [c["field"] for c in status["details"]["causes"]] == [where]


def test_custom_object_fields_unknown_to_the_schema_are_pruned(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, typed_crd(fresh_group))
    body = thing(fresh_group, "pruned", "Typed", replicas=1, title="x", extra="dropped")
    body["topLevelExtra"] = "dropped too"
    created = custom.create_namespaced_custom_object(fresh_group, "v1", ns, "typeds", body)
    assert created["spec"] == {"replicas": 1, "title": "x"}
    assert "topLevelExtra" not in created


def test_a_null_the_schema_neither_allows_nor_defaults_is_dropped_not_refused(
    api: ApiClient, ns: str, fresh_group: str
) -> None:
    # kube-apiserver prunes such nulls when it decodes the request
    # (apiextensions-apiserver PruneNonNullableNullsWithoutDefaults); a nullable field keeps
    # its null, and one with a default gets the default
    manifest = typed_crd(fresh_group)
    props = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"]["properties"]["note"] = {"type": "string", "nullable": True}
    props["spec"]["properties"]["mode"] = {"type": "string", "default": "auto"}
    create_crd(api, manifest)
    body = thing(fresh_group, "nulls", "Typed", replicas=None, title=None, note=None, mode=None)
    path = f"/apis/{fresh_group}/v1/namespaces/{ns}/typeds"
    answer = raw(api, "POST", path, body=body, content_type="application/json")
    assert answer.status == 201, answer.data
    assert answer.json()["spec"] == {"note": None, "mode": "auto"}


def test_custom_object_violating_the_schema_is_invalid(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, typed_crd(fresh_group))
    for spec in ({"replicas": "three"}, {"replicas": -1}, {"title": 5}):
        with raises_status(422, "Invalid") as status:
            custom.create_namespaced_custom_object(
                fresh_group, "v1", ns, "typeds", thing(fresh_group, unique("bad"), "Typed", **spec)
            )
        assert any(c.get("field", "").startswith("spec.") for c in status["details"]["causes"])
    custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "typeds", thing(fresh_group, "good", "Typed", replicas=3)
    )


def test_too_long_and_too_many_are_worded_as_apiextensions_words_them(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # apiextensions-apiserver maps maxLength to field.TooLongMaxLength and maxItems and
    # maxProperties to field.TooMany (kubeOpenAPIResultToFieldErrors)
    manifest = typed_crd(fresh_group)
    props = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"]["properties"].update(
        code={"type": "string", "maxLength": 5},
        tags={"type": "array", "items": {"type": "string"}, "maxItems": 2},
        labels={
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": 1,
        },
    )
    create_crd(api, manifest)
    cases = [
        (
            {"code": "ABCDEFG"},
            "spec.code",
            "FieldValueTooLong",
            "spec.code: Too long: may not be longer than 5",
        ),
        (
            {"tags": ["a", "b", "c"]},
            "spec.tags",
            "FieldValueTooMany",
            "spec.tags: Too many: 3: must have at most 2 items",
        ),
        (
            {"labels": {"a": "1", "b": "2"}},
            "spec.labels",
            "FieldValueTooMany",
            "spec.labels: Too many: 2: must have at most 1 items",
        ),
    ]
    for spec, where, reason, message in cases:
        with raises_status(422, "Invalid") as status:
            custom.create_namespaced_custom_object(
                fresh_group, "v1", ns, "typeds", thing(fresh_group, unique("long"), "Typed", **spec)
            )
        assert status["details"]["causes"] == [
            {"reason": reason, "message": message.split(": ", 1)[1], "field": where}
        ]
        assert status["message"].endswith(f" is invalid: {message}")
