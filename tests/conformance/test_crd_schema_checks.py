"""What kube-apiserver checks of a custom object against its CRD's structural schema
beyond types and bounds: list-type map keys, string formats, and a CRD's defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import check_object, crd_manifest, create_crd, raises_status

pytestmark = pytest.mark.timeout(60)


def _crd(group: str, spec: dict[str, Any]) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    props = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"] = {"type": "object", "properties": spec}
    return manifest


def _refused(custom: client.CustomObjectsApi, ns: str, group: str, **spec: Any) -> dict[str, Any]:
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            group, "v1", ns, "checks", check_object(group, **spec)
        )
    return status


# ----------------------------------------------------------- x-kubernetes-list-type: map

_PORTS = {
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
    },
}
_ROUTES = {
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["port", "protocol"],
    "items": {
        "type": "object",
        "required": ["port", "protocol"],
        "properties": {
            "port": {"type": "integer"},
            "protocol": {"type": "string"},
            "to": {"type": "string"},
        },
    },
}


@pytest.mark.parametrize(
    ("spec", "field", "shown"),
    [
        (
            {"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
            "spec.ports[1]",
            'map[string]interface {}{"name":"a"}',
        ),
        (
            {
                "routes": [
                    {"port": 80, "protocol": "TCP", "to": "x"},
                    {"port": 80, "protocol": "UDP"},
                    {"port": 80, "protocol": "TCP", "to": "y"},
                ]
            },
            "spec.routes[2]",
            'map[string]interface {}{"port":80, "protocol":"TCP"}',
        ),
    ],
)
def test_a_list_map_item_repeating_another_s_keys_is_a_duplicate_of_its_keys(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    spec: dict[str, Any],
    field: str,
    shown: str,
) -> None:
    # apiextensions-apiserver's listtype.ValidateListSetsAndMaps: field.Duplicate of the
    # item's keys, shown as Go's %#v of a map
    create_crd(api, _crd(fresh_group, {"ports": _PORTS, "routes": _ROUTES}))
    status = _refused(custom, ns, fresh_group, **spec)
    assert status["details"]["causes"] == [
        {"reason": "FieldValueDuplicate", "message": f"Duplicate value: {shown}", "field": field}
    ]
    assert status["message"].endswith(f" is invalid: {field}: Duplicate value: {shown}")


def test_only_the_second_appearance_of_a_repeated_key_is_reported(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, _crd(fresh_group, {"ports": _PORTS, "routes": _ROUTES}))
    ports = [{"name": n} for n in ("a", "b", "a", "a", "b")]
    status = _refused(custom, ns, fresh_group, ports=ports)
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.ports[2]", 'Duplicate value: map[string]interface {}{"name":"a"}'),
        ("spec.ports[4]", 'Duplicate value: map[string]interface {}{"name":"b"}'),
    ]
    routes = [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}]
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group, ports=ports[:2], routes=routes)
    )
    assert created["spec"]["routes"] == routes


# ----------------------------------------------------------------------------- formats

_FORMATTED = {
    "when": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "id": {"type": "string", "format": "uuid"},
    "note": {"type": "string", "format": "not-a-format"},
}


@pytest.mark.parametrize(
    ("field", "value", "format_"),
    [
        ("when", "yesterday", "date-time"),
        ("when", "2024-01-02T03:04:05", "date-time"),  # no zone
        ("when", "2024-02-30T03:04:05Z", "date-time"),
        ("when", "2024-01-02T24:00:00Z", "date-time"),
        ("day", "2023-02-29", "date"),
        ("day", "2024-1-02", "date"),
        ("id", "not-a-uuid", "uuid"),
    ],
)
def test_a_string_not_of_its_format_is_invalid_in_kube_openapi_s_words(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    field: str,
    value: str,
    format_: str,
) -> None:
    # kube-openapi's FormatOf (errors.InvalidType), which apiextensions makes field.TypeInvalid
    create_crd(api, _crd(fresh_group, _FORMATTED))
    status = _refused(custom, ns, fresh_group, **{field: value})
    detail = f'Invalid value: "{value}": spec.{field} in body must be of type {format_}: "{value}"'
    assert status["details"]["causes"] == [
        {"reason": "FieldValueTypeInvalid", "message": detail, "field": f"spec.{field}"}
    ]
    assert status["message"].endswith(f" is invalid: spec.{field}: {detail}")


def test_strings_of_their_format_and_unknown_formats_are_accepted(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, _crd(fresh_group, _FORMATTED))
    spec = {
        "when": "2024-02-29T23:59:59.123+01:00",
        "day": "2024-02-29",
        "id": "123E4567-E89B-12D3-A456-426614174000",
        "note": "anything",
    }
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group, **spec)
    )
    assert created["spec"] == spec


# ------------------------------------------------------------------ a CRD's own defaults

_AT = "spec.versions[0].schema.openAPIV3Schema.properties[spec]"


@pytest.mark.parametrize(
    ("prop", "reason", "field", "detail"),
    [
        (
            {"type": "integer", "maximum": 3, "default": 10},
            "FieldValueInvalid",
            "properties[p].default",
            # kube-openapi validates the default as a document of its own, named ""
            "Invalid value: 10:  in body should be less than or equal to 3",
        ),
        (
            {"type": "string", "default": 5},
            "FieldValueTypeInvalid",
            "properties[p].default",
            'Invalid value: "integer":  in body must be of type string: "integer"',
        ),
        (
            {"type": "string", "enum": ["a", "b"], "default": "c"},
            "FieldValueNotSupported",
            "properties[p].default",
            'Unsupported value: "c": supported values: "a", "b"',
        ),
        (
            {"type": "string", "pattern": "^[a-z]+$", "default": "A1"},
            "FieldValueInvalid",
            "properties[p].default",
            "Invalid value: \"A1\":  in body should match '^[a-z]+$'",
        ),
        (
            {"type": "string", "minLength": 3, "default": "ab"},
            "FieldValueInvalid",
            "properties[p].default",
            'Invalid value: "ab":  in body should be at least 3 chars long',
        ),
        (
            {"type": "string", "format": "date-time", "default": "yesterday"},
            "FieldValueTypeInvalid",
            "properties[p].default",
            'Invalid value: "yesterday":  in body must be of type date-time: "yesterday"',
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1}},
                "default": {"n": 0},
            },
            "FieldValueInvalid",
            "properties[p].default.n",
            "Invalid value: 0: n in body should be greater than or equal to 1",
        ),
        (
            {
                "type": "object",
                "required": ["n"],
                "properties": {"n": {"type": "integer"}, "m": {"type": "integer"}},
                "default": {"m": 1},
            },
            "FieldValueRequired",
            "properties[p].default.n",
            "Required value",
        ),
        (
            {
                "type": "array",
                "items": {"type": "integer"},
                "default": [1, "two"],
            },
            "FieldValueTypeInvalid",
            "properties[p].default.[1]",
            'Invalid value: "string": [1] in body must be of type integer: "string"',
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "default": {"n": 1, "extra": "x"},
            },
            "FieldValueInvalid",
            "properties[p].default",
            'Invalid value: map[string]interface {}{"extra":"x", "n":1}: '
            "must not have unknown fields",
        ),
        (
            {
                "type": "array",
                "items": {"type": "string", "enum": ["x"], "default": "y"},
            },
            "FieldValueNotSupported",
            "properties[p].items.default",
            'Unsupported value: "y": supported values: "x"',
        ),
    ],
)
def test_a_crd_whose_default_its_own_schema_refuses_is_invalid(
    api: ApiClient,
    fresh_group: str,
    prop: dict[str, Any],
    reason: str,
    field: str,
    detail: str,
) -> None:
    # apiextensions' defaulting.ValidateDefaults, at the CRD's create: every custom
    # object would otherwise get a default its schema then refuses
    manifest = _crd(fresh_group, {"p": prop})
    where = f"{_AT}.{field}"
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    assert status["details"]["causes"] == [{"reason": reason, "message": detail, "field": where}]
    assert status["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "checks.{fresh_group}" is invalid: '
        f"{where}: {detail}"
    )


def test_bad_defaults_of_every_version_are_named_in_one_refusal(
    api: ApiClient, fresh_group: str
) -> None:
    manifest = _crd(fresh_group, {"n": {"type": "integer", "maximum": 3, "default": 4}})
    (v1,) = manifest["spec"]["versions"]
    v2 = copy.deepcopy(v1) | {"name": "v2", "storage": False}
    spec = v2["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["n"]["default"] = 5
    manifest["spec"]["versions"].append(v2)
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    at = "openAPIV3Schema.properties[spec].properties[n].default"
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        (
            f"spec.versions[{i}].schema.{at}",
            f"Invalid value: {n}:  in body should be less than or equal to 3",
        )
        for i, n in ((0, 4), (1, 5))
    ]


def test_a_crd_whose_default_its_own_cel_rules_refuse_is_invalid(
    api: ApiClient, fresh_group: str
) -> None:
    # defaulting.ValidateDefaults evaluates a default with the CEL rules of its node and of
    # the nodes under it: a parent's default is refused for a child's rule, at its field
    size = {
        "type": "integer",
        "default": 1,
        "x-kubernetes-validations": [{"rule": "self > 5", "message": "size must exceed 5"}],
    }
    spans = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"}
        ],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
        "default": {"min": 10, "max": 5},
    }
    fine = {
        "type": "integer",
        "default": 7,
        "x-kubernetes-validations": [
            {"rule": "self > 5"},
            {"rule": "self == oldSelf", "message": "immutable"},
        ],
    }
    manifest = _crd(fresh_group, {"size": size, "span": spans, "fine": fine})
    spec = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["default"] = {"size": 2}
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    at = "spec.versions[0].schema.openAPIV3Schema.properties[spec]"
    assert sorted((c["field"], c["message"]) for c in status["details"]["causes"]) == [
        (f"{at}.default.size", 'Invalid value: "integer": size must exceed 5'),
        (f"{at}.properties[size].default", 'Invalid value: "integer": size must exceed 5'),
        (f"{at}.properties[span].default", 'Invalid value: "object": min must not exceed max'),
    ]


def test_defaults_their_schema_accepts_are_accepted_and_given(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    embedded = {
        "type": "object",
        "x-kubernetes-embedded-resource": True,
        "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}}},
        "default": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}},
    }
    props = {
        "n": {"type": "integer", "maximum": 3, "default": 3},
        "when": {"type": "string", "format": "date-time", "default": "2024-01-02T03:04:05Z"},
        "o": {
            "type": "object",
            "required": ["k"],
            "properties": {"k": {"type": "string", "enum": ["x"]}},
            "default": {"k": "x"},
        },
        "cm": embedded,
    }
    # an embedded resource's default keeps its apiVersion and kind: pruning keeps them
    create_crd(api, _crd(fresh_group, props))
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group)
    )
    assert {k: created["spec"][k] for k in props} == {k: p["default"] for k, p in props.items()}


def test_a_crd_update_giving_a_field_a_default_its_schema_refuses_is_invalid(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    apiext = client.ApiextensionsV1Api(api)
    create_crd(api, _crd(fresh_group, {"n": {"type": "integer", "maximum": 3, "default": 2}}))
    crd = apiext.read_custom_resource_definition(f"checks.{fresh_group}")
    spec = crd.spec.versions[0].schema.open_apiv3_schema.properties["spec"]
    spec.properties["n"].default = 4
    with raises_status(422, "Invalid") as status:
        apiext.replace_custom_resource_definition(crd.metadata.name, crd)
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 4:  in body should be less than or equal to 3",
            "field": f"{_AT}.properties[n].default",
        }
    ]
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group)
    )
    assert created["spec"] == {"n": 2}


# ----------------------------------------------------------- x-kubernetes-embedded-resource

_EMBEDDED = {
    "type": "object",
    "x-kubernetes-embedded-resource": True,
    "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}}},
}


def test_an_embedded_resource_keeps_its_type_and_metadata_and_loses_what_it_does_not_declare(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    create_crd(api, _crd(fresh_group, {"cm": _EMBEDDED}))
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inner", "labels": {"a": "b"}},
        "data": {"k": "v"},
        "binaryData": {"x": "eQ=="},
    }
    created = custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group, cm=cm)
    )
    del cm["binaryData"]
    assert created["spec"]["cm"] == cm


@pytest.mark.parametrize(
    ("cm", "causes"),
    [
        (
            {"data": {}},
            [
                ("FieldValueRequired", "spec.cm.apiVersion", "Required value"),
                ("FieldValueRequired", "spec.cm.kind", "Required value"),
            ],
        ),
        (
            {"apiVersion": "", "kind": "Config_Map"},
            [
                ("FieldValueInvalid", "spec.cm.apiVersion", 'Invalid value: "": must not be empty'),
                (
                    "FieldValueInvalid",
                    "spec.cm.kind",
                    'Invalid value: "Config_Map": may have mixed case, but should otherwise '
                    "match: a DNS-1035 label must consist of lower case alphanumeric characters "
                    "or '-', start with an alphabetic character, and end with an alphanumeric "
                    "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
                    "'[a-z]([-a-z0-9]*[a-z0-9])?')",
                ),
            ],
        ),
        (
            {"apiVersion": "a/b/c", "kind": "ConfigMap"},
            [
                (
                    "FieldValueInvalid",
                    "spec.cm.apiVersion",
                    'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
                )
            ],
        ),
    ],
    ids=["missing", "empty-and-not-a-label", "not-a-group-version"],
)
def test_an_embedded_resource_without_a_valid_type_is_invalid(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    cm: dict[str, Any],
    causes: list[tuple[str, str, str]],
) -> None:
    # apiextensions' objectmeta.Validate: apiVersion and kind are required, metadata is not
    create_crd(api, _crd(fresh_group, {"cm": _EMBEDDED}))
    status = _refused(custom, ns, fresh_group, cm=cm)
    got = sorted((c["reason"], c["field"], c["message"]) for c in status["details"]["causes"])
    assert got == sorted(causes)
