"""The ``pods/ephemeralcontainers`` subresource: how ``kubectl debug`` adds a container
to a pod. Pods name a scheduler that does not run, so nothing starts what is added."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import Raw, assert_status, raw, unique
from .test_binding import unscheduled

pytestmark = pytest.mark.timeout(60)

DEBUGGER = {"name": "debugger", "image": "busybox:1.36", "targetContainerName": "main"}


def sub_path(ns: str, pod: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods/{pod}/ephemeralcontainers"


def add(api: ApiClient, ns: str, pod: str, *containers: dict[str, Any]) -> Raw:
    """A strategic merge patch adding ``containers``, as ``kubectl debug`` sends it."""
    patch = {"spec": {"ephemeralContainers": list(containers)}}
    return raw(
        api,
        "PATCH",
        sub_path(ns, pod),
        body=patch,
        content_type="application/strategic-merge-patch+json",
    )


def causes(resp: Raw) -> list[tuple[str, str]]:
    status = assert_status(resp, 422, "Invalid")
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def test_discovery_lists_the_subresource(api: ApiClient) -> None:
    resources = {r["name"]: r for r in raw(api, "GET", "/api/v1").json()["resources"]}
    entry = resources["pods/ephemeralcontainers"]
    assert (entry["kind"], sorted(entry["verbs"])) == ("Pod", ["get", "patch", "update"])


def test_a_debug_container_is_added_and_nothing_else_changes(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)
    name = pod["metadata"]["name"]
    # a patch that tries to change more than the ephemeral containers changes only them
    patch = {
        "metadata": {"labels": {"sneaky": "yes"}},
        "spec": {"ephemeralContainers": [DEBUGGER], "activeDeadlineSeconds": 5},
    }
    resp = raw(
        api,
        "PATCH",
        sub_path(ns, name),
        body=patch,
        content_type="application/strategic-merge-patch+json",
        query=[("fieldManager", "kubectl-debug")],
    )
    assert resp.status == 200, resp.json()
    got = resp.json()
    (debugger,) = got["spec"]["ephemeralContainers"]
    assert {k: debugger[k] for k in DEBUGGER} == DEBUGGER
    # defaulted as a container is
    assert debugger["imagePullPolicy"] == "IfNotPresent"
    assert debugger["terminationMessagePolicy"] == "File"
    assert "labels" not in got["metadata"] or "sneaky" not in got["metadata"]["labels"]
    assert "activeDeadlineSeconds" not in got["spec"]
    assert int(got["metadata"]["resourceVersion"]) > int(pod["metadata"]["resourceVersion"])
    (entry,) = [m for m in got["metadata"]["managedFields"] if m["manager"] == "kubectl-debug"]
    assert entry["subresource"] == "ephemeralcontainers"
    assert list(entry["fieldsV1"]["f:spec"]) == ["f:ephemeralContainers"]
    # a GET of the subresource is the pod
    assert raw(api, "GET", sub_path(ns, name)).json() == got


def test_ephemeral_containers_are_only_added(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    assert add(api, ns, name, DEBUGGER).status == 200
    current = raw(api, "GET", sub_path(ns, name)).json()

    removed = {**current, "spec": {**current["spec"], "ephemeralContainers": []}}
    resp = raw(api, "PUT", sub_path(ns, name), body=removed)
    assert causes(resp) == [("spec.ephemeralContainers", "FieldValueForbidden")]
    assert assert_status(resp, 422, "Invalid")["message"].startswith(
        f'Pod "{name}" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
        'containers "debugger" may not be removed'
    )
    changed = dict(current["spec"]["ephemeralContainers"][0], image="busybox:1.37")
    resp = raw(
        api,
        "PUT",
        sub_path(ns, name),
        body={**current, "spec": {**current["spec"], "ephemeralContainers": [changed]}},
    )
    assert "may not be changed" in assert_status(resp, 422, "Invalid")["message"]
    # another one may join
    second = {"name": "second", "image": "busybox:1.36"}
    resp = add(api, ns, name, second)
    assert resp.status == 200, resp.json()
    # a strategic merge puts the patch's new items first (kube's mergeSortedSlice);
    # kubectl debug sends $setElementOrder to keep the order
    assert [c["name"] for c in resp.json()["spec"]["ephemeralContainers"]] == [
        "second",
        "debugger",
    ]


def test_a_new_ephemeral_container_is_checked(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    assert causes(add(api, ns, name, {"name": "main", "image": "busybox"})) == [
        ("spec.ephemeralContainers[0].name", "FieldValueDuplicate")
    ]
    assert causes(add(api, ns, name, {"name": "dbg"})) == [
        ("spec.ephemeralContainers[0].image", "FieldValueRequired")
    ]
    assert causes(
        add(api, ns, name, {"name": "dbg", "image": "busybox", "targetContainerName": "nope"})
    ) == [("spec.ephemeralContainers[0].targetContainerName", "FieldValueNotFound")]
    ports = {"name": "dbg", "image": "busybox", "ports": [{"containerPort": 80}]}
    assert causes(add(api, ns, name, ports)) == [
        ("spec.ephemeralContainers[0].ports", "FieldValueForbidden")
    ]
    assert core.read_namespaced_pod(name, ns).spec.ephemeral_containers is None


def test_a_pod_is_not_created_with_ephemeral_containers(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    body = {
        "metadata": {"name": unique("pod")},
        "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox"}],
        },
    }
    resp = raw(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=body)
    assert causes(resp) == [("spec.ephemeralContainers", "FieldValueForbidden")]
    assert "cannot be set on create" in resp.json()["message"]


def test_the_subresource_is_neither_created_nor_deleted(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    for method in ("POST", "DELETE"):
        assert_status(raw(api, method, sub_path(ns, name), body={}), 405, "MethodNotAllowed")
