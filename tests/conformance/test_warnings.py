"""Warnings (``Warning: 299 - "..."`` headers): what the API server did not refuse but a
client should know. A field the schema does not know is dropped with a warning
(``fieldValidation=Warn``, the default), refused with ``Strict`` and dropped silently
with ``Ignore``; every request to a deprecated version of a custom resource is warned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient

from mcruntime.client import parse_warnings

from ._support import Raw, assert_status, create_crd, delete_crd, raw, unique

pytestmark = pytest.mark.timeout(60)

GROUP = "warnings.mcruntime.io"
SCHEMA = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "parts": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    },
                },
            }
        },
    }
}


@pytest.fixture(scope="module")
def sprockets(kube_backend: Any) -> Iterator[str]:
    """A CRD whose v1 is deprecated (default warning) and whose v1beta1 carries its own."""
    versions = [
        {"name": "v2", "served": True, "storage": True, "schema": SCHEMA},
        {"name": "v1", "served": True, "storage": False, "deprecated": True, "schema": SCHEMA},
        {
            "name": "v1beta1",
            "served": True,
            "storage": False,
            "deprecated": True,
            "deprecationWarning": "v1beta1 sprockets stop working in 2027",
            "schema": SCHEMA,
        },
    ]
    manifest = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"sprockets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
            "scope": "Namespaced",
            "versions": versions,
        },
    }
    with kube_backend.api_client() as api:
        create_crd(api, manifest)
        try:
            yield GROUP
        finally:
            delete_crd(api, manifest["metadata"]["name"])


def warnings_of(resp: Raw) -> list[str]:
    return [w for h in resp.headers.getlist("Warning") for w in parse_warnings(h)]


def create(api: ApiClient, ns: str, spec: dict[str, Any], validation: str | None = None) -> Raw:
    query = [("fieldValidation", validation)] if validation else None
    body = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Sprocket",
        "metadata": {"name": unique("sprocket")},
        "spec": spec,
    }
    return raw(api, "POST", f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets", body=body, query=query)


def test_an_unknown_field_is_dropped_with_a_warning(
    sprockets: str, api: ApiClient, ns: str
) -> None:
    resp = create(api, ns, {"size": 3, "colour": "red", "parts": [{"name": "a", "weight": 2}]})
    assert resp.status == 201, resp.data
    assert warnings_of(resp) == [
        'unknown field "spec.colour"',
        'unknown field "spec.parts[0].weight"',
    ]
    assert resp.json()["spec"] == {"size": 3, "parts": [{"name": "a"}]}
    name = resp.json()["metadata"]["name"]
    # an update warns too
    put = {**resp.json(), "spec": {"size": 4, "shade": "dark"}}
    path = f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets/{name}"
    updated = raw(api, "PUT", path, body=put)
    assert updated.status == 200, updated.data
    assert warnings_of(updated) == ['unknown field "spec.shade"']
    # a known object says nothing
    assert warnings_of(raw(api, "GET", path)) == []


def test_strict_refuses_an_unknown_field_and_ignore_says_nothing(
    sprockets: str, api: ApiClient, ns: str
) -> None:
    body = assert_status(create(api, ns, {"size": 3, "colour": "red"}, "Strict"), 400, "BadRequest")
    assert body["message"] == (
        'Sprocket in version "v2" cannot be handled as a Sprocket: strict decoding error: '
        'unknown field "spec.colour"'
    )
    assert create(api, ns, {"size": 3}, "Strict").status == 201
    ignored = create(api, ns, {"size": 3, "colour": "red"}, "Ignore")
    assert ignored.status == 201 and warnings_of(ignored) == []
    assert ignored.json()["spec"] == {"size": 3}
    assert_status(create(api, ns, {"size": 3}, "Loud"), 422, "Invalid")


def test_a_deprecated_version_is_warned_on_every_request(
    sprockets: str, api: ApiClient, ns: str
) -> None:
    listed = raw(api, "GET", f"/apis/{GROUP}/v1/namespaces/{ns}/sprockets")
    assert listed.status == 200
    assert warnings_of(listed) == [f"{GROUP}/v1 Sprocket is deprecated; use {GROUP}/v2 Sprocket"]
    beta = raw(api, "GET", f"/apis/{GROUP}/v1beta1/namespaces/{ns}/sprockets")
    assert warnings_of(beta) == ["v1beta1 sprockets stop working in 2027"]
    assert warnings_of(raw(api, "GET", f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets")) == []


def test_a_built_in_kind_drops_an_unknown_field_as_its_decoder_does(
    api: ApiClient, ns: str
) -> None:
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": unique("typo")},
        "spec": {
            "replicas": 1,
            "replicaz": 3,
            "selector": {"matchLabels": {"app": "typo"}},
            "template": {
                "metadata": {"labels": {"app": "typo"}},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox", "imagePullPolicey": "x"}]
                },
            },
        },
    }
    refused = raw(api, "POST", path, body=body, query=[("fieldValidation", "Strict")])
    message = assert_status(refused, 400, "BadRequest")["message"]
    assert message.startswith(
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
    )
    assert 'unknown field "spec.replicaz"' in message
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicey"' in message
    created = raw(api, "POST", path, body=body)
    assert created.status == 201, created.data
    assert set(warnings_of(created)) == {
        'unknown field "spec.replicaz"',
        'unknown field "spec.template.spec.containers[0].imagePullPolicey"',
    }
    spec = created.json()["spec"]
    assert "replicaz" not in spec and spec["replicas"] == 1
    assert "imagePullPolicey" not in spec["template"]["spec"]["containers"][0]


def test_a_custom_resources_metadata_is_object_meta(
    sprockets: str, api: ApiClient, ns: str
) -> None:
    body = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Sprocket",
        "metadata": {"name": unique("sprocket"), "labelz": {"a": "b"}, "labels": {"a": "b"}},
        "spec": {"size": 1},
    }
    resp = raw(api, "POST", f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets", body=body)
    assert resp.status == 201, resp.data
    assert warnings_of(resp) == ['unknown field "metadata.labelz"']
    meta = resp.json()["metadata"]
    assert "labelz" not in meta and meta["labels"] == {"a": "b"}


def test_a_finalizer_without_a_domain_on_a_custom_resource_is_warned_when_added(
    sprockets: str, api: ApiClient, ns: str
) -> None:
    # apiextensions-apiserver (customresource/validator.go, validateKubeFinalizerName): a
    # finalizer a write adds without a "/" and that is not one of Kubernetes' own
    name = unique("sprocket")
    path = f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets"
    finalizers = ["cleanup", "cleanup.example.com", "example.com/cleanup", "orphan"]
    body = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Sprocket",
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"size": 1},
    }
    created = raw(api, "POST", path, body=body)
    assert created.status == 201, created.data
    assert warnings_of(created) == [
        'metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name to avoid '
        "accidental conflicts with other finalizer writers",
        'metadata.finalizers: "cleanup.example.com": prefer a domain-qualified finalizer name '
        "including a path (/) to avoid accidental conflicts with other finalizer writers",
    ]
    # only what a write adds is warned of
    obj = created.json()
    obj["metadata"]["finalizers"] = [*finalizers, "more"]
    updated = raw(api, "PUT", f"{path}/{name}", body=obj)
    assert updated.status == 200, updated.data
    assert warnings_of(updated) == [
        'metadata.finalizers: "more": prefer a domain-qualified finalizer name to avoid '
        "accidental conflicts with other finalizer writers"
    ]
    patch = {"metadata": {"finalizers": None}}
    cleared = raw(
        api, "PATCH", f"{path}/{name}", body=patch, content_type="application/merge-patch+json"
    )
    assert cleared.status == 200 and warnings_of(cleared) == []


@pytest.mark.parametrize(
    ("content_type", "patch", "shown"),
    [
        ("application/merge-patch+json", {"spec": {"colour": "red"}}, '"{'),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/spec/colour", "value": "red"}],
            '"{',
        ),
    ],
)
def test_a_strict_patch_with_an_unknown_field_is_refused_on_the_field_patch(
    sprockets: str, api: ApiClient, ns: str, content_type: str, patch: Any, shown: str
) -> None:
    # kube-apiserver's patch handler (handlers/patch.go) refuses the patched object's
    # strict decoding error as a 422 on the field "patch", not a create's 400
    name = create(api, ns, {"size": 3}).json()["metadata"]["name"]
    path = f"/apis/{GROUP}/v2/namespaces/{ns}/sprockets/{name}"
    refused = raw(
        api,
        "PATCH",
        path,
        body=patch,
        content_type=content_type,
        query=[("fieldValidation", "Strict")],
    )
    body = assert_status(refused, 422, "Invalid")
    assert body["message"].startswith(f' "" is invalid: patch: Invalid value: {shown}')
    assert body["message"].endswith(': strict decoding error: unknown field "spec.colour"')
    assert [(c["reason"], c["field"]) for c in body["details"]["causes"]] == [
        ("FieldValueInvalid", "patch")
    ]
    assert raw(api, "GET", path).json()["spec"] == {"size": 3}  # nothing written
    warned = raw(api, "PATCH", path, body=patch, content_type=content_type)
    assert warned.status == 200 and warnings_of(warned) == ['unknown field "spec.colour"']


def test_a_strict_strategic_patch_of_a_built_in_kind_shows_the_patch_as_go_prints_it(
    api: ApiClient, ns: str
) -> None:
    name = unique("strict")
    made = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
    )
    assert made.status == 201, made.data
    refused = raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/{name}",
        body={"datum": {"a": "b"}},
        content_type="application/strategic-merge-patch+json",
        query=[("fieldValidation", "Strict")],
    )
    body = assert_status(refused, 422, "Invalid")
    assert body["message"] == (
        ' "" is invalid: patch: Invalid value: "map[datum:map[a:b]]": '
        'strict decoding error: unknown field "datum"'
    )
