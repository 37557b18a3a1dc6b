"""The pod subresources kube-apiserver hands on to a node's kubelet: ``log``, ``exec``,
``attach`` and ``portforward``, up to the point where it connects to the kubelet.

Each pod names a scheduler that does not run, so on a real cluster it stays off every
node until a test binds it, and the nodes the tests bind to run no kubelet: the answers
below are the API server's own, on envtest and on a cluster alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import Raw, assert_status, raw, unique
from .test_admission_webhooks import Hooks, admission, hooks, rules_for
from .test_binding import bind, unscheduled

__all__ = ["admission", "hooks"]  # the webhook fixtures, used here too

pytestmark = pytest.mark.timeout(60)

CONNECTED = ("exec", "attach", "portforward")


def path(ns: str, pod: str, sub: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods/{pod}/{sub}"


def ask(api: ApiClient, method: str, ns: str, pod: str, sub: str, **query: Any) -> Raw:
    """One request of ``sub``; a list value is a repeated parameter (exec's ``command``)."""
    params = [
        (k, v)
        for k, value in query.items()
        for v in (value if isinstance(value, list) else [value])
    ]
    return raw(api, method, path(ns, pod, sub), query=params)


def failed(resp: Raw, code: int, reason: str | None) -> dict[str, Any]:
    """The Status of a failed answer; ``reason`` None: an error kube-apiserver passes on
    as it is (a 500 without reason)."""
    if reason is not None:
        return assert_status(resp, code, reason)
    assert resp.status == code, resp
    body = resp.json()
    assert (body["kind"], body["status"], body["code"]) == ("Status", "Failure", code), body
    assert "reason" not in body, body
    return dict(body)


@pytest.fixture
def nodes(kube_api_client: ApiClient) -> Iterator[list[str]]:
    """Names of Nodes a test creates (``node(...)``), deleted after it."""
    made: list[str] = []
    yield made
    core = client.CoreV1Api(kube_api_client)
    for name in made:
        core.delete_node(name)


def node(core: client.CoreV1Api, made: list[str], **status: Any) -> str:
    """A Node no kubelet runs, with ``status`` (addresses, daemonEndpoints) set."""
    name = unique("node")
    core.create_node({"metadata": {"name": name}})
    made.append(name)
    if status:
        core.patch_node_status(name, {"status": status})
    return name


def test_discovery_lists_the_kubelet_subresources(api: ApiClient) -> None:
    resources = {r["name"]: r for r in raw(api, "GET", "/api/v1").json()["resources"]}
    assert (resources["pods/log"]["kind"], resources["pods/log"]["verbs"]) == ("Pod", ["get"])
    for sub, kind in (
        ("exec", "PodExecOptions"),
        ("attach", "PodAttachOptions"),
        ("portforward", "PodPortForwardOptions"),
    ):
        entry = resources[f"pods/{sub}"]
        assert (entry["kind"], entry["namespaced"]) == (kind, True)
        assert sorted(entry["verbs"]) == ["create", "get"]


def test_the_log_of_a_pod_on_no_node_is_empty(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)["metadata"]["name"]
    resp = ask(api, "GET", ns, pod, "log")
    assert (resp.status, resp.data) == (204, b"")  # no location to read: no content
    # what a client reading logs gets: nothing, and no error
    assert not core.read_namespaced_pod_log(pod, ns)
    assert not core.read_namespaced_pod_log(pod, ns, container="main", tail_lines=5)


def test_the_connected_subresources_of_a_pod_on_no_node_are_a_bad_request(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)["metadata"]["name"]
    for sub in CONNECTED:
        for method in ("GET", "POST"):
            resp = ask(api, method, ns, pod, sub, stdout="true", command=["ls", "-l"], ports="80")
            status = failed(resp, 400, "BadRequest")
            assert status["message"] == f"pod {pod} does not have a host assigned", (sub, method)


def test_a_container_must_be_the_pod_s_and_named_when_it_has_several(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    one = unscheduled(core, ns)["metadata"]["name"]
    for sub in ("log", "exec", "attach"):
        status = failed(ask(api, "GET", ns, one, sub, container="nope"), 400, "BadRequest")
        assert status["message"] == f"container nope is not valid for pod {one}"
    several = unscheduled(
        core,
        ns,
        initContainers=[{"name": "setup", "image": "registry.k8s.io/pause:3.9"}],
        containers=[
            {"name": "main", "image": "registry.k8s.io/pause:3.9"},
            {"name": "side", "image": "registry.k8s.io/pause:3.9"},
        ],
    )["metadata"]["name"]
    for sub in ("log", "exec", "attach"):
        status = failed(ask(api, "GET", ns, several, sub), 400, "BadRequest")
        assert status["message"] == (
            f"a container name must be specified for pod {several}, choose one of: "
            "[main side] or one of the init containers: [setup]"
        )
    # an init container may be named; the pod's port-forward names none
    assert ask(api, "GET", ns, several, "log", container="setup").status == 204
    assert ask(api, "GET", ns, several, "portforward").status == 400


def test_log_options_are_validated_before_the_pod_is_looked_up(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    status = failed(ask(api, "GET", ns, "no-such-pod", "log", tailLines="-1"), 422, "Invalid")
    assert status["message"] == (
        'PodLogOptions "no-such-pod" is invalid: tailLines: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: -1: must be greater than or equal to 0",
            "field": "tailLines",
        }
    ]
    status = failed(
        ask(api, "GET", ns, "p", "log", limitBytes="0", sinceSeconds="0"), 422, "Invalid"
    )
    assert status["message"] == (
        'PodLogOptions "p" is invalid: [limitBytes: Invalid value: 0: must be greater than 0, '
        "sinceSeconds: Invalid value: 0: must be greater than 0]"
    )
    both = {"sinceSeconds": "5", "sinceTime": "2024-01-01T00:00:00Z"}
    status = failed(ask(api, "GET", ns, "p", "log", **both), 422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
            "field": "",
        }
    ]
    status = failed(ask(api, "GET", ns, "p", "log", tailLines="ten"), 400, "BadRequest")
    assert status["message"] == 'strconv.ParseInt: parsing "ten": invalid syntax'
    # valid options, then the pod
    status = failed(ask(api, "GET", ns, "no-such-pod", "log", tailLines="3"), 404, "NotFound")
    assert status["message"] == 'pods "no-such-pod" not found'
    for sub in CONNECTED:
        failed(ask(api, "POST", ns, "no-such-pod", sub), 404, "NotFound")


def test_a_pod_on_a_node_that_is_not_there_is_not_found(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)["metadata"]["name"]
    gone = unique("node")
    assert bind(api, ns, pod, node=gone).status == 201
    for sub in ("log", *CONNECTED):
        status = failed(ask(api, "GET", ns, pod, sub), 404, "NotFound")
        assert status["message"] == f'nodes "{gone}" not found', sub
        assert status["details"] == {"name": gone, "kind": "nodes"}


def test_a_node_without_an_address_has_no_kubelet_to_reach(
    api: ApiClient, core: client.CoreV1Api, ns: str, nodes: list[str]
) -> None:
    pod = unscheduled(core, ns)["metadata"]["name"]
    assert bind(api, ns, pod, node=node(core, nodes)).status == 201
    for sub in ("log", *CONNECTED):
        status = failed(ask(api, "GET", ns, pod, sub), 500, None)
        assert status["message"] == "no preferred addresses found; known addresses: []", sub


def test_the_kubelet_is_reached_at_the_node_s_address_and_port(
    api: ApiClient,
    core: client.CoreV1Api,
    ns: str,
    nodes: list[str],
    kube_backend: KubeBackend,
) -> None:
    """The node's InternalIP and the port it reports: 127.0.0.1:1 refuses at once on a
    cluster; envtest answers that it runs no kubelet."""
    where = node(
        core,
        nodes,
        addresses=[{"type": "InternalIP", "address": "127.0.0.1"}],
        daemonEndpoints={"kubeletEndpoint": {"Port": 1}},
    )
    pod = unscheduled(core, ns)["metadata"]["name"]
    assert bind(api, ns, pod, node=where).status == 201
    status = failed(ask(api, "GET", ns, pod, "log"), 500, None)
    url = f"https://127.0.0.1:1/containerLogs/{ns}/{pod}/main"
    assert status["message"].startswith(f'Get "{url}": '), status
    exec_status = failed(ask(api, "POST", ns, pod, "exec", command=["ls"]), 500, None)
    assert exec_status["message"].startswith("error dialing backend: "), exec_status
    if kube_backend.name == "embedded":
        assert status["message"] == f'Get "{url}": envtest runs no kubelet'
        assert exec_status["message"] == (
            "error dialing backend: envtest runs no kubelet at "
            f"https://127.0.0.1:1/exec/{ns}/{pod}/main"
        )


def test_logs_take_only_get(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    pod = unscheduled(core, ns)["metadata"]["name"]
    failed(ask(api, "POST", ns, pod, "log"), 405, "MethodNotAllowed")


def test_a_webhook_on_pods_exec_sees_the_exec_options_and_may_refuse(
    api: ApiClient, hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    """kube-apiserver admits a connect as a CONNECT of the subresource whose object is the
    options, before it looks the pod up: a policy that refuses ``kubectl exec`` refuses."""
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/no-exec",
            rules=rules_for("", "pods/exec", "CONNECT"),
            namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": ns}},
        )
    )
    pod = unscheduled(core, ns)["metadata"]["name"]
    query = {"container": "main", "stdout": "true", "stderr": "true", "command": ["ls", "-l"]}
    # the webhook's reason (mcruntime's denied(), as controller-runtime's: Forbidden)
    status = failed(ask(api, "POST", ns, pod, "exec", **query), 403, "Forbidden")
    assert "exec is not allowed here" in status["message"]
    seen = hooks.seen["/no-exec"][-1]
    assert (seen.operation, seen.name, seen.namespace) == ("CONNECT", pod, ns)
    assert seen.obj == {
        "kind": "PodExecOptions",
        "apiVersion": "v1",
        "container": "main",
        "stdout": True,
        "stderr": True,
        "command": ["ls", "-l"],
    }
    # a webhook not on pods/exec is not asked: attach goes on to its own answer
    failed(ask(api, "POST", ns, pod, "attach", stdout="true"), 400, "BadRequest")
    assert len(hooks.seen["/no-exec"]) == 1
