"""CRD definitions kube-apiserver refuses (apiextensions' ``ValidateCustomResourceDefinition``):
each fault at its field, in its words, every one of them in one refusal."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ._support import raises_status

pytestmark = pytest.mark.timeout(60)

SCHEMA = "spec.versions[0].schema.openAPIV3Schema"
SPEC = f"{SCHEMA}.properties[spec]"
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def _base(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string"},
                                        "items": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "properties": {
                                                    "k": {"type": "string"},
                                                    "v": {"type": "string"},
                                                },
                                            },
                                        },
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"replicas": {"type": "integer"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return version


def _spec(crd: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = _version(crd)["schema"]["openAPIV3Schema"]["properties"]
    spec: dict[str, Any] = props["spec"]["properties"]
    return spec


def _refused(
    apiext: client.ApiextensionsV1Api, group: str, change: Callable[[dict[str, Any]], None]
) -> list[tuple[str, str, str]]:
    crd = copy.deepcopy(_base(group))
    change(crd)
    with raises_status(422, "Invalid") as status:
        apiext.create_custom_resource_definition(crd)
    # kube-apiserver from 1.32 shows a nil bad value as null, 1.31 as "null"
    return [
        (
            c["reason"],
            c["field"],
            c["message"].replace("Invalid value: null:", 'Invalid value: "null":'),
        )
        for c in status["details"]["causes"]
    ]


@pytest.fixture
def group(fresh_group: str) -> str:
    return fresh_group


def test_a_list_map_key_neither_required_nor_defaulted(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["items"]["x-kubernetes-list-type"] = "map"
        _spec(crd)["items"]["x-kubernetes-list-map-keys"] = ["k"]

    assert _refused(apiext, group, change) == [
        (
            "FieldValueRequired",
            f"{SPEC}.properties[items].items.properties[k].default",
            "Required value: this property is in x-kubernetes-list-map-keys, so it must have a "
            "default or be a required property",
        )
    ]


def test_a_list_map_key_naming_no_item_property(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["items"]["x-kubernetes-list-type"] = "map"
        _spec(crd)["items"]["x-kubernetes-list-map-keys"] = ["k", "key_name"]
        _spec(crd)["items"]["items"]["required"] = ["k"]

    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{SPEC}.properties[items].x-kubernetes-list-map-keys",
            'Invalid value: []string{"k", "key_name"}: entries must all be names of item '
            "properties",
        )
    ]


def test_a_set_of_objects_not_atomic(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["items"]["x-kubernetes-list-type"] = "set"

    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{SPEC}.properties[items].items.x-kubernetes-map-type",
            'Invalid value: "null": must be atomic as item of a list with x-kubernetes-list-type=set',
        )
    ]


def test_unique_items(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["items"]["uniqueItems"] = True

    assert _refused(apiext, group, change) == [
        (
            "FieldValueForbidden",
            f"{SPEC}.properties[items].uniqueItems",
            "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes "
            "quadratic",
        )
    ]


def test_a_version_without_a_schema(apiext: client.ApiextensionsV1Api, group: str) -> None:
    causes = _refused(apiext, group, lambda crd: _version(crd).pop("schema"))
    # "schemas are required" is kube-apiserver 1.31's detail; later ones give none
    assert [(r, f, m.removesuffix(": schemas are required")) for r, f, m in causes] == [
        ("FieldValueRequired", SCHEMA, "Required value")
    ]


def test_a_version_name_not_a_dns_1035_label(apiext: client.ApiextensionsV1Api, group: str) -> None:
    assert _refused(apiext, group, lambda crd: _version(crd).update(name="V1")) == [
        ("FieldValueInvalid", "spec.versions[0].name", f'Invalid value: "V1": {DNS1035}')
    ]


def test_list_kind_the_kind(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        crd["spec"]["names"]["listKind"] = "Thing"

    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            "spec.names.listKind",
            'Invalid value: "Thing": kind and listKind may not be the same',
        )
    ]


def test_a_deprecation_warning_of_a_version_not_deprecated(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _version(crd)["deprecationWarning"] = "use v2"

    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            "spec.versions[0].deprecationWarning",
            'Invalid value: "use v2": can only be set for deprecated versions',
        )
    ]


def test_printer_columns_of_an_unknown_type_or_format_or_a_path_not_from_the_root(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _version(crd)["additionalPrinterColumns"] = [
            {"name": "A", "type": "float", "jsonPath": ".spec.name"},
            {"name": "B", "type": "string", "format": "weird", "jsonPath": "spec.name"},
        ]

    at = "spec.versions[0].additionalPrinterColumns"
    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{at}[0].type",
            'Invalid value: "float": must be one of boolean,date,integer,number,string',
        ),
        (
            "FieldValueInvalid",
            f"{at}[1].format",
            'Invalid value: "weird": must be one of '
            "byte,date,date-time,double,float,int32,int64,password",
        ),
        (
            "FieldValueInvalid",
            f"{at}[1].JSONPath",
            'Invalid value: "spec.name": must be a simple json path starting with .',
        ),
    ]


def test_scale_replicas_paths_outside_spec_and_status(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _version(crd)["subresources"] = {
            "scale": {"specReplicasPath": ".status.replicas", "statusReplicasPath": ".spec.name"}
        }

    at = "spec.versions[0].subresources.scale"
    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{at}.specReplicasPath",
            'Invalid value: ".status.replicas": should be a json path under .spec',
        ),
        (
            "FieldValueInvalid",
            f"{at}.statusReplicasPath",
            'Invalid value: ".spec.name": should be a json path under .status',
        ),
    ]


def test_preserve_unknown_fields_false(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        props = _version(crd)["schema"]["openAPIV3Schema"]["properties"]
        props["spec"]["x-kubernetes-preserve-unknown-fields"] = False

    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{SPEC}.x-kubernetes-preserve-unknown-fields",
            "Invalid value: false: must be true or undefined",
        )
    ]


def test_metadata_properties_other_than_name_and_generate_name(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        props = _version(crd)["schema"]["openAPIV3Schema"]["properties"]
        props["metadata"] = {"type": "object", "properties": {"labels": {"type": "object"}}}

    assert _refused(apiext, group, change) == [
        (
            "FieldValueForbidden",
            f"{SCHEMA}.properties[metadata]",
            "Forbidden: must not specify anything other than name and generateName, but "
            "metadata is implicitly specified",
        )
    ]
    # name and generateName may be restricted
    crd = _base(group)
    props = _version(crd)["schema"]["openAPIV3Schema"]["properties"]
    props["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}},
    }
    apiext.create_custom_resource_definition(crd)


def test_every_fault_in_one_refusal(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        _version(crd)["name"] = "V1"
        _spec(crd)["items"]["uniqueItems"] = True
        crd["spec"]["names"]["listKind"] = "Thing"

    assert [field for _, field, _ in _refused(apiext, group, change)] == [
        "spec.versions[0].name",
        f"{SPEC}.properties[items].uniqueItems",
        "spec.names.listKind",
    ]


def test_map_and_list_types_off_objects_and_arrays_or_unknown(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["name"]["x-kubernetes-map-type"] = "atomic"
        _spec(crd)["items"]["x-kubernetes-list-type"] = "bag"

    assert sorted(_refused(apiext, group, change)) == [
        (
            "FieldValueInvalid",
            f"{SPEC}.properties[name].type",
            'Invalid value: "string": must be object if x-kubernetes-map-type is specified',
        ),
        (
            "FieldValueNotSupported",
            f"{SPEC}.properties[items].x-kubernetes-list-type",
            'Unsupported value: "bag": supported values: "atomic", "set", "map"',
        ),
    ]

    def list_on_object(crd: dict[str, Any]) -> None:
        _spec(crd)["items"]["items"]["x-kubernetes-list-type"] = "atomic"

    assert _refused(apiext, group, list_on_object) == [
        (
            "FieldValueInvalid",
            f"{SPEC}.properties[items].items.type",
            'Invalid value: "object": must be array if x-kubernetes-list-type is specified',
        )
    ]


def test_selectable_fields_name_scalar_fields_of_the_schema(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _version(crd)["selectableFields"] = [
            {"jsonPath": ".spec.nope"},
            {"jsonPath": ".spec.items"},
            {"jsonPath": ".spec.items[0].k"},
            {"jsonPath": ".spec.name"},
            {"jsonPath": ".spec.name"},
        ]

    at = "spec.versions[0].selectableFields"
    assert _refused(apiext, group, change) == [
        (
            "FieldValueInvalid",
            f"{at}[0].jsonPath",
            'Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field',
        ),
        (
            "FieldValueInvalid",
            f"{at}[1].jsonPath",
            'Invalid value: ".spec.items": must point to a field of type string, boolean or '
            "integer. Enum string fields and strings with formats are allowed.",
        ),
        (
            "FieldValueInvalid",
            f"{at}[2].jsonPath",
            'Invalid value: ".spec.items[0].k": is an invalid path: array notation is not allowed',
        ),
        ("FieldValueDuplicate", f"{at}[4].jsonPath", 'Duplicate value: ".spec.name"'),
    ]


def test_a_type_openapi_v3_does_not_have_and_keywords_crds_do_without(
    apiext: client.ApiextensionsV1Api, group: str
) -> None:
    def change(crd: dict[str, Any]) -> None:
        _spec(crd)["count"] = {"type": "int"}
        _spec(crd)["labels"] = {"type": "object", "patternProperties": {"^a": {"type": "string"}}}

    assert sorted(_refused(apiext, group, change)) == [
        (
            "FieldValueForbidden",
            f"{SPEC}.properties[labels].patternProperties",
            "Forbidden: patternProperties is not supported",
        ),
        (
            "FieldValueNotSupported",
            f"{SPEC}.properties[count].type",
            'Unsupported value: "int": supported values: "array", "boolean", "integer", '
            '"number", "object", "string"',
        ),
    ]


def test_names_not_dns_1035_labels(apiext: client.ApiextensionsV1Api, group: str) -> None:
    def change(crd: dict[str, Any]) -> None:
        crd["spec"]["names"].update(shortNames=["Th"], categories=["all", "my_things"])

    assert _refused(apiext, group, change) == [
        ("FieldValueInvalid", "spec.names.shortNames[0]", f'Invalid value: "Th": {DNS1035}'),
        (
            "FieldValueInvalid",
            "spec.names.categories[1]",
            f'Invalid value: "my_things": {DNS1035}',
        ),
    ]

    def kind(crd: dict[str, Any]) -> None:
        crd["spec"]["names"]["kind"] = "Thing_1"

    # the singular and the list kind are defaulted from the kind first
    assert _refused(apiext, group, kind) == [
        ("FieldValueInvalid", "spec.names.singular", f'Invalid value: "thing_1": {DNS1035}'),
        (
            "FieldValueInvalid",
            "spec.names.kind",
            f'Invalid value: "Thing_1": may have mixed case, but should otherwise match: {DNS1035}',
        ),
        (
            "FieldValueInvalid",
            "spec.names.listKind",
            'Invalid value: "Thing_1List": may have mixed case, but should otherwise match: '
            f"{DNS1035}",
        ),
    ]
