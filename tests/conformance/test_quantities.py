"""Resource quantities come back in canonical form: kube-apiserver decodes each into a number
and encodes it again. A controller that compares the quantities it rendered with the live
object's strings (``0.5`` against ``500m``) sees a difference that is not one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import Raw, deployment, raises_status, raw, rv, to_dict, unique

APPLY = "application/apply-patch+yaml"

pytestmark = pytest.mark.timeout(30)

#: what is written -> what is read back
CANONICAL = {
    "requests.cpu": ("0.5", "500m"),
    "limits.cpu": ("2000m", "2"),
    "requests.memory": ("1.5Gi", "1536Mi"),
    "limits.memory": ("1024Mi", "1Gi"),
    "requests.storage": ("0.5Ki", "512"),
    "requests.ephemeral-storage": ("1000M", "1G"),
    "limits.ephemeral-storage": ("1200000", "1200k"),
    "cpu": ("129e6", "129e6"),
    "memory": ("100Mi", "100Mi"),
    "services.loadbalancers": ("0", "0"),
}


def pod(name: str, requests: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    resources = {"requests": requests, "limits": limits}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": resources}
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def test_a_pod_s_resources_are_stored_canonical(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    requests = {"cpu": "0.5", "memory": "1.5Gi"}
    limits = {"cpu": "2000m", "memory": "2048Mi"}
    created = to_dict(api, core.create_namespaced_pod(ns, pod(unique("q"), requests, limits)))
    resources = created["spec"]["containers"][0]["resources"]
    assert resources == {
        "requests": {"cpu": "500m", "memory": "1536Mi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }


def test_every_format_comes_back_canonical(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unique("quota")
    hard = {k: written for k, (written, _) in CANONICAL.items()}
    try:
        created = core.create_namespaced_resource_quota(
            ns, {"metadata": {"name": name}, "spec": {"hard": hard}}
        )
        assert to_dict(api, created)["spec"]["hard"] == {k: c for k, (_, c) in CANONICAL.items()}
    finally:
        core.delete_namespaced_resource_quota(name, ns)


def test_a_template_s_quantities_and_a_claim_s_storage_too(
    api: ApiClient, apps: client.AppsV1Api, core: client.CoreV1Api, ns: str
) -> None:
    d = deployment(unique("q"))
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "0.25"}}
    d["spec"]["template"]["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {"sizeLimit": "1.5Gi"}}]
    created = to_dict(api, apps.create_namespaced_deployment(ns, d))["spec"]["template"]["spec"]
    assert created["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    assert created["volumes"][0]["emptyDir"] == {"sizeLimit": "1536Mi"}
    claim = {
        "metadata": {"name": unique("pvc")},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "0.5Gi"}},
            "storageClassName": "conformance-none",
        },
    }
    spec = to_dict(api, core.create_namespaced_persistent_volume_claim(ns, claim))["spec"]
    assert spec["resources"]["requests"] == {"storage": "512Mi"}


def test_the_same_quantity_in_other_words_changes_nothing(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """An update that says the same in other words stores nothing new: no resourceVersion,
    no watch event (a LimitRange: no controller writes to it meanwhile)."""
    name = unique("limits")
    limits = {"type": "Container", "max": {"cpu": "2"}, "defaultRequest": {"cpu": "0.5"}}
    created = to_dict(
        api,
        core.create_namespaced_limit_range(
            ns, {"metadata": {"name": name}, "spec": {"limits": [limits]}}
        ),
    )
    try:
        (stored,) = created["spec"]["limits"]
        assert (stored["max"], stored["defaultRequest"]) == ({"cpu": "2"}, {"cpu": "500m"})
        again = {**created, "spec": {"limits": [{**stored, "max": {"cpu": "2000m"}}]}}
        again["spec"]["limits"][0]["defaultRequest"] = {"cpu": "0.5"}
        updated = to_dict(api, core.replace_namespaced_limit_range(name, ns, again))
        assert rv(updated) == rv(created), "no change: no new resourceVersion"
        assert updated["spec"] == created["spec"]
    finally:
        core.delete_namespaced_limit_range(name, ns)


def test_a_value_that_is_not_a_quantity_is_a_400(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(400, "BadRequest") as status:
        core.create_namespaced_pod(ns, pod(unique("q"), {"memory": "1Gb"}, {}))
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    with raises_status(400, "BadRequest") as status:
        core.create_namespaced_pod(ns, pod(unique("q"), {"memory": "512Gu"}, {}))
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: unable to parse quantity\'s suffix'
    )


def test_two_managers_applying_one_quantity_in_other_words_do_not_conflict(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """Server-side apply compares values: a second manager applying ``0.5`` where the first
    applied ``500m`` changes nothing, so it shares the field instead of conflicting."""
    name = unique("limits")
    path = f"/api/v1/namespaces/{ns}/limitranges/{name}"

    def applied(manager: str, cpu: str) -> Raw:
        limits = [{"type": "Container", "defaultRequest": {"cpu": cpu}}]
        body = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}}
        body["spec"] = {"limits": limits}
        query = [("fieldManager", manager)]
        data = json.dumps(body)
        return raw(api, "PATCH", path, query=query, body=data, content_type=APPLY)

    try:
        first = applied("first", "500m")
        assert first.status == 201, first.json()
        second = applied("second", "0.5")
        assert second.status == 200, second.json()
        obj = second.json()
        assert obj["spec"]["limits"][0]["defaultRequest"] == {"cpu": "500m"}
        assert {e["manager"] for e in obj["metadata"]["managedFields"]} == {"first", "second"}
        third = applied("third", "1")
        assert third.status == 409, "a different value still conflicts"
    finally:
        core.delete_namespaced_limit_range(name, ns)
