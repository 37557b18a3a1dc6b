"""CustomResourceDefinitions: conditions, serving, discovery, custom objects, deletion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    crd_condition,
    crd_manifest,
    create_crd,
    gone,
    raises_status,
    raw,
    to_dict,
    unique,
    wait_for,
    watch_events,
)

pytestmark = pytest.mark.timeout(60)


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


def test_an_update_of_a_custom_object_without_resource_version_is_invalid(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    ns: str,
    fresh_group: str,
) -> None:
    # a custom resource allows no unconditional update (apiextensions' customResourceStrategy,
    # AllowUnconditionalUpdate false; the generic store's Update): a PUT built from scratch
    # would overwrite what others wrote meanwhile. A ConfigMap's strategy allows it.
    create_crd(api, crd_manifest(fresh_group, "things", "Thing"))
    g = fresh_group
    custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "t1", n=1))
    blind = thing(g, "t1", n=2)
    for write in (
        custom.replace_namespaced_custom_object,
        custom.replace_namespaced_custom_object_status,
    ):
        with raises_status(422, "Invalid") as status:
            write(g, "v1", ns, "things", "t1", blind)
        assert status["message"] == (
            f'things.{g} "t1" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
            "must be specified for an update"
        )
        assert status["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0x0: must be specified for an update",
                "field": "metadata.resourceVersion",
            }
        ]
    assert custom.get_namespaced_custom_object(g, "v1", ns, "things", "t1")["spec"] == {"n": 1}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    replaced = core.replace_namespaced_config_map(
        "cm", ns, {"metadata": {"name": "cm"}, "data": {"a": "2"}}
    )
    assert replaced.data == {"a": "2"}


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


def test_a_custom_objects_metadata_and_schema_faults_are_refused_together(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # customResourceValidator.Validate: ValidateObjectMetaAccessor, then the schema, in one list
    create_crd(api, typed_crd(fresh_group))
    body = thing(fresh_group, "Not_A_Name", "Typed", replicas=-1)
    body["metadata"]["labels"] = {"bad key!": "x"}
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(fresh_group, "v1", ns, "typeds", body)
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("metadata.name", "FieldValueInvalid"),
        ("metadata.labels", "FieldValueInvalid"),
        ("spec.replicas", "FieldValueInvalid"),
    ]


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


# ----------------------------------------------------------------- CEL validation rules


def ruled_crd(group: str, spec_rules: list[dict[str, Any]], **props: Any) -> dict[str, Any]:
    """A CRD ``Ruled`` whose ``spec`` (replicas, color, name, legacy, ports) has ``spec_rules``
    and whose ``status.ready`` must not exceed ``spec``'s replicas (a status rule)."""
    manifest = crd_manifest(group, "ruleds", "Ruled")
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"] = {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": spec_rules,
            "properties": {
                "replicas": {"type": "integer"},
                "color": {"type": "string"},
                "legacy": {"type": "string"},
                "name": {"type": "string", **props.get("name", {})},
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"port": {"type": "integer"}},
                        "x-kubernetes-validations": [
                            {"rule": "self.port > 0 && self.port < 65536", "message": "bad port"}
                        ],
                    },
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {"ready": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.ready <= 3", "message": "at most 3 ready"},
            ],
        },
    }
    return manifest


def ruled(group: str, obj_name: str, **spec: Any) -> dict[str, Any]:
    """A ``Ruled`` object (its spec may have a ``name``)."""
    return {**thing(group, obj_name, "Ruled"), "spec": spec}


_BLUE_MAX_5 = {"rule": "self.replicas <= 5 || self.color == 'red'", "message": "blue widgets max 5"}


def _refused(
    custom: client.CustomObjectsApi, ns: str, group: str, body: dict[str, Any]
) -> dict[str, Any]:
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(group, "v1", ns, "ruleds", body)
    return status


