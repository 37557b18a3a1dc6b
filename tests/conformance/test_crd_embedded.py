"""The metadata of an ``x-kubernetes-embedded-resource`` (a template an operator stamps out)
is checked as object metadata, as kube-apiserver's ``validateEmbeddedResource`` does."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import crd_manifest, create_crd, raises_status, unique

pytestmark = pytest.mark.timeout(60)

NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
QUALIFIED = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
    "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
    "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
DNS_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


@pytest.fixture
def templates(api: ApiClient, fresh_group: str) -> str:
    manifest = crd_manifest(fresh_group, "stampers", "Stamper")
    props = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"] = {
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            }
        },
    }
    create_crd(api, manifest)
    return fresh_group


def _stamper(group: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Stamper",
        "metadata": {"name": unique("s")},
        "spec": {"template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}},
    }


def test_the_metadata_of_an_embedded_resource_is_validated(
    custom: client.CustomObjectsApi, templates: str, ns: str
) -> None:
    meta = {
        "name": "ok",
        "namespace": "Bad_NS",
        "labels": {"bad key!": "v"},
        "annotations": {"a/b/c": "x"},
        "finalizers": ["bad finalizer"],
    }
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            templates, "v1", ns, "stampers", _stamper(templates, meta)
        )
    at = "spec.template.metadata"
    # kube-apiserver walks Go maps: the order is not fixed
    assert sorted((c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]) == [
        ("FieldValueInvalid", f"{at}.annotations", f'Invalid value: "a/b/c": {QUALIFIED}'),
        ("FieldValueInvalid", f"{at}.finalizers", f'Invalid value: "bad finalizer": {NAME_PART}'),
        ("FieldValueInvalid", f"{at}.labels", f'Invalid value: "bad key!": {NAME_PART}'),
        ("FieldValueInvalid", f"{at}.namespace", f'Invalid value: "Bad_NS": {DNS_LABEL}'),
    ]


def test_valid_embedded_metadata_is_kept(
    custom: client.CustomObjectsApi, templates: str, ns: str
) -> None:
    # a name is not required (kube-apiserver names it for the check) and may be any path
    # segment, not a DNS name
    meta = {
        "generateName": "Web_",
        "namespace": "apps",
        "labels": {"app.kubernetes.io/name": "web"},
        "annotations": {"Example.com/Note": "x"},
        "finalizers": ["example.com/cleanup"],
    }
    created = custom.create_namespaced_custom_object(
        templates, "v1", ns, "stampers", _stamper(templates, meta)
    )
    assert created["spec"]["template"]["metadata"] == meta
