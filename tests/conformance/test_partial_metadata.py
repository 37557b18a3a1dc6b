"""Metadata-only answers: ``Accept: ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1``.

What client-go's metadata client and controller-runtime's metadata-only
caches ask for: objects' ``metadata`` only, for lists, gets, watches and the
answers of writes (kube-apiserver's response transform).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import assert_status, configmap, raw, unique, widget

pytestmark = pytest.mark.timeout(30)

PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# client-go's metadata client lists protobuf first; a server answers in the first it writes
METADATA_CLIENT_LIST = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    f"{PARTIAL_LIST},application/json"
)


def _secret(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, **meta},
        "stringData": {"password": "hunter2" * 100},
    }


def test_a_list_as_partial_object_metadata_carries_only_metadata(
    core: client.CoreV1Api, api: ApiClient, ns: str
) -> None:
    names = sorted(unique("s") for _ in range(3))
    for name in names:
        core.create_namespaced_secret(ns, _secret(name, labels={"app": "web"}))
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/secrets", accept=METADATA_CLIENT_LIST)
    assert resp.status == 200, resp.data
    assert resp.headers["Content-Type"].startswith("application/json")
    body = resp.json()
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert body["metadata"]["resourceVersion"]
    items = [i for i in body["items"] if i["metadata"]["name"] in names]
    assert sorted(i["metadata"]["name"] for i in items) == names
    for item in items:
        assert set(item) == {"kind", "apiVersion", "metadata"}
        assert (item["kind"], item["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert item["metadata"]["labels"] == {"app": "web"}
        assert item["metadata"]["namespace"] == ns and item["metadata"]["uid"]
    assert b"hunter2" not in resp.data and b"aHVudGVyM" not in resp.data


def test_a_list_in_pages_keeps_its_continue_token(
    core: client.CoreV1Api, api: ApiClient, ns: str
) -> None:
    for _ in range(3):
        core.create_namespaced_config_map(ns, configmap(unique("cm")))
    first = raw(
        api,
        "GET",
        f"/api/v1/namespaces/{ns}/configmaps",
        query=[("limit", 2)],
        accept=PARTIAL_LIST,
    ).json()
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    rest = raw(
        api,
        "GET",
        f"/api/v1/namespaces/{ns}/configmaps",
        query=[("limit", 2), ("continue", first["metadata"]["continue"])],
        accept=PARTIAL_LIST,
    ).json()
    assert rest["kind"] == "PartialObjectMetadataList" and rest["items"]
    assert not {i["metadata"]["name"] for i in first["items"]} & {
        i["metadata"]["name"] for i in rest["items"]
    }


def test_a_get_as_partial_object_metadata_of_a_custom_resource(
    custom: client.CustomObjectsApi, api: ApiClient, ns: str, widget_crds: dict[str, str]
) -> None:
    name = unique("w")
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    custom.create_namespaced_custom_object(g, v, ns, plural, widget(name, {"size": 7}))
    resp = raw(api, "GET", f"/apis/{g}/{v}/namespaces/{ns}/{plural}/{name}", accept=PARTIAL)
    assert resp.status == 200, resp.data
    body = resp.json()
    assert set(body) == {"kind", "apiVersion", "metadata"}
    assert body["kind"] == "PartialObjectMetadata"
    assert body["metadata"]["name"] == name and body["metadata"]["generation"] == 1


def test_a_watch_as_partial_object_metadata_sends_metadata_only(
    core: client.CoreV1Api, api: ApiClient, ns: str
) -> None:
    name = unique("s")
    created = core.create_namespaced_secret(ns, _secret(name))
    core.patch_namespaced_secret(name, ns, {"metadata": {"labels": {"rotated": "yes"}}})
    resp = raw(
        api,
        "GET",
        f"/api/v1/namespaces/{ns}/secrets",
        query=[
            ("watch", "true"),
            ("resourceVersion", created.metadata.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", 1),
        ],
        accept=PARTIAL,
    )
    assert resp.status == 200, resp.data
    events = [json.loads(line) for line in resp.data.splitlines() if line.strip()]
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    assert [e["type"] for e in changes] == ["MODIFIED"]
    obj = changes[0]["object"]
    assert set(obj) == {"kind", "apiVersion", "metadata"}
    assert (obj["kind"], obj["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert obj["metadata"]["labels"] == {"rotated": "yes"}
    for e in events:
        assert e["object"]["kind"] == "PartialObjectMetadata"
    assert b"hunter2" not in resp.data


def test_a_write_answers_with_metadata_only_when_asked(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    created = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body=configmap(name, {"big": "x" * 1000}),
        accept=PARTIAL,
    )
    assert created.status == 201, created.data
    assert created.json()["kind"] == "PartialObjectMetadata"
    # a metadata patch, as one that removes a finalizer without reading the object
    patched = raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/{name}",
        body={"metadata": {"annotations": {"seen": "yes"}}},
        content_type="application/merge-patch+json",
        accept=PARTIAL,
    )
    assert patched.status == 200, patched.data
    body = patched.json()
    assert body["kind"] == "PartialObjectMetadata" and "data" not in body
    assert body["metadata"]["annotations"] == {"seen": "yes"}


@pytest.mark.parametrize(
    ("one", "accept", "message"),
    [
        (False, PARTIAL, "you requested PartialObjectMetadata, but the requested object is a list"),
        (True, PARTIAL_LIST, "you requested PartialObjectMetadataList, but the requested object"),
        (True, "application/json;as=Gizmo;g=meta.k8s.io;v=v1", "only the following media types"),
    ],
    ids=["list-as-one", "one-as-list", "no-such-transform"],
)
def test_a_transform_that_does_not_fit_is_not_acceptable(
    core: client.CoreV1Api, api: ApiClient, ns: str, one: bool, accept: str, message: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    path = f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if one else "")
    status = assert_status(raw(api, "GET", path, accept=accept), 406, "NotAcceptable")
    assert status["message"].startswith(message), status["message"]
