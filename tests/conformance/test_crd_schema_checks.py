"""What kube-apiserver checks of a custom object against its CRD's structural schema
beyond types and bounds: list-type map keys, string formats, and a CRD's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import crd_manifest, create_crd, raises_status, unique

pytestmark = pytest.mark.timeout(60)


def _crd(group: str, spec: dict[str, Any]) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    props = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"] = {"type": "object", "properties": spec}
    return manifest


def _check(group: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Check",
        "metadata": {"name": unique("check")},
        "spec": spec,
    }


def _refused(custom: client.CustomObjectsApi, ns: str, group: str, **spec: Any) -> dict[str, Any]:
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(group, "v1", ns, "checks", _check(group, **spec))
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
        fresh_group, "v1", ns, "checks", _check(fresh_group, ports=ports[:2], routes=routes)
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
        fresh_group, "v1", ns, "checks", _check(fresh_group, **spec)
    )
    assert created["spec"] == spec
