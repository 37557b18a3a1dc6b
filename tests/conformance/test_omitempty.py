"""Empty maps and lists as kube-apiserver stores them: a built-in object's empty ``omitempty``
map or list field is gone from what every write returns, GETs and watches read (the object is
decoded into its Go type, stored as protobuf, encoded back as JSON); one without ``omitempty``
comes back null. A custom resource keeps its own empty fields, not the empty ones of its
``metadata`` (coerced through ObjectMeta)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import WIDGET_GROUP, WIDGETS, raw, unique, watch_events, widget

pytestmark = pytest.mark.timeout(30)

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
PAUSE = "registry.k8s.io/pause:3.9"
EMPTY_META = {"labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []}


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def send(api: ApiClient, method: str, path: str, body: Any, content_type: str | None = None) -> Any:
    kwargs: dict[str, Any] = {"body": body, "content_type": content_type}
    if content_type == APPLY:  # YAML, sent as it is
        kwargs["body"] = json.dumps(body)
        kwargs["query"] = [("fieldManager", "omitempty-test")]
    resp = raw(api, method, path, **kwargs)
    assert resp.status in (200, 201), resp.json()
    return resp.json()


def get(api: ApiClient, path: str) -> Any:
    resp = raw(api, "GET", path)
    assert resp.status == 200, resp.json()
    return resp.json()


def assert_no_empty_meta(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    assert not set(EMPTY_META) & set(meta), meta


def empty_configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {}, "annotations": {}},
        "data": {},
        "binaryData": {},
    }


def test_a_configmap_is_created_without_its_empty_maps(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    created = send(api, "POST", cm_path(ns), empty_configmap(name))
    assert_no_empty_meta(created)
    assert "data" not in created and "binaryData" not in created
    assert get(api, cm_path(ns, name)) == created
    listed = get(api, cm_path(ns))["items"]
    assert [o for o in listed if o["metadata"]["name"] == name] == [created]


def test_a_dry_run_create_returns_the_object_without_them(api: ApiClient, ns: str) -> None:
    resp = raw(
        api,
        "POST",
        cm_path(ns),
        query=[("dryRun", "All")],
        body=empty_configmap(unique("cm")),
    )
    assert resp.status == 201, resp.json()
    assert_no_empty_meta(resp.json())
    assert "data" not in resp.json()


def test_an_update_that_empties_a_map_removes_it(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    body = {"metadata": {"name": name, "labels": {"a": "b"}}, "data": {"k": "v"}}
    created = send(api, "POST", cm_path(ns), body)
    assert created["metadata"]["labels"] == {"a": "b"}
    put = {**created, "metadata": {**created["metadata"], "labels": {}, "annotations": {}}}
    put["data"] = {}
    updated = send(api, "PUT", cm_path(ns, name), put)
    assert_no_empty_meta(updated)
    assert "data" not in updated
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert get(api, cm_path(ns, name)) == updated


def test_an_update_that_only_adds_empty_maps_changes_nothing(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    created = send(api, "POST", cm_path(ns), {"metadata": {"name": name}, "data": {"k": "v"}})
    put = {**created, "metadata": {**created["metadata"], "labels": {}}, "binaryData": {}}
    updated = send(api, "PUT", cm_path(ns, name), put)
    assert updated == created  # a no-op write: the same object, the same resourceVersion


@pytest.mark.parametrize("content_type", [MERGE, STRATEGIC])
def test_a_patch_that_empties_a_map_removes_it(api: ApiClient, ns: str, content_type: str) -> None:
    name = unique("cm")
    body = {"metadata": {"name": name, "labels": {"a": "b"}}, "data": {"k": "v"}}
    send(api, "POST", cm_path(ns), body)
    patch = {"metadata": {"labels": {"a": None}, "annotations": {}}, "data": {"k": None}}
    patched = send(api, "PATCH", cm_path(ns, name), patch, content_type)
    assert_no_empty_meta(patched)
    assert "data" not in patched
    assert get(api, cm_path(ns, name)) == patched


def test_a_json_patch_that_adds_an_empty_map_leaves_it_out(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    send(api, "POST", cm_path(ns), {"metadata": {"name": name}, "data": {"k": "v"}})
    ops = [
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/binaryData", "value": {}},
        {"op": "add", "path": "/data/x", "value": "y"},
    ]
    patched = send(api, "PATCH", cm_path(ns, name), ops, "application/json-patch+json")
    assert "labels" not in patched["metadata"] and "binaryData" not in patched
    assert patched["data"] == {"k": "v", "x": "y"}


def test_an_applied_configmap_has_no_empty_maps(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    applied = send(api, "PATCH", cm_path(ns, name), empty_configmap(name), APPLY)
    assert_no_empty_meta(applied)
    assert "data" not in applied and "binaryData" not in applied
    assert get(api, cm_path(ns, name)) == applied


def test_a_role_sent_with_no_rules_has_null_rules(api: ApiClient, ns: str) -> None:
    # Role.rules has no omitempty: an empty list comes back from storage as a nil slice
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"
    name = unique("role")
    body = {"metadata": {"name": name, "labels": {}}, "rules": []}
    created = send(api, "POST", path, body)
    assert "rules" in created and created["rules"] is None
    assert "labels" not in created["metadata"]
    assert get(api, f"{path}/{name}")["rules"] is None


def test_a_pod_loses_its_empty_lists_but_keeps_its_containers(api: ApiClient, ns: str) -> None:
    name = unique("pod")
    container = {"name": "main", "image": PAUSE, "env": [], "ports": [], "args": []}
    container["resources"] = {"limits": {}, "requests": {}}
    spec = {
        "containers": [container],
        "volumes": [],
        "tolerations": [],
        "nodeSelector": {},
        "automountServiceAccountToken": False,
        "affinity": {"nodeAffinity": {}},
    }
    body = {"metadata": {"name": name, "labels": {}}, "spec": spec}
    path = f"/api/v1/namespaces/{ns}/pods"
    created = send(api, "POST", path, body)
    got = created["spec"]
    for k in ("volumes", "nodeSelector"):
        assert k not in got, got
    # the empty list gone, only the DefaultTolerationSeconds admission plugin's are there
    assert [t["key"] for t in got["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert [c["name"] for c in got["containers"]] == ["main"]
    main = got["containers"][0]
    assert not {"env", "ports", "args"} & set(main), main
    assert main["resources"] == {}  # a struct, kept even when empty
    assert got["affinity"] == {"nodeAffinity": {}}
    assert "labels" not in created["metadata"]
    stored = get(api, f"{path}/{name}")
    assert "volumes" not in stored["spec"]


def test_a_deployment_template_loses_its_empty_lists(
    api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels, "annotations": {}},
        "spec": {"containers": [{"name": "main", "image": PAUSE, "env": []}], "volumes": []},
    }
    spec = {"selector": {"matchLabels": labels, "matchExpressions": []}, "template": template}
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    created = send(api, "POST", path, {"metadata": {"name": name}, "spec": spec})
    got = created["spec"]
    assert got["selector"] == {"matchLabels": labels}
    assert got["template"]["metadata"] == {"labels": labels}
    assert "volumes" not in got["template"]["spec"]
    assert "env" not in got["template"]["spec"]["containers"][0]


@pytest.mark.usefixtures("widget_crds")
def test_a_custom_resource_keeps_its_own_empty_fields_not_its_metadata_ones(
    api: ApiClient, ns: str
) -> None:
    path = f"/apis/{WIDGET_GROUP}/v1/namespaces/{ns}/{WIDGETS}"
    name = unique("w")
    spec = {"tags": [], "extra": {}, "nested": {"list": [], "map": {}}}
    created = send(api, "POST", path, widget(name, spec, **EMPTY_META))
    assert_no_empty_meta(created)
    assert created["spec"] == spec
    put = {**created, "metadata": {**created["metadata"], "labels": {}, "annotations": {}}}
    updated = send(api, "PUT", f"{path}/{name}", put)
    assert_no_empty_meta(updated)
    assert updated["spec"] == spec
    patched = send(api, "PATCH", f"{path}/{name}", {"metadata": {"labels": {}}}, MERGE)
    assert_no_empty_meta(patched)
    assert get(api, f"{path}/{name}") == patched


def test_a_watch_event_carries_the_stored_object(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    created = send(api, "POST", cm_path(ns), empty_configmap(name))
    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        field_selector=f"metadata.name={name}",
        resource_version="0",
        until=lambda evs: any(e["type"] == "ADDED" for e in evs),
        timeout=10,
    )
    added = [e["raw_object"] for e in events if e["type"] == "ADDED"]
    assert added == [created]
    assert_no_empty_meta(added[0])
    assert added[0] == get(api, cm_path(ns, name))
