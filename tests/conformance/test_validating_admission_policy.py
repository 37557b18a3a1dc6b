"""ValidatingAdmissionPolicies and their bindings (``admissionregistration.k8s.io/v1``):
served, validated when written, and enforced on the requests they match.

Each binding selects only the test's namespace (``matchResources.namespaceSelector``), so
the tests do not touch what other tests write on a shared cluster. A real kube-apiserver
learns of a new policy or binding through an informer, a moment later: each test waits,
with a deadline, until a dry-run probe meets the policy before it checks anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from mcruntime.client import parse_warnings

from ._support import (
    assert_status,
    configmap,
    deployment,
    raises_status,
    raw,
    unique,
    wait_for,
)
from .test_crd_versions import gadget_stored_in_v1alpha1

pytestmark = pytest.mark.timeout(60)

GROUP = "admissionregistration.k8s.io"
BASE = f"/apis/{GROUP}/v1"
DEPLOYMENTS = {
    "apiGroups": ["apps"],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["deployments"],
}
CONFIGMAPS = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
REPLICAS = "object.spec.replicas <= 5"


@pytest.fixture
def regs(kube_api_client: ApiClient) -> client.AdmissionregistrationV1Api:
    return client.AdmissionregistrationV1Api(kube_api_client)


class Policies:
    """Creates policies and bindings with unique names; deletes them afterwards."""

    def __init__(self, regs: client.AdmissionregistrationV1Api, ns: str) -> None:
        self.regs, self.ns = regs, ns
        self.policies: list[str] = []
        self.bindings: list[str] = []

    def policy(self, rules: list[dict[str, Any]], **spec: Any) -> str:
        name = unique("policy") + ".example.com"
        body = {
            "apiVersion": f"{GROUP}/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules}, **spec},
        }
        self.regs.create_validating_admission_policy(body)
        self.policies.append(name)
        return name

    def bind(self, policy: str, actions: tuple[str, ...] = ("Deny",), selector: Any = None) -> str:
        name = unique("binding") + ".example.com"
        if selector is None:
            selector = {"matchLabels": {"kubernetes.io/metadata.name": self.ns}}
        body = {
            "apiVersion": f"{GROUP}/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": policy,
                "validationActions": list(actions),
                "matchResources": {"namespaceSelector": selector},
            },
        }
        self.regs.create_validating_admission_policy_binding(body)
        self.bindings.append(name)
        return name

    def cleanup(self) -> None:
        for name in self.bindings:
            with contextlib.suppress(ApiException):
                self.regs.delete_validating_admission_policy_binding(name)
        for name in self.policies:
            with contextlib.suppress(ApiException):
                self.regs.delete_validating_admission_policy(name)


@pytest.fixture
def policies(regs: client.AdmissionregistrationV1Api, ns: str) -> Iterator[Policies]:
    p = Policies(regs, ns)
    try:
        yield p
    finally:
        p.cleanup()


def refused(probe: Callable[[], Any]) -> Callable[[], bool]:
    """A condition: ``probe`` (a dry run) is refused (the policy took effect)."""

    def check() -> bool:
        try:
            probe()
        except ApiException as e:
            if e.status in (403, 422):
                return True
            raise
        return False

    return check


def dry_deployment(apps: client.AppsV1Api, ns: str, replicas: int) -> Callable[[], Any]:
    return lambda: apps.create_namespaced_deployment(
        ns, deployment(unique("probe"), replicas=replicas), dry_run="All"
    )


def post(api: ApiClient, path: str, body: Any) -> tuple[int, list[str], dict[str, Any]]:
    resp = raw(api, "POST", path, body=body, content_type="application/json")
    warnings = [w for h in resp.headers.getlist("Warning") for w in parse_warnings(h)]
    return resp.status, warnings, resp.json()


# ------------------------------------------------------------------ served


def test_discovery_lists_policies_and_bindings(api: ApiClient) -> None:
    resp = raw(api, "GET", BASE)
    assert resp.status == 200
    found = {r["name"]: r for r in resp.json()["resources"]}
    policy = found["validatingadmissionpolicies"]
    assert policy["kind"] == "ValidatingAdmissionPolicy"
    assert policy["namespaced"] is False
    assert "validatingadmissionpolicies/status" in found
    binding = found["validatingadmissionpolicybindings"]
    assert binding["kind"] == "ValidatingAdmissionPolicyBinding"
    assert binding["namespaced"] is False
    assert "validatingadmissionpolicybindings/status" not in found


def test_policy_is_defaulted_and_its_status_observes_its_generation(
    policies: Policies, regs: client.AdmissionregistrationV1Api, api: ApiClient
) -> None:
    name = policies.policy([DEPLOYMENTS], validations=[{"expression": REPLICAS}])
    got = raw(api, "GET", f"{BASE}/validatingadmissionpolicies/{name}").json()
    spec = got["spec"]
    assert spec["failurePolicy"] == "Fail"
    constraints = spec["matchConstraints"]
    assert constraints["matchPolicy"] == "Equivalent"
    assert constraints["namespaceSelector"] == {}
    assert constraints["objectSelector"] == {}
    assert constraints["resourceRules"][0]["scope"] == "*"
    assert got["metadata"]["generation"] == 1

    def observed() -> bool:
        status = regs.read_validating_admission_policy_status(name).status
        return status is not None and status.observed_generation == 1

    wait_for(observed, timeout=15, what="the policy's status observes generation 1")


# ------------------------------------------------------------------ validation


def test_policy_without_validations_is_invalid(policies: Policies) -> None:
    with raises_status(422, "Invalid") as status:
        policies.policy([DEPLOYMENTS])
    why = "Required value: validations or auditAnnotations must contain at least one item"
    assert status["message"].endswith(
        f"is invalid: [spec.validations: {why}, spec.auditAnnotations: {why}]"
    ), status["message"]
    causes = status["details"]["causes"]
    assert [(c["reason"], c["field"]) for c in causes] == [
        ("FieldValueRequired", "spec.validations"),
        ("FieldValueRequired", "spec.auditAnnotations"),
    ]


def test_policy_whose_expression_does_not_compile_is_invalid(policies: Policies) -> None:
    expression = "object.spec.replicas <"
    with raises_status(422, "Invalid") as status:
        policies.policy([DEPLOYMENTS], validations=[{"expression": expression}])
    prefix = (
        f'spec.validations[0].expression: Invalid value: "{expression}": '
        "compilation failed: ERROR: <input>:1:"
    )
    assert f"is invalid: {prefix}" in status["message"], status["message"]
    (cause,) = status["details"]["causes"]
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["field"] == "spec.validations[0].expression"
    assert status["details"]["kind"] == "ValidatingAdmissionPolicy"
    assert status["details"]["group"] == GROUP


def test_policy_calling_an_undeclared_function_is_invalid(policies: Policies) -> None:
    expression = "fooBar(object)"
    with raises_status(422, "Invalid") as status:
        policies.policy([DEPLOYMENTS], validations=[{"expression": expression}])
    assert status["message"].endswith(
        f'spec.validations[0].expression: Invalid value: "{expression}": compilation failed: '
        "ERROR: <input>:1:7: undeclared reference to 'fooBar' (in container '')\n"
        " | fooBar(object)\n | ......^"
    ), status["message"]


def test_binding_without_policy_name_is_invalid(api: ApiClient) -> None:
    name = unique("binding")
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"validationActions": ["Deny"]},
    }
    resp = raw(
        api,
        "POST",
        f"{BASE}/validatingadmissionpolicybindings",
        body=body,
        content_type="application/json",
    )
    status = assert_status(resp, 422, "Invalid")
    assert status["message"] == (
        f'ValidatingAdmissionPolicyBinding.{GROUP} "{name}" is invalid: '
        "spec.policyName: Required value"
    )


def test_binding_that_denies_and_warns_is_invalid(regs: client.AdmissionregistrationV1Api) -> None:
    name = unique("binding")
    body = {
        "metadata": {"name": name},
        "spec": {"policyName": "some-policy", "validationActions": ["Deny", "Warn"]},
    }
    with raises_status(422, "Invalid") as status:
        regs.create_validating_admission_policy_binding(body)
    assert status["message"] == (
        f'ValidatingAdmissionPolicyBinding.{GROUP} "{name}" is invalid: '
        'spec.validationActions: Invalid value: []string{"Deny", "Warn"}: must not contain '
        "both Deny and Warn (repeating the same validation failure information in the API "
        "response and headers serves no purpose)"
    )


# ------------------------------------------------------------------ enforcement


def test_deny_binding_refuses_a_deployment_with_too_many_replicas(
    policies: Policies, apps: client.AppsV1Api, ns: str
) -> None:
    policy = policies.policy([DEPLOYMENTS], validations=[{"expression": REPLICAS}])
    binding = policies.bind(policy)
    wait_for(refused(dry_deployment(apps, ns, 6)), timeout=15, what="the policy enforced")

    apps.create_namespaced_deployment(ns, deployment("small", replicas=3))
    with pytest.raises(ApiException) as info:
        apps.create_namespaced_deployment(ns, deployment("big", replicas=6))
    status = assert_status(info.value, 422, "Invalid")
    denied = (
        f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "
        f"failed expression: {REPLICAS}"
    )
    assert status["message"] == f'deployments.apps "big" is forbidden: {denied}'
    assert status["details"] == {
        "name": "big",
        "group": "apps",
        "kind": "deployments",
        "causes": [{"message": denied}],
    }
    # an update is refused too; the object is as it was
    with raises_status(422, "Invalid"):
        apps.patch_namespaced_deployment("small", ns, {"spec": {"replicas": 9}})
    assert apps.read_namespaced_deployment("small", ns).spec.replicas == 3


def test_validation_reason_sets_the_code(
    policies: Policies, apps: client.AppsV1Api, ns: str
) -> None:
    policy = policies.policy(
        [DEPLOYMENTS],
        validations=[{"expression": REPLICAS, "reason": "Forbidden", "message": "too many"}],
    )
    binding = policies.bind(policy)
    wait_for(refused(dry_deployment(apps, ns, 6)), timeout=15, what="the policy enforced")
    with raises_status(403, "Forbidden") as status:
        apps.create_namespaced_deployment(ns, deployment("big", replicas=6))
    assert status["message"] == (
        f"deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy '{policy}' with "
        f"binding '{binding}' denied request: too many"
    )


def test_message_expression_words_the_refusal(
    policies: Policies, apps: client.AppsV1Api, ns: str
) -> None:
    policy = policies.policy(
        [DEPLOYMENTS],
        validations=[
            {
                "expression": REPLICAS,
                "message": "static message",
                "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 5'",
            }
        ],
    )
    policies.bind(policy)
    wait_for(refused(dry_deployment(apps, ns, 6)), timeout=15, what="the policy enforced")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, deployment("big", replicas=7))
    assert status["message"].endswith("denied request: replicas 7 > 5"), status["message"]


def test_warn_binding_warns_and_allows(
    policies: Policies, api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    policy = policies.policy([DEPLOYMENTS], validations=[{"expression": REPLICAS}])
    binding = policies.bind(policy, actions=("Warn",))
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    expected = (
        f"Validation failed for ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{binding}': failed expression: {REPLICAS}"
    )

    def warned() -> bool:
        code, warnings, _ = post(api, path + "?dryRun=All", deployment(unique("probe"), replicas=6))
        assert code == 201
        return expected in warnings

    wait_for(warned, timeout=15, what="the policy warns")
    code, warnings, body = post(api, path, deployment("big", replicas=6))
    assert code == 201, body
    assert warnings == [expected]
    code, warnings, _ = post(api, path, deployment("small", replicas=2))
    assert (code, warnings) == (201, [])
    assert apps.read_namespaced_deployment("big", ns).spec.replicas == 6


def test_match_conditions_exclude_requests(
    policies: Policies, apps: client.AppsV1Api, ns: str
) -> None:
    policy = policies.policy(
        [DEPLOYMENTS],
        matchConditions=[
            {
                "name": "not-exempt",
                "expression": "!has(object.metadata.labels) || "
                "!('exempt' in object.metadata.labels)",
            }
        ],
        validations=[{"expression": REPLICAS}],
    )
    policies.bind(policy)
    wait_for(refused(dry_deployment(apps, ns, 6)), timeout=15, what="the policy enforced")
    exempt = deployment("exempt", replicas=8)
    exempt["metadata"]["labels"] = {"exempt": "true"}
    apps.create_namespaced_deployment(ns, exempt)
    with raises_status(422, "Invalid"):
        apps.create_namespaced_deployment(ns, deployment("other", replicas=8))


def test_binding_namespace_selector(policies: Policies, core: client.CoreV1Api, ns: str) -> None:
    label = unique("enforced")
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["CREATE"]}],
        validations=[{"expression": "object.data.size() <= 1", "message": "one key at most"}],
    )
    policies.bind(policy, selector={"matchLabels": {"vap-test": label}})
    two = {"a": "1", "b": "2"}
    core.create_namespaced_config_map(ns, configmap("before", two))  # not selected yet
    core.patch_namespace(ns, {"metadata": {"labels": {"vap-test": label}}})
    probe = lambda: core.create_namespaced_config_map(  # noqa: E731
        ns, configmap(unique("probe"), two), dry_run="All"
    )
    wait_for(refused(probe), timeout=15, what="the policy enforced in the labelled namespace")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap("after", two))
    assert status["message"].startswith('configmaps "after" is forbidden: ')
    assert status["message"].endswith("denied request: one key at most")
    assert "group" not in status["details"]
    core.create_namespaced_config_map(ns, configmap("one", {"a": "1"}))


def test_a_policy_sees_the_kubernetes_cel_libraries(
    policies: Policies, core: client.CoreV1Api, ns: str
) -> None:
    # kube-apiserver's base environment: the global matches (Gateway API's safe-upgrades
    # policy), Go's regular expressions, the IP and CIDR libraries
    expression = (
        "!matches(object.metadata.name, '^blocked-') && "
        "!object.metadata.name.matches('^x(?i)Y') && "
        "(!('ip' in object.data) || isIP(object.data.ip) && "
        "cidr('10.0.0.0/8').containsIP(object.data.ip))"
    )
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["CREATE"]}],
        validations=[{"expression": expression, "message": "refused"}],
    )
    policies.bind(policy)
    probe = lambda: core.create_namespaced_config_map(  # noqa: E731
        ns, configmap(unique("blocked-probe")), dry_run="All"
    )
    wait_for(refused(probe), timeout=15, what="the policy enforced")
    core.create_namespaced_config_map(ns, configmap("fine", {"ip": "10.1.2.3"}))
    refusals = (("blocked-a", {"k": "v"}), ("xy", {"k": "v"}), ("outside", {"ip": "192.168.0.1"}))
    for name, data in refusals:
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_config_map(ns, configmap(name, data))
        assert status["message"].endswith("denied request: refused"), status["message"]


def test_update_rule_sees_the_old_object(
    policies: Policies, core: client.CoreV1Api, ns: str
) -> None:
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["UPDATE"]}],
        validations=[
            {
                "expression": "!has(oldObject.data.mode) || object.data.mode == oldObject.data.mode",
                "messageExpression": "'mode may not change from ' + oldObject.data.mode",
            }
        ],
    )
    policies.bind(policy)
    core.create_namespaced_config_map(ns, configmap("settings", {"mode": "fast"}))

    def probe() -> Any:
        return core.patch_namespaced_config_map(
            "settings", ns, {"data": {"mode": "slow"}}, dry_run="All"
        )

    wait_for(refused(probe), timeout=15, what="the policy enforced")
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_config_map("settings", ns, {"data": {"mode": "slow"}})
    assert status["message"].endswith("denied request: mode may not change from fast")
    core.patch_namespaced_config_map("settings", ns, {"data": {"other": "x"}})
    # a create is not an UPDATE: not refused
    core.create_namespaced_config_map(ns, configmap("fresh", {"mode": "slow"}))


def test_an_update_in_another_version_shows_the_old_object_in_that_version(
    policies: Policies, api: ApiClient, fresh_group: str, ns: str
) -> None:
    """A custom resource stored in one version and updated through another: kube-apiserver
    decodes the old object and converts it to the request's version, so admission sees
    ``object`` and ``oldObject`` in the same version."""
    group = fresh_group
    custom = gadget_stored_in_v1alpha1(api, group, ns)
    rules = [{"apiGroups": [group], "apiVersions": ["*"], "resources": ["gadgets"]}]
    policy = policies.policy(
        [{**rules[0], "operations": ["UPDATE"]}],
        validations=[
            {
                # size 99 is refused only to see the policy in force
                "expression": "object.spec.size != 99 && oldObject.apiVersion == object.apiVersion",
                "messageExpression": "'old ' + oldObject.apiVersion + ', new ' + object.apiVersion",
            }
        ],
    )
    policies.bind(policy)

    def probe() -> Any:
        return custom.patch_namespaced_custom_object(
            group, "v1alpha1", ns, "gadgets", "g", {"spec": {"size": 99}}, dry_run="All"
        )

    wait_for(refused(probe), timeout=15, what="the policy enforced")
    patched = custom.patch_namespaced_custom_object(
        group, "v1", ns, "gadgets", "g", {"spec": {"size": 3}}
    )
    assert (patched["apiVersion"], patched["spec"]) == (f"{group}/v1", {"size": 3})


def test_request_and_variables_are_declared(
    policies: Policies, core: client.CoreV1Api, ns: str
) -> None:
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["CREATE"]}],
        variables=[{"name": "wanted", "expression": "'team-' + namespaceObject.metadata.name"}],
        validations=[
            {
                "expression": "request.operation == 'CREATE' && request.namespace == "
                "namespaceObject.metadata.name && request.kind.kind == 'ConfigMap' && "
                "request.resource.resource == 'configmaps' && params == null && "
                "object.metadata.name != variables.wanted",
                "messageExpression": "'the name ' + variables.wanted + ' is reserved'",
            }
        ],
    )
    policies.bind(policy)
    reserved = f"team-{ns}"
    probe = lambda: core.create_namespaced_config_map(  # noqa: E731
        ns, configmap(reserved), dry_run="All"
    )
    wait_for(refused(probe), timeout=15, what="the policy enforced")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(reserved))
    assert status["message"].endswith(f"denied request: the name {reserved} is reserved")
    core.create_namespaced_config_map(ns, configmap("allowed"))


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_evaluation_error_follows_the_failure_policy(
    policies: Policies, core: client.CoreV1Api, ns: str, failure_policy: str
) -> None:
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["CREATE"]}],
        failurePolicy=failure_policy,
        validations=[
            {"expression": "object.metadata.name != 'probe'"},
            {"expression": "object.data.missing == 'x'"},
        ],
    )
    binding = policies.bind(policy)
    probe = lambda: core.create_namespaced_config_map(  # noqa: E731
        ns, configmap("probe"), dry_run="All"
    )
    wait_for(refused(probe), timeout=15, what="the policy enforced")
    if failure_policy == "Ignore":
        core.create_namespaced_config_map(ns, configmap("fine"))
        return
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap("fine"))
    assert status["message"] == (
        f"configmaps \"fine\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{binding}' denied request: expression 'object.data.missing == 'x'' resulted in "
        "error: no such key: missing"
    )


def test_params_from_a_configmap(policies: Policies, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, configmap("limits", {"max": "2"}))
    policy = policies.policy(
        [{**CONFIGMAPS, "operations": ["CREATE"]}],
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        validations=[
            {
                "expression": "object.data.size() <= int(params.data.max)",
                "messageExpression": "'at most ' + params.data.max + ' keys'",
            }
        ],
    )
    name = unique("binding") + ".example.com"
    policies.regs.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
                },
            },
        }
    )
    policies.bindings.append(name)
    three = {"a": "1", "b": "2", "c": "3"}
    probe = lambda: core.create_namespaced_config_map(  # noqa: E731
        ns, configmap(unique("probe"), three), dry_run="All"
    )
    wait_for(refused(probe), timeout=15, what="the policy enforced")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap("many", three))
    assert status["message"].endswith("denied request: at most 2 keys")
    core.create_namespaced_config_map(ns, configmap("few", {"a": "1"}))


def test_policies_do_not_apply_to_policies(
    policies: Policies, regs: client.AdmissionregistrationV1Api, api: ApiClient
) -> None:
    """kube-apiserver exempts the admission configuration kinds from admission."""
    rule = {
        "apiGroups": [GROUP],
        "apiVersions": ["v1"],
        "operations": ["*"],
        "resources": ["*"],
    }
    policy = policies.policy([rule], validations=[{"expression": "false"}])
    policies.bind(policy, selector={})
    other = policies.policy([DEPLOYMENTS], validations=[{"expression": REPLICAS}])
    regs.delete_validating_admission_policy(other)
    body = raw(api, "GET", f"{BASE}/validatingadmissionpolicies").json()
    names = [item["metadata"]["name"] for item in body["items"]]
    assert other not in names and policy in names


def test_a_put_that_creates_a_lease_is_admitted_as_a_create(
    policies: Policies, api: ApiClient, ns: str
) -> None:
    """kube-apiserver's update handler admits a PUT that creates the absent object (a
    Lease's strategy allows it) as a CREATE: a policy on CREATE only refuses it, and lets
    the next PUT, an UPDATE of what exists, through."""
    leases = {"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"], "resources": ["leases"]}
    policy = policies.policy(
        [{**leases, "operations": ["CREATE"]}],
        validations=[{"expression": "object.spec.holderIdentity == 'allowed'"}],
    )
    policies.bind(policy)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"

    def lease(name: str, holder: str, **meta: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, **meta}, "spec": {"holderIdentity": holder}}

    def probe() -> Any:
        return client.CoordinationV1Api(api).create_namespaced_lease(
            ns, lease(unique("probe"), "refused"), dry_run="All"
        )

    wait_for(refused(probe), timeout=15, what="the policy enforced")
    name = unique("lease")
    resp = raw(api, "PUT", f"{path}/{name}", body=lease(name, "refused"))
    assert_status(resp, 422, "Invalid")
    not_an_object = raw(api, "PUT", f"{path}/{name}", body=["not", "an", "object"])
    assert_status(not_an_object, 400, "BadRequest")
    assert raw(api, "GET", f"{path}/{name}").status == 404
    created = raw(api, "PUT", f"{path}/{name}", body=lease(name, "allowed"))
    assert created.status == 201, created.json()
    version = created.json()["metadata"]["resourceVersion"]
    updated = raw(
        api, "PUT", f"{path}/{name}", body=lease(name, "now-other", resourceVersion=version)
    )
    assert updated.status == 200, updated.json()
    assert updated.json()["spec"]["holderIdentity"] == "now-other"
