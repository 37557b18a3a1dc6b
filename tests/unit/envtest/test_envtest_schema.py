"""CRD structural schema handling (pruning, defaults, validation) and metadata validation."""

from __future__ import annotations

import orjson
import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest._schema import apply_schema

pytestmark = pytest.mark.timeout(30)

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "slow"},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {
                    "type": "array",
                    "maxItems": 2,
                    "items": {"type": "string", "pattern": "^[a-z]+$"},
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def _obj(**spec: object) -> dict:
    return {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec, "extra": 1}


def test_unknown_fields_are_pruned_and_defaults_filled() -> None:
    out, causes = apply_schema(
        _obj(size=2, junk=True, free={"any": {"thing": 1}}, env={"A": "b"}), SCHEMA
    )
    assert causes == []
    assert out["spec"] == {
        "size": 2,
        "free": {"any": {"thing": 1}},
        "env": {"A": "b"},
        "mode": "slow",
    }
    assert "extra" not in out and out["metadata"] == {"name": "n"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"size": "2"}, "spec.size"),
        ({"size": 0}, "spec.size"),
        ({"size": 11}, "spec.size"),
        ({"size": 1, "mode": "medium"}, "spec.mode"),
        ({"size": 1, "port": 1.5}, "spec.port"),
        ({"size": 1, "tags": ["a", "b", "c"]}, "spec.tags"),
        ({"size": 1, "tags": ["A"]}, "spec.tags[0]"),
        ({"size": 1, "env": {"A": 1}}, "spec.env.A"),
        ({}, "spec.size"),
    ],
)
def test_schema_violations_name_the_field(spec: dict, field: str) -> None:
    _out, causes = apply_schema(_obj(**spec), SCHEMA)
    assert [c[1] for c in causes] == [field]


def test_custom_objects_are_validated_through_the_api(api: ApiClient) -> None:
    crd = {
        "metadata": {"name": "sized.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "sized", "kind": "Sized"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": SCHEMA},
                }
            ],
        },
    }
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    co = client.CustomObjectsApi(api)
    with pytest.raises(client.ApiException) as e:
        co.create_namespaced_custom_object(
            "example.com",
            "v1",
            "default",
            "sized",
            {"metadata": {"name": "bad"}, "spec": {"size": 99}},
        )
    body = orjson.loads(e.value.body)
    assert (e.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.size"
    ok = co.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "sized",
        {"metadata": {"name": "ok"}, "spec": {"size": 3, "x": 1}},
    )
    assert ok["spec"] == {"size": 3, "mode": "slow"}
    with pytest.raises(client.ApiException) as e:
        co.patch_namespaced_custom_object_status(
            "example.com", "v1", "default", "sized", "ok", {"status": {"ready": "yes"}}
        )
    assert e.value.status == 422


@pytest.mark.parametrize(
    "labels",
    [{"bad key!": "v"}, {"k": "bad value!"}, {"k": "x" * 64}, {"UPPER.example.com/k": "v"}],
)
def test_malformed_labels_are_invalid(core: client.CoreV1Api, labels: dict) -> None:
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map("default", {"metadata": {"name": "l", "labels": labels}})
    assert e.value.status == 422


def test_valid_qualified_labels_are_accepted(core: client.CoreV1Api) -> None:
    labels = {"app.kubernetes.io/name": "web", "Tier_1": "", "x": "A.b-c_d"}
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "ok", "labels": labels}}
    )
    assert cm.metadata.labels == labels


def test_multiple_of_and_set_uniqueness_are_checked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "step": {"type": "number", "multipleOf": 0.5},
                    "ids": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"x-kubernetes-int-or-string": True},
                    },
                },
            }
        },
    }
    _, causes = apply_schema(_obj(step=1.5, ids=[1, "1", 2]), schema)
    assert causes == []
    _, causes = apply_schema(_obj(step=1.2, ids=[1, 2, 1, 1]), schema)
    assert causes == [
        (
            "FieldValueInvalid",
            "spec.step",
            "spec.step: Invalid value: 1.2: spec.step in body should be a multiple of 0.5",
        ),
        ("FieldValueDuplicate", "spec.ids[2]", "spec.ids[2]: Duplicate value: 1"),
    ]


