"""Protobuf request bodies, as Go clients send built-in kinds (client-go, controller-runtime, kubectl 1.33+).

A built-in kind is decoded; a custom resource accepts JSON and YAML only (415).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from tests._protobuf_wire import CONTENT_TYPE, body, entry

from ._support import Raw, assert_status, raw, unique

pytestmark = pytest.mark.timeout(30)


def _send(api: ApiClient, method: str, path: str, payload: bytes) -> Raw:
    """``payload`` as the protobuf body of one request, the response unparsed."""
    return raw(api, method, path, body=payload, content_type=CONTENT_TYPE)


def test_a_protobuf_configmap_is_created(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unique("pb")
    # ConfigMap{metadata: ObjectMeta{name: 1, labels: 11}, data: 2}, as client-go writes it
    cm = [
        (1, [(1, name), (11, entry("via", "protobuf"))]),
        (2, entry("k", "v")),
        (2, entry("e", "")),
    ]
    resp = _send(api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body("v1", "ConfigMap", cm))
    assert resp.status == 201, resp.data
    stored = core.read_namespaced_config_map(name, ns)
    assert stored.data == {"k": "v", "e": ""}
    assert stored.metadata.labels == {"via": "protobuf"}


def test_a_protobuf_custom_resource_is_refused(
    api: ApiClient, ns: str, widget_crds: dict[str, Any]
) -> None:
    group, version, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    resp = _send(
        api,
        "POST",
        f"/apis/{group}/{version}/namespaces/{ns}/{plural}",
        body(f"{group}/{version}", "Widget", [(1, [(1, unique("w"))])]),
    )
    assert_status(resp, 415, "UnsupportedMediaType")


def test_protobuf_delete_options_are_read(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unique("pb")
    core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    # DeleteOptions{preconditions: 2 {uid: 1}}: a wrong uid must refuse the delete
    options = body("v1", "DeleteOptions", [(2, [(1, "00000000-0000-0000-0000-000000000000")])])
    resp = _send(api, "DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}", options)
    assert_status(resp, 409, "Conflict")
    assert core.read_namespaced_config_map(name, ns).metadata.name == name


def test_a_protobuf_scale_update(api: ApiClient, apps: client.AppsV1Api, ns: str) -> None:
    name = unique("pb")
    apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )
    # autoscaling/v1 Scale{metadata: 1 {name: 1, namespace: 3}, spec: 2 {replicas: 1}}
    scale = [(1, [(1, name), (3, ns)]), (2, [(1, 4)])]
    resp = _send(
        api,
        "PUT",
        f"/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale",
        body("autoscaling/v1", "Scale", scale),
    )
    assert resp.status == 200, resp.data
    assert apps.read_namespaced_deployment(name, ns).spec.replicas == 4