@pytest.mark.parametrize(
    ("rule", "detail"),
    [
        (_BLUE_MAX_5, "blue widgets max 5"),
        (
            {
                "rule": "self.replicas <= 5",
                "messageExpression": "'blue widgets max 5, not ' + string(self.replicas)",
            },
            "blue widgets max 5, not 7",
        ),
        ({"rule": "self.replicas <= 5"}, "failed rule: self.replicas <= 5"),
    ],
    ids=["message", "messageExpression", "no-message"],
)
def test_a_custom_object_breaking_a_cel_rule_is_invalid(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    rule: dict[str, Any],
    detail: str,
) -> None:
    # apiextensions-apiserver's cel.Validator: field.Invalid at the rule's node, shown by
    # the node's type in 1.31
    create_crd(api, ruled_crd(fresh_group, [rule]))
    status = _refused(custom, ns, fresh_group, ruled(fresh_group, "bad", replicas=7, color="blue"))
    assert status["message"] == (
        f'Ruled.{fresh_group} "bad" is invalid: spec: Invalid value: "object": {detail}'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: "object": {detail}',
            "field": "spec",
        }
    ]
    custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "ruleds", ruled(fresh_group, "good", replicas=5, color="blue")
    )


def test_a_cel_rule_s_field_path_and_reason_move_and_word_its_error(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    rule = {
        "rule": "!has(self.legacy)",
        "message": "legacy is no longer supported",
        "fieldPath": ".legacy",
        "reason": "FieldValueForbidden",
    }
    create_crd(api, ruled_crd(fresh_group, [rule]))
    status = _refused(custom, ns, fresh_group, ruled(fresh_group, "old", legacy="yes"))
    assert status["message"] == (
        f'Ruled.{fresh_group} "old" is invalid: spec.legacy: Forbidden: legacy is no longer supported'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: legacy is no longer supported",
            "field": "spec.legacy",
        }
    ]


def test_a_transition_rule_refuses_a_change_on_update_not_a_create(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    immutable = {
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}]
    }
    create_crd(api, ruled_crd(fresh_group, [], name=immutable))
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "ruleds", ruled(fresh_group, "fixed", name="a", replicas=1)
    )
    created["spec"]["replicas"] = 2  # the rest may change
    updated = custom.replace_namespaced_custom_object(
        fresh_group, "v1", ns, "ruleds", "fixed", created
    )
    updated["spec"]["name"] = "b"
    with raises_status(422, "Invalid") as status:
        custom.replace_namespaced_custom_object(fresh_group, "v1", ns, "ruleds", "fixed", updated)
    assert status["message"] == (
        f'Ruled.{fresh_group} "fixed" is invalid: spec.name: Invalid value: "string": field is immutable'
    )
    with raises_status(422, "Invalid"):
        custom.patch_namespaced_custom_object(
            fresh_group, "v1", ns, "ruleds", "fixed", {"spec": {"name": "c"}}
        )


def test_a_cel_rule_of_list_items_is_checked_on_each_item(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, ruled_crd(fresh_group, []))
    body = ruled(fresh_group, "ports", ports=[{"port": 80}, {"port": 0}, {"port": 70000}])
    status = _refused(custom, ns, fresh_group, body)
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.ports[1]", 'Invalid value: "object": bad port'),
        ("spec.ports[2]", 'Invalid value: "object": bad port'),
    ]


