"""OpenAPI documents: ``/openapi/v2`` and ``/openapi/v3``, as kubectl reads them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiClient

from ._support import raw, wait_for

pytestmark = pytest.mark.timeout(60)

DEPLOYMENT = {"group": "apps", "version": "v1", "kind": "Deployment"}


def _resolve(doc: dict[str, Any], schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Follow ``$ref`` (also wrapped in a one-element ``allOf``) to the schema it names."""
    while True:
        if "$ref" in schema:
            schema = doc[schema["$ref"].removeprefix(prefix)]
        elif len(schema.get("allOf") or ()) == 1 and "properties" not in schema:
            schema = schema["allOf"][0]
        else:
            return schema


def _by_gvk(schemas: dict[str, Any], gvk: dict[str, str]) -> dict[str, Any]:
    found = [s for s in schemas.values() if gvk in (s.get("x-kubernetes-group-version-kind") or ())]
    assert found, f"no schema for {gvk}"
    return found[0]


def _v3(api: ApiClient, gv_path: str) -> dict[str, Any]:
    index = raw(api, "GET", "/openapi/v3").json()
    entry = index["paths"][gv_path]
    url = entry["serverRelativeURL"]
    path, _, query = url.partition("?")
    params = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    resp = raw(api, "GET", path, query=params)
    assert resp.status == 200
    doc: dict[str, Any] = resp.json()
    return doc


def test_v3_index_lists_each_group_version(api: ApiClient) -> None:
    index = raw(api, "GET", "/openapi/v3").json()
    for gv in ("api/v1", "apis/apps/v1", "apis/apiextensions.k8s.io/v1"):
        assert index["paths"][gv]["serverRelativeURL"].startswith(f"/openapi/v3/{gv}")


def test_v3_document_describes_built_in_kinds_with_patch_metadata(api: ApiClient) -> None:
    doc = _v3(api, "apis/apps/v1")
    schemas = doc["components"]["schemas"]
    prefix = "#/components/schemas/"
    deployment = _by_gvk(schemas, DEPLOYMENT)
    spec = _resolve(schemas, deployment["properties"]["spec"], prefix)
    replicas = spec["properties"]["replicas"]
    assert replicas["type"] == "integer"
    assert "desired pods" in replicas["description"]
    template = _resolve(schemas, spec["properties"]["template"], prefix)
    pod_spec = _resolve(schemas, template["properties"]["spec"], prefix)
    containers = pod_spec["properties"]["containers"]
    assert containers["type"] == "array"
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert "containers" in pod_spec["required"]
    container = _resolve(schemas, containers["items"], prefix)
    assert container["properties"]["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"


def test_v2_document_describes_built_in_kinds(api: ApiClient) -> None:
    resp = raw(api, "GET", "/openapi/v2")
    assert resp.status == 200
    defs = resp.json()["definitions"]
    deployment = _by_gvk(defs, DEPLOYMENT)
    spec = _resolve(defs, deployment["properties"]["spec"], "#/definitions/")
    assert spec["properties"]["replicas"]["type"] == "integer"
    assert "selector" in spec["required"]


def test_custom_resource_versions_are_published_from_their_schema(
    api: ApiClient, widget_crds: dict[str, str]
) -> None:
    gvk = {"group": widget_crds["group"], "version": "v1", "kind": "Widget"}
    gv_path = f"apis/{widget_crds['group']}/v1"

    def published() -> dict[str, Any] | None:
        index = raw(api, "GET", "/openapi/v3").json()
        if gv_path not in index["paths"]:
            return None
        schemas = _v3(api, gv_path)["components"]["schemas"]
        hits = [
            s for s in schemas.values() if gvk in (s.get("x-kubernetes-group-version-kind") or ())
        ]
        return hits[0] if hits else None

    widget = wait_for(published, timeout=30, interval=0.2, what="the Widget schema in /openapi/v3")
    assert widget["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert "metadata" in widget["properties"]
