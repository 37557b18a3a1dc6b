"""String formats a CRD's schema may name, checked as kube-apiserver checks them
(kube-openapi's strfmt registry, as apiextensions-apiserver supports its formats)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import crd_manifest, create_crd, raises_status, unique

pytestmark = pytest.mark.timeout(60)

#: format, values of it, values not of it
_FORMATS: list[tuple[str, list[str], list[str]]] = [
    ("ipv4", ["10.0.0.1", "010.0.0.1"], ["1.2.3", "256.0.0.1", "::1", "x"]),
    ("ipv6", ["::1", "2001:db8::1"], ["10.0.0.1", "fe80::1%eth0", ":::1"]),
    ("cidr", ["10.0.0.0/8", "10.0.0.1/8", "2001:db8::/32"], ["10.0.0.0", "10.0.0.0/33"]),
    (
        "hostname",
        ["example.com", "localhost", "a-b.example.com"],
        ["-a.com", "a_b.com", "example.c0m", "1.2.3.4"],
    ),
    ("email", ["a@b.c", "John Doe <j@example.com>"], ["a@", "not an email"]),
    (
        "uri",
        ["https://example.com/a?b=c", "/an/absolute/path", "mailto:x@example.com"],
        ["relative/path", "http://host:80x/", "/bad%zz"],
    ),
    ("mac", ["00:1a:2b:3c:4d:5e", "00-1A-2B-3C-4D-5E", "001a.2b3c.4d5e"], ["00:1a:2b:3c:4d"]),
    ("byte", ["aGk=", "aGVsbG8="], ["aGk", "a b="]),
    ("hexcolor", ["#fff", "abcdef"], ["#ffff", "red"]),
    ("duration", ["1h30m", "1.5s", "3 days"], ["abc", "5"]),
]


def _crd(group: str, format_: str) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    schema = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"] = {
        "type": "object",
        "properties": {"f": {"type": "string", "format": format_}},
    }
    return manifest


def _check(group: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Check",
        "metadata": {"name": unique("check")},
        "spec": {"f": value},
    }


@pytest.mark.parametrize(("format_", "valid", "invalid"), _FORMATS, ids=[f[0] for f in _FORMATS])
def test_a_string_is_checked_against_its_format(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    format_: str,
    valid: list[str],
    invalid: list[str],
) -> None:
    create_crd(api, _crd(fresh_group, format_))
    for value in valid:
        created = custom.create_namespaced_custom_object(
            fresh_group, "v1", ns, "checks", _check(fresh_group, value)
        )
        assert created["spec"] == {"f": value}
    for value in invalid:
        with raises_status(422, "Invalid") as status:
            custom.create_namespaced_custom_object(
                fresh_group, "v1", ns, "checks", _check(fresh_group, value)
            )
        # kube-openapi's FormatOf (errors.InvalidType), made field.TypeInvalid
        detail = f'Invalid value: "{value}": spec.f in body must be of type {format_}: "{value}"'
        assert status["details"]["causes"] == [
            {"reason": "FieldValueTypeInvalid", "message": detail, "field": "spec.f"}
        ], value