def test_a_crd_whose_cel_rule_does_not_compile_is_refused(api: ApiClient, fresh_group: str) -> None:
    manifest = ruled_crd(
        fresh_group, [{"rule": "self.replicas <=", "message": "blue widgets max 5"}]
    )
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    where = (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert status["message"].startswith(
        f'CustomResourceDefinition.apiextensions.k8s.io "ruleds.{fresh_group}" is invalid: '
        f'{where}: Invalid value: apiextensions.ValidationRule{{Rule:"self.replicas <=", '
        'Message:"blue widgets max 5", '
    )
    assert ": compilation failed: " in status["message"]
    assert [c["field"] for c in status["details"]["causes"]] == [where]


def test_a_crd_whose_cel_rule_names_an_undeclared_field_is_refused(
    api: ApiClient, fresh_group: str
) -> None:
    # kube-apiserver type-checks a rule against the schema: a typo is caught at install,
    # not by the first write that reaches it
    manifest = ruled_crd(fresh_group, [{"rule": "self.replicas > 0 && has(self.colour)"}])
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    assert status["message"].endswith(
        ": compilation failed: ERROR: <input>:1:30: undefined field 'colour'\n"
        " | self.replicas > 0 && has(self.colour)\n"
        " | " + "." * 29 + "^"
    ), status["message"]


def test_rules_naming_declared_fields_methods_and_strings_are_accepted(
    api: ApiClient, fresh_group: str
) -> None:
    rules = [
        {"rule": "self.name.startsWith('w') || !has(self.name)"},
        {"rule": "self.color != 'self.colour' // self.nothing"},
        {"rule": "self.ports.all(p, p.port > 0)"},
        {"rule": "self.replicas >= oldSelf.replicas", "message": "no scaling down"},
    ]
    create_crd(api, ruled_crd(fresh_group, rules))


def test_a_status_write_is_checked_against_the_status_rules(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, ruled_crd(fresh_group, []))
    custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "ruleds", ruled(fresh_group, "st", replicas=1)
    )
    custom.patch_namespaced_custom_object_status(
        fresh_group, "v1", ns, "ruleds", "st", {"status": {"ready": 3}}
    )
    with raises_status(422, "Invalid") as status:
        custom.patch_namespaced_custom_object_status(
            fresh_group, "v1", ns, "ruleds", "st", {"status": {"ready": 4}}
        )
    assert status["message"] == (
        f'Ruled.{fresh_group} "st" is invalid: status: Invalid value: "object": at most 3 ready'
    )


def _deleted_while_held(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, group: str, *others: str
) -> str:
    """Create CRD ``things`` of ``group`` with a custom resource ``held`` that a finalizer
    holds (and ``others``), then delete the CRD; its name."""
    manifest = crd_manifest(group, "things", "Thing")
    create_crd(api, manifest)
    held = thing(group, "held")
    held["metadata"]["finalizers"] = ["conformance.mcruntime.io/hold"]
    for body in (held, *(thing(group, o) for o in others)):
        custom.create_namespaced_custom_object(group, "v1", ns, "things", body)
    name: str = manifest["metadata"]["name"]
    client.ApiextensionsV1Api(api).delete_custom_resource_definition(name)
    return name


def test_a_custom_resource_s_finalizer_holds_its_deleted_crd_terminating(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # what an operator's finalizer relies on when its CRD is uninstalled: the apiextensions
    # server deletes the custom resources, and the CRD stays until their finalizers are done
    g, name = fresh_group, _deleted_while_held(api, custom, ns, fresh_group, "free")
    ext = client.ApiextensionsV1Api(api)
    try:

        def left() -> list[str]:
            items = custom.list_namespaced_custom_object(g, "v1", ns, "things")["items"]
            return [i["metadata"]["name"] for i in items]

        wait_for(lambda: left() == ["held"], 30, "the free custom resource deleted")
        crd = to_dict(api, ext.read_custom_resource_definition(name))
        assert crd["metadata"]["deletionTimestamp"]
        assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
        terminating = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"]
        assert [(c["status"], c["reason"]) for c in terminating] == [
            ("True", "InstanceDeletionInProgress")
        ]
        marked = custom.get_namespaced_custom_object(g, "v1", ns, "things", "held")
        assert marked["metadata"]["deletionTimestamp"]
        with raises_status(405, "MethodNotAllowed") as status:
            custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "late"))
        assert status["message"] == (
            "create not allowed while custom resource definition is terminating"
        )
    finally:
        custom.patch_namespaced_custom_object(
            g, "v1", ns, "things", "held", {"metadata": {"finalizers": None}}
        )
    wait_for(gone(lambda: ext.read_custom_resource_definition(name)), 60, f"CRD {name} removed")