@pytest.mark.parametrize(
    ("items", "shown"),
    [
        # Go's %#v of the keys decoded from JSON: an integer as int64, a fraction as a
        # float64 in %g's shortest form, a null as interface {}(nil)
        ([{"k": 1}, {"k": 1}], 'map[string]interface {}{"k":1}'),
        ([{"k": 1.5}, {"k": 1.5}], 'map[string]interface {}{"k":1.5}'),
        ([{"k": 1234567.5}, {"k": 1234567.5}], 'map[string]interface {}{"k":1.2345675e+06}'),
        ([{"k": True}, {"k": True}], 'map[string]interface {}{"k":true}'),
        ([{"k": None}, {"k": None}], 'map[string]interface {}{"k":interface {}(nil)}'),
        # no key at all: an "unspecified" key, shown as an empty map
        ([{"v": 1}, {"v": 2}], "map[string]interface {}{}"),
        ([None, {"v": 2}], "map[string]interface {}{}"),
    ],
)
def test_list_map_duplicates_show_their_keys_as_go_does(items: list, shown: str) -> None:
    any_item = {"type": "object", "nullable": True, "x-kubernetes-preserve-unknown-fields": True}
    keyed = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]}
    spec = {"type": "object", "properties": {"m": {"type": "array", "items": any_item, **keyed}}}
    schema = {"type": "object", "properties": {"spec": spec}}
    _, causes = apply_schema(_obj(m=items), schema)
    assert causes == [("FieldValueDuplicate", "spec.m[1]", f"spec.m[1]: Duplicate value: {shown}")]
    _, causes = apply_schema(_obj(m=[{"k": 1}, {"k": 1.5}, {"k": "1"}, {"k": True}]), schema)
    assert causes == []


def test_duplicates_in_sets_are_checked_on_update_only_when_the_old_object_had_none() -> None:
    # apiextensions' strategy runs ValidateListSetsAndMaps on the new object of an update
    # only when the old one passes it (a CRD that made a list a set keeps its old objects
    # writable); the other checks of a changed value still apply
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"},
                    },
                    "b": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"},
                    },
                    "n": {"type": "integer", "maximum": 3},
                },
            }
        },
    }
    clean = _obj(a=["x"], b=["y"], n=1)
    duplicated = {**clean, "spec": {**clean["spec"], "b": ["y", "y"]}}
    _, causes = apply_schema(duplicated, schema, old=clean)
    assert causes == [("FieldValueDuplicate", "spec.b[1]", 'spec.b[1]: Duplicate value: "y"')]
    old = _obj(a=["x", "x"], b=["y"], n=1)
    _, causes = apply_schema(_obj(a=["x", "x"], b=["y", "y"], n=5), schema, old=old)
    assert [c[1] for c in causes] == ["spec.n"]
    _, causes = apply_schema(_obj(a=["x", "x"], b=["y", "y"], n=5), schema)  # a create
    assert [c[1] for c in causes] == ["spec.a[1]", "spec.b[1]", "spec.n"]


def test_ratcheting_compares_values_as_kube_apiservers_correlated_object_does() -> None:
    # common.CorrelatedObject.CachedDeepEqual: a map list is equal to its old value when its
    # items are, in any order; an object with a key its schema does not declare (kept
    # unknown, or metadata's) is never equal, so the root's own checks are not ratcheted
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "ports": {
                        "type": "array",
                        "maxItems": 1,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                        },
                    },
                    "free": {
                        "type": "object",
                        "maxProperties": 1,
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                },
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    ports = [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    old = _obj(ports=ports, free={"x": 1, "y": 2})
    _, causes = apply_schema(_obj(ports=ports[::-1], free={"x": 1, "y": 2}), schema, old=old)
    assert [c[1] for c in causes] == ["spec.free"]  # the reordered ports pass as unchanged
    # an object stored before `spec` was required, written back unchanged: still refused
    bare = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "status": {}}
    _, causes = apply_schema(bare, schema, old=bare)
    assert causes == [("FieldValueRequired", "spec", "spec: Required value")]
