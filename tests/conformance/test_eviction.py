"""The ``pods/eviction`` subresource: a pod deleted only if its PodDisruptionBudget allows it.

The pods are bound to a node that does not exist (no kubelet runs them) and
their status is written by the test, as their kubelet would; the evictions
ask for ``gracePeriodSeconds: 0`` so a real cluster deletes at once too. A
real cluster's disruption controller computes a budget's status from those
pods; the tests write the same values to ``/status`` (envtest runs no
controllers), so they hold on either.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend
from tests._protobuf_wire import CONTENT_TYPE, body

from ._rbac import SETTLE, as_token, bind, token_of
from ._support import Raw, assert_status, raw, unique

pytestmark = pytest.mark.timeout(60)

#: a node no kubelet runs: its pods stay as the test writes them
NOWHERE = "conformance-nowhere"
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
FINALIZER = "conformance.mcruntime.io/hold"


@pytest.fixture
def policy(api: ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api)


def evict(
    api: ApiClient,
    ns: str,
    name: str,
    *,
    named: str | None = None,
    options: dict[str, Any] | None = None,
    query: list[tuple[str, Any]] | None = None,
) -> Raw:
    """POST a policy/v1 Eviction of pod ``name`` (naming pod ``named`` in its body)."""
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": named or name, "namespace": ns},
        "deleteOptions": {"gracePeriodSeconds": 0, **(options or {})},
    }
    path = f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
    return raw(api, "POST", path, body=eviction, query=query)


def pod(
    core: client.CoreV1Api,
    ns: str,
    labels: dict[str, str],
    *,
    phase: str = "Running",
    ready: bool = True,
    **meta: Any,
) -> str:
    """A pod on `NOWHERE` whose status says ``phase`` (and Ready when ``ready``); its name."""
    name = unique("pod")
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": name, "labels": labels, **meta},
            "spec": {
                "nodeName": NOWHERE,
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
            },
        },
    )
    if phase != "Pending":
        ready_condition = {"type": "Ready", "status": "True" if ready else "False"}
        status = {"phase": phase, "conditions": [ready_condition]}
        core.patch_namespaced_pod_status(name, ns, {"status": status})
    return name


def budget(
    policy: client.PolicyV1Api,
    ns: str,
    labels: dict[str, str],
    *,
    allowed: int,
    healthy: int,
    expected: int,
    min_available: int = 1,
) -> str:
    """A budget of ``minAvailable`` pods selecting ``labels``, with the status the disruption
    controller gives it for ``expected`` pods of which ``healthy`` are ready; its name."""
    name = unique("pdb")
    created = policy.create_namespaced_pod_disruption_budget(
        ns,
        {
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}},
        },
    )
    status = {
        "observedGeneration": created.metadata.generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": min_available,
        "expectedPods": expected,
    }
    policy.patch_namespaced_pod_disruption_budget_status(name, ns, {"status": status})
    return name


def exists(core: client.CoreV1Api, ns: str, name: str) -> bool:
    """The pod is there and not being deleted. An evicted pod on a node is deleted
    gracefully: a cluster's pod stays Terminating until its kubelet confirms (envtest
    confirms at once), so both count as evicted."""
    try:
        found = core.read_namespaced_pod(name, ns)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return found.metadata.deletion_timestamp is None


def budget_status(policy: client.PolicyV1Api, ns: str, name: str) -> dict[str, Any]:
    pdb = policy.read_namespaced_pod_disruption_budget(name, ns)
    status: dict[str, Any] = policy.api_client.sanitize_for_serialization(pdb.status)
    return status


def test_eviction_is_discovered_as_a_policy_v1_subresource_of_pods(api: ApiClient) -> None:
    listing = raw(api, "GET", "/api/v1").json()
    entry = next(r for r in listing["resources"] if r["name"] == "pods/eviction")
    assert entry == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }


def test_a_pod_without_a_budget_is_evicted(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = pod(core, ns, {"app": unique("web")})
    resp = evict(api, ns, name)
    assert (resp.status, resp.json()) == (201, SUCCESS)
    assert not exists(core, ns, name)
    # the typed client's own call
    other = pod(core, ns, {"app": unique("web")})
    eviction = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=other, namespace=ns),
        delete_options=client.V1DeleteOptions(grace_period_seconds=0),
    )
    core.create_namespaced_pod_eviction(other, ns, eviction)
    assert not exists(core, ns, other)


def test_an_eviction_naming_another_pod_is_a_bad_request(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = pod(core, ns, {"app": unique("web")})
    resp = evict(api, ns, name, named="someone-else")
    status = assert_status(resp, 400, "BadRequest")
    assert status["message"] == "name in URL does not match name in Eviction object"
    assert exists(core, ns, name)


def test_evicting_a_missing_pod_is_not_found(api: ApiClient, ns: str) -> None:
    status = assert_status(evict(api, ns, "absent"), 404, "NotFound")
    assert status["message"] == 'pods "absent" not found'
    assert status["details"] == {"name": "absent", "kind": "pods"}  # omitempty: no group


def test_a_budget_allowing_no_disruption_refuses_with_too_many_requests(
    api: ApiClient, core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    labels = {"app": unique("db")}
    name = pod(core, ns, labels)
    pdb = budget(policy, ns, labels, allowed=0, healthy=1, expected=1)
    status = assert_status(evict(api, ns, name), 429, "TooManyRequests")
    assert status["message"] == VIOLATION
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {pdb} needs 1 healthy pods and has 1 currently",
        }
    ]
    assert exists(core, ns, name)


def test_a_budget_allowing_one_disruption_is_spent_by_the_first_eviction(
    kube_backend: KubeBackend,
    api: ApiClient,
    core: client.CoreV1Api,
    policy: client.PolicyV1Api,
    ns: str,
) -> None:
    labels = {"app": unique("db")}
    first, second = pod(core, ns, labels), pod(core, ns, labels)
    pdb = budget(policy, ns, labels, allowed=1, healthy=2, expected=2)
    resp = evict(api, ns, first)
    assert (resp.status, resp.json()) == (201, SUCCESS)
    assert not exists(core, ns, first)
    status = budget_status(policy, ns, pdb)
    assert status["disruptionsAllowed"] == 0
    if kube_backend.embedded:  # a real disruption controller forgets it once the pod is gone
        assert list(status["disruptedPods"]) == [first]
        condition = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
        assert (condition["status"], condition["reason"]) == ("False", "InsufficientPods")
    refused = assert_status(evict(api, ns, second), 429, "TooManyRequests")
    assert refused["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert exists(core, ns, second)


def test_a_pod_under_two_budgets_is_not_evicted(
    api: ApiClient, core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    app, tier = {"app": unique("web")}, {"tier": unique("front")}
    name = pod(core, ns, {**app, **tier})
    pod(core, ns, {**app, **tier})
    budget(policy, ns, app, allowed=1, healthy=2, expected=2)
    budget(policy, ns, tier, allowed=1, healthy=2, expected=2)
    resp = evict(api, ns, name)
    assert resp.status == 500, resp.data
    status = resp.json()
    assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", 500)
    assert status["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )
    assert "reason" not in status
    assert exists(core, ns, name)


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_a_dry_run_eviction_changes_nothing(
    api: ApiClient, core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str, where: str
) -> None:
    labels = {"app": unique("db")}
    name = pod(core, ns, labels)
    pod(core, ns, labels)
    pdb = budget(policy, ns, labels, allowed=1, healthy=2, expected=2)
    if where == "query":
        resp = evict(api, ns, name, query=[("dryRun", "All")])
    else:
        resp = evict(api, ns, name, options={"dryRun": ["All"]})
    assert (resp.status, resp.json()) == (201, SUCCESS)
    assert exists(core, ns, name)
    status = budget_status(policy, ns, pdb)
    assert status["disruptionsAllowed"] == 1
    assert not status.get("disruptedPods")


def test_pending_and_finished_pods_are_evicted_whatever_their_budget(
    api: ApiClient, core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    labels = {"app": unique("batch")}
    pending = pod(core, ns, labels, phase="Pending")
    done = pod(core, ns, labels, phase="Succeeded", ready=False)
    budget(policy, ns, labels, allowed=0, healthy=0, expected=2)
    for name in (pending, done):
        resp = evict(api, ns, name)
        assert (resp.status, resp.json()) == (201, SUCCESS)
        assert not exists(core, ns, name)


def test_an_unready_pod_is_evicted_without_spending_a_healthy_budget(
    api: ApiClient, core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    labels = {"app": unique("web")}
    ready = pod(core, ns, labels)
    unready = pod(core, ns, labels, ready=False)
    # one pod is needed and one is healthy: no disruption allowed, yet the unready one may go
    pdb = budget(policy, ns, labels, allowed=0, healthy=1, expected=2)
    resp = evict(api, ns, unready)
    assert (resp.status, resp.json()) == (201, SUCCESS)
    assert not exists(core, ns, unready)
    status = budget_status(policy, ns, pdb)
    assert status["disruptionsAllowed"] == 0 and not status.get("disruptedPods")
    assert_status(evict(api, ns, ready), 429, "TooManyRequests")


def test_an_evicted_pod_is_marked_as_a_disruption_target(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = pod(core, ns, {"app": unique("web")}, finalizers=[FINALIZER])
    try:
        resp = evict(api, ns, name)
        assert (resp.status, resp.json()) == (201, SUCCESS)
        held = core.read_namespaced_pod(name, ns)
        assert held.metadata.deletion_timestamp is not None
        target = next(c for c in held.status.conditions if c.type == "DisruptionTarget")
        assert (target.status, target.reason, target.message) == (
            "True",
            "EvictionByEvictionAPI",
            "Eviction API: evicting",
        )
    finally:
        core.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})
    wait_for(lambda: not exists(core, ns, name), 10, "the released pod to be gone")


def test_preconditions_of_the_delete_options_are_checked(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = pod(core, ns, {"app": unique("web")})
    wrong = "00000000-0000-0000-0000-000000000000"
    resp = evict(api, ns, name, options={"preconditions": {"uid": wrong}})
    status = assert_status(resp, 409, "Conflict")
    assert f"the UID in the precondition ({wrong}) does not match" in status["message"]
    assert exists(core, ns, name)


def test_a_budget_not_yet_observed_asks_to_retry(
    kube_backend: KubeBackend,
    api: ApiClient,
    core: client.CoreV1Api,
    policy: client.PolicyV1Api,
    ns: str,
) -> None:
    kube_backend.require_server("needs a budget no disruption controller has observed")
    labels = {"app": unique("db")}
    name = pod(core, ns, labels)
    pdb = unique("pdb")
    spec = {"minAvailable": 1, "selector": {"matchLabels": labels}}
    policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": pdb}, "spec": spec})
    resp = evict(api, ns, name)
    status = assert_status(resp, 429, "TooManyRequests")
    assert status["details"]["retryAfterSeconds"] == 10
    assert resp.headers.get("Retry-After") == "10"
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {pdb} is still being processed by the server.",
        }
    ]


@pytest.mark.parametrize("version", ["policy/v1", "policy/v1beta1"])
def test_a_protobuf_eviction_is_decoded(
    api: ApiClient, core: client.CoreV1Api, ns: str, version: str
) -> None:
    # as kubectl 1.33 and client-go send it: Eviction{metadata: 1 {name: 1, namespace: 3},
    # deleteOptions: 2 {gracePeriodSeconds: 1}}
    name = pod(core, ns, {"app": unique("web")})
    eviction = body(version, "Eviction", [(1, [(1, name), (3, ns)]), (2, [(1, 0)])])
    path = f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
    resp = raw(api, "POST", path, body=eviction, content_type=CONTENT_TYPE)
    assert (resp.status, resp.json()) == (201, SUCCESS)
    assert not exists(core, ns, name)


def test_evicting_takes_create_on_pods_eviction(
    kube_backend: KubeBackend, api: ApiClient, core: client.CoreV1Api, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("evictor")
    rule = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    rbac.create_namespaced_role(ns, {"metadata": {"name": role}, "rules": [rule]})
    bind(rbac, ns, account, "Role", role)
    stranger = unique("sa")
    core.create_namespaced_service_account(ns, {"metadata": {"name": stranger}})
    name = pod(core, ns, {"app": unique("web")})
    with as_token(kube_backend, token_of(api, ns, stranger)) as stranger_api:
        status = assert_status(evict(stranger_api, ns, name), 403, "Forbidden")
    assert status["message"] == (
        f'pods "{name}" is forbidden: User "system:serviceaccount:{ns}:{stranger}" cannot '
        f'create resource "pods/eviction" in API group "" in the namespace "{ns}"'
    )
    assert exists(core, ns, name)
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        wait_for(lambda: evict(sa_api, ns, name).status == 201, SETTLE, "the role to apply")
    assert not exists(core, ns, name)
