"""The ``pods/binding`` subresource: how a scheduler assigns a pod to a node.

Each pod names a scheduler that does not run (``schedulerName``), so on a real
cluster kube-scheduler leaves it to the test, and is bound to a node no kubelet
runs, so nothing changes it afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import Raw, raw, unique

pytestmark = pytest.mark.timeout(60)

NODE = "conformance-nowhere"
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def unscheduled(core: client.CoreV1Api, ns: str, **spec: Any) -> dict[str, Any]:
    """A pod no scheduler of the cluster takes; as created."""
    name = unique("pod")
    return core.api_client.sanitize_for_serialization(
        core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name},
                "spec": {
                    "schedulerName": "conformance-no-such-scheduler",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
                    **spec,
                },
            },
        )
    )


def bind(api: ApiClient, ns: str, name: str, node: str = NODE, **meta: Any) -> Raw:
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta.pop("named", name), **meta},
        "target": {"kind": "Node", "name": node},
    }
    return raw(api, "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=binding)


def test_discovery_lists_the_binding_subresource(api: ApiClient) -> None:
    resources = raw(api, "GET", "/api/v1").json()["resources"]
    (entry,) = [r for r in resources if r["name"] == "pods/binding"]
    assert (entry["kind"], entry["namespaced"], entry["verbs"]) == ("Binding", True, ["create"])


def test_a_binding_puts_the_pod_on_the_node_and_marks_it_scheduled(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)
    name = pod["metadata"]["name"]
    answer = bind(api, ns, name, annotations={"scheduler.example.com/score": "7"})
    assert (answer.status, answer.json()) == (201, SUCCESS)
    bound = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, ns))
    assert bound["spec"]["nodeName"] == NODE
    assert bound["metadata"]["annotations"]["scheduler.example.com/score"] == "7"
    (scheduled,) = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["status"] == "True"
    assert scheduled["lastTransitionTime"]
    assert int(bound["metadata"]["resourceVersion"]) > int(pod["metadata"]["resourceVersion"])
    # written by the server itself: no field manager claims the node
    managers = {e["manager"] for e in bound["metadata"].get("managedFields") or ()}
    assert managers == {e["manager"] for e in pod["metadata"].get("managedFields") or ()}


def test_a_bound_pod_cannot_be_bound_again(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    assert bind(api, ns, name).status == 201
    again = bind(api, ns, name, node="elsewhere")
    assert again.status == 409
    status = again.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        f'Operation cannot be fulfilled on pods/binding "{name}": '
        f'pod {name} is already assigned to node "{NODE}"'
    )
    assert core.read_namespaced_pod(name, ns).spec.node_name == NODE


def test_a_pod_with_scheduling_gates_is_not_bound(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns, schedulingGates=[{"name": "example.com/wait"}])["metadata"]["name"]
    answer = bind(api, ns, name)
    assert answer.status == 409
    assert answer.json()["message"].endswith(f"pod {name} has non-empty .spec.schedulingGates")
    assert core.read_namespaced_pod(name, ns).spec.node_name is None


def test_the_bindings_uid_and_resource_version_are_preconditions(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)
    name, rv = pod["metadata"]["name"], pod["metadata"]["resourceVersion"]
    stale = bind(api, ns, name, uid="00000000-0000-0000-0000-000000000000")
    assert stale.status == 409
    assert "Precondition failed: UID in precondition" in stale.json()["message"]
    core.patch_namespaced_pod(name, ns, {"metadata": {"labels": {"moved": "on"}}})
    old = bind(api, ns, name, resourceVersion=rv)
    assert old.status == 409
    assert "Precondition failed: ResourceVersion in precondition" in old.json()["message"]
    assert bind(api, ns, name, uid=pod["metadata"]["uid"]).status == 201


def test_a_binding_is_checked_before_anything_is_written(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    other = bind(api, ns, name, named="another-pod")
    assert (other.status, other.json()["message"]) == (
        400,
        "name in URL does not match name in Binding object",
    )
    path = f"/api/v1/namespaces/{ns}/pods/{name}/binding"
    no_node = raw(api, "POST", path, body={"metadata": {"name": name}, "target": {"kind": "Node"}})
    assert no_node.status == 500  # kube-apiserver passes its validation error on unwrapped
    assert no_node.json()["message"] == "target.name: Required value"
    assert raw(api, "POST", path, body=[]).status == 400
    dry = raw(
        api,
        "POST",
        path,
        query=[("dryRun", "All")],
        body={"metadata": {"name": name}, "target": {"name": NODE}},
    )
    assert dry.status == 201
    assert core.read_namespaced_pod(name, ns).spec.node_name is None
    missing = bind(api, ns, "no-such-pod")
    assert missing.status == 404


def test_the_typed_client_binds(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name),
        target=client.V1ObjectReference(kind="Node", name=NODE),
    )
    core.create_namespaced_pod_binding(name, ns, body, _preload_content=False)
    assert core.read_namespaced_pod(name, ns).spec.node_name == NODE


def test_the_older_bindings_resource_binds_the_pod_its_body_names(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unscheduled(core, ns)["metadata"]["name"]
    resources = raw(api, "GET", "/api/v1").json()["resources"]
    (entry,) = [r for r in resources if r["name"] == "bindings"]
    assert (entry["kind"], entry["namespaced"], entry["verbs"]) == ("Binding", True, ["create"])
    binding = {"metadata": {"name": name}, "target": {"name": NODE}}
    answer = raw(api, "POST", f"/api/v1/namespaces/{ns}/bindings", body=binding)
    assert (answer.status, answer.json()) == (201, SUCCESS)
    assert core.read_namespaced_pod(name, ns).spec.node_name == NODE