def _terminating(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c["type"] == "Terminating"), None)


@pytest.mark.timeout(180)  # kube-apiserver's cleanup waits a minute before it says so
def test_a_crd_cleanup_a_finalizer_holds_reports_instance_deletion_check_and_starts_again(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    kube_backend: KubeBackend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # apiextensions' CRD finalizer waits a minute for the custom resources to go, then says
    # InstanceDeletionCheck and starts over (InstanceDeletionInProgress) until they are
    # gone; what `kubectl get crd -o yaml` shows of an uninstall stuck on a finalizer
    if kube_backend.server is not None:
        monkeypatch.setattr(kube_backend.server, "crd_cleanup_timeout", 0.5)
    ext = client.ApiextensionsV1Api(api)
    g, name = fresh_group, _deleted_while_held(api, custom, ns, fresh_group)
    held = True
    try:

        def reasons(events: list[dict[str, Any]]) -> list[str]:
            out: list[str] = []
            for e in events:
                cond = _terminating(e["raw_object"])
                if cond is not None and (not out or out[-1] != cond["reason"]):
                    out.append(cond["reason"])
            return out

        def started_again(events: list[dict[str, Any]]) -> bool:
            seen = reasons(events)
            return "InstanceDeletionCheck" in seen and seen[-1] == "InstanceDeletionInProgress"

        events = watch_events(
            ext.list_custom_resource_definition,
            field_selector=f"metadata.name={name}",
            until=started_again,
            timeout=120,
        )
        assert started_again(events), reasons(events)
        checks = [
            c
            for e in events
            if (c := _terminating(e["raw_object"])) and c["reason"] == "InstanceDeletionCheck"
        ]
        assert (checks[0]["status"], checks[0]["message"]) == (
            "True",
            "could not confirm zero CustomResources remaining: context deadline exceeded",
        )
        # still True: the condition's transition time stays that of the first pass
        first = next(c for e in events if (c := _terminating(e["raw_object"])))
        assert checks[0]["lastTransitionTime"] == first["lastTransitionTime"]
        assert custom.get_namespaced_custom_object(g, "v1", ns, "things", "held")
        since = ext.read_custom_resource_definition(name).metadata.resource_version
        custom.patch_namespaced_custom_object(
            g, "v1", ns, "things", "held", {"metadata": {"finalizers": None}}
        )
        held = False
        ended = watch_events(
            ext.list_custom_resource_definition,
            field_selector=f"metadata.name={name}",
            resource_version=since,
            until=lambda events: events[-1]["type"] == "DELETED",
            timeout=30,
        )
        # the cleanup's last write (InstanceDeletionCompleted, no finalizer) deletes the CRD,
        # so it is never stored: the DELETED event carries the CRD as it was last stored
        assert ended[-1]["type"] == "DELETED", [e["type"] for e in ended]
    finally:
        if held:
            custom.patch_namespaced_custom_object(
                g, "v1", ns, "things", "held", {"metadata": {"finalizers": None}}
            )
    wait_for(gone(lambda: ext.read_custom_resource_definition(name)), 60, f"CRD {name} removed")


@pytest.mark.timeout(180)  # kube-apiserver's cleanup looks again a minute or so later
def test_a_server_side_apply_may_create_while_the_crd_terminates_and_the_cleanup_deletes_it(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # kube-apiserver refuses a POST while the CRD terminates, not a PATCH that creates (an
    # apply): what that creates is deleted by the CRD's cleanup, which goes on until none is left
    g, name = fresh_group, _deleted_while_held(api, custom, ns, fresh_group)
    ext = client.ApiextensionsV1Api(api)
    try:
        wait_for(
            lambda: custom.get_namespaced_custom_object(g, "v1", ns, "things", "held")[
                "metadata"
            ].get("deletionTimestamp"),
            30,
            "the held custom resource marked",
        )
        path = f"/apis/{g}/v1/namespaces/{ns}/things/applied"
        answer = raw(
            api,
            "PATCH",
            path,
            query=[("fieldManager", "conformance")],
            body=json.dumps(thing(g, "applied")),
            content_type="application/apply-patch+yaml",
        )
        assert answer.status == 201, answer.data
        wait_for(
            gone(lambda: custom.get_namespaced_custom_object(g, "v1", ns, "things", "applied")),
            150,
            "the applied custom resource deleted by the CRD's cleanup",
        )
    finally:
        custom.patch_namespaced_custom_object(
            g, "v1", ns, "things", "held", {"metadata": {"finalizers": None}}
        )
    wait_for(gone(lambda: ext.read_custom_resource_definition(name)), 60, f"CRD {name} removed")


def test_a_crd_held_by_another_finalizer_after_its_cleanup_takes_creates_again(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # the POST refusal follows the Terminating condition, which the cleanup sets false once
    # it removed every custom resource, not the deletion mark another finalizer keeps
    manifest = crd_manifest(fresh_group, "things", "Thing")
    manifest["metadata"]["finalizers"] = ["conformance.mcruntime.io/keep"]
    create_crd(api, manifest)
    g, name = fresh_group, manifest["metadata"]["name"]
    ext = client.ApiextensionsV1Api(api)
    ext.delete_custom_resource_definition(name)
    try:

        def cleaned() -> bool:
            crd = to_dict(api, ext.read_custom_resource_definition(name))
            return crd["metadata"]["finalizers"] == ["conformance.mcruntime.io/keep"]

        wait_for(cleaned, 30, "the CRD's cleanup done")
        crd = to_dict(api, ext.read_custom_resource_definition(name))
        terminating = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"]
        assert [(c["status"], c["reason"]) for c in terminating] == [
            ("False", "InstanceDeletionCompleted")
        ]
        created = custom.create_namespaced_custom_object(g, "v1", ns, "things", thing(g, "late"))
        assert created["metadata"]["name"] == "late"
    finally:
        ext.patch_custom_resource_definition(name, {"metadata": {"finalizers": None}})
    wait_for(gone(lambda: ext.read_custom_resource_definition(name)), 60, f"CRD {name} removed")


def _crd_now(api: ApiClient, name: str) -> dict[str, Any]:
    return to_dict(api, client.ApiextensionsV1Api(api).read_custom_resource_definition(name))


def _conditions(crd: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason") or "", c.get("message") or "")
        for c in (crd.get("status") or {}).get("conditions") or ()
    }


def _names_refused(api: ApiClient, name: str) -> dict[str, Any]:
    """The CRD ``name`` once the naming controller has refused its names."""

    def refused() -> dict[str, Any] | None:
        crd = _crd_now(api, name)
        return crd if crd_condition(crd, "NamesAccepted") == "False" else None

    crd: dict[str, Any] = wait_for(refused, 15, f"NamesAccepted=False on {name}", interval=0.05)
    return crd


def test_a_crd_whose_kind_another_crd_of_the_group_has_is_not_established(
    api: ApiClient, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "dupas", "Dup", short_names=["dup"]))
    ext = client.ApiextensionsV1Api(api)
    later = crd_manifest(fresh_group, "dupbs", "Dup")
    ext.create_custom_resource_definition(later)
    crd = _names_refused(api, later["metadata"]["name"])
    # the kind and the list kind both conflict; the list kind is checked last
    conditions = _conditions(crd)
    assert conditions["NamesAccepted"] == (
        "False",
        "ListKindConflict",
        '"DupList" is already in use',
    )
    assert conditions["Established"] == ("False", "NotAccepted", "not all names are accepted")
    accepted = crd["status"]["acceptedNames"]
    assert accepted["plural"] == "dupbs" and accepted["kind"] == ""
    assert "listKind" not in accepted
    listed = raw(api, "GET", f"/apis/{fresh_group}/v1").json()["resources"]
    assert {r["name"] for r in listed if "/" not in r["name"]} == {"dupas"}
    assert raw(api, "GET", f"/apis/{fresh_group}/v1/dupbs").status == 404
    # the first CRD's deletion frees the names: the naming controller gives them to the other
    ext.delete_custom_resource_definition("dupas." + fresh_group)

    def accepted_now() -> dict[str, Any] | None:
        crd = _crd_now(api, later["metadata"]["name"])
        return crd if crd_condition(crd, "Established") == "True" else None

    crd = wait_for(accepted_now, 15, "the later CRD to be established", interval=0.05)
    assert _conditions(crd)["NamesAccepted"] == ("True", "NoConflicts", "no conflicts found")
    assert crd["status"]["acceptedNames"]["kind"] == "Dup"


def test_a_short_name_another_crd_of_the_group_has_is_a_conflict(
    api: ApiClient, fresh_group: str
) -> None:
    create_crd(api, crd_manifest(fresh_group, "firsts", "First", short_names=["fs"]))
    later = crd_manifest(fresh_group, "seconds", "Second", short_names=["fs", "firsts", "sc"])
    client.ApiextensionsV1Api(api).create_custom_resource_definition(later)
    crd = _names_refused(api, later["metadata"]["name"])
    assert _conditions(crd)["NamesAccepted"] == (
        "False",
        "ShortNamesConflict",
        '["fs" is already in use, "firsts" is already in use]',
    )
    assert crd_condition(crd, "Established") == "False"
    assert "shortNames" not in crd["status"]["acceptedNames"]
    assert crd["status"]["acceptedNames"]["kind"] == "Second"


@pytest.mark.parametrize(
    ("field", "change", "shown"),
    [
        ("spec.scope", lambda spec: spec.update(scope="Cluster"), '"Cluster"'),
        ("spec.names.kind", lambda spec: spec["names"].update(kind="Gizmo"), '"Gizmo"'),
        ("spec.names.plural", lambda spec: spec["names"].update(plural="gizmos"), '"gizmos"'),
        ("spec.group", lambda spec: spec.update(group="other.example.com"), '"other.example.com"'),
    ],
)
def test_an_established_crd_s_scope_kind_group_and_plural_are_immutable(
    api: ApiClient, fresh_group: str, field: str, change: Any, shown: str
) -> None:
    # its objects are stored under them: a CRD upgrade that changes one is refused, not
    # applied with the objects of the old scope lost
    name = create_crd(api, crd_manifest(fresh_group, "things", "Thing"))["metadata"]["name"]
    crd = _crd_now(api, name)
    change(crd["spec"])
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).replace_custom_resource_definition(name, crd)
    assert status["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: '
        f"{field}: Invalid value: {shown}: field is immutable"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: {shown}: field is immutable",
            "field": field,
        }
    ]
    assert _crd_now(api, name)["spec"]["scope"] == "Namespaced"


def test_a_crd_not_established_may_change_its_kind(api: ApiClient, fresh_group: str) -> None:
    # its kind another CRD of the group has: not established, so it may take another kind
    create_crd(api, crd_manifest(fresh_group, "dupas", "Dup"))
    later = crd_manifest(fresh_group, "dupbs", "Dup")
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(later)
    crd = _names_refused(api, later["metadata"]["name"])
    crd["spec"]["names"].update(kind="Dupb", listKind="DupbList", singular="dupb")
    ext.replace_custom_resource_definition(later["metadata"]["name"], crd)

    def established() -> dict[str, Any] | None:
        now = _crd_now(api, later["metadata"]["name"])
        return now if crd_condition(now, "Established") == "True" else None

    crd = wait_for(established, 15, "the renamed CRD to be established", interval=0.05)
    assert crd["status"]["acceptedNames"]["kind"] == "Dupb"
