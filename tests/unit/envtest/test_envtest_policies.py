"""ValidatingAdmissionPolicies (`_policies`) without the CEL library, and what requests pay
for them when no binding exists."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import APIServer, _cel, _policies

GROUP = "admissionregistration.k8s.io/v1"
POLICY = {
    "apiVersion": GROUP,
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "replicas.example.com"},
    "spec": {
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["configmaps"],
                }
            ]
        },
        "validations": [{"expression": "object.data.size() <= 1"}],
    },
}
BINDING = {
    "apiVersion": GROUP,
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "replicas-binding.example.com"},
    "spec": {"policyName": "replicas.example.com", "validationActions": ["Deny"]},
}


def configmap(name: str, keys: int) -> dict[str, Any]:
    data = {f"k{i}": "v" for i in range(keys)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


@pytest.fixture
def server() -> Iterator[APIServer]:
    with APIServer("policies") as s:
        yield s


@pytest.fixture
def cluster(server: APIServer) -> Iterator[mcruntime.Cluster]:
    c = mcruntime.Cluster.from_kubeconfig(server.kubeconfig())
    try:
        yield c
    finally:
        c.stop()


def test_without_a_binding_requests_do_not_go_through_admission(
    server: APIServer, cluster: mcruntime.Cluster
) -> None:
    admission = server._api.admission
    configmaps = server._api.registry.get("", "v1", "configmaps")
    assert configmaps is not None
    cluster.client.create(POLICY)
    assert not admission.wanted(configmaps)  # a policy alone binds nothing
    cluster.client.create(BINDING)
    assert admission.wanted(configmaps)
    policies = server._api.registry.get(
        "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"
    )
    assert policies is not None and not admission.wanted(policies)  # exempt, as kube's


def test_without_the_library_a_policy_is_accepted_and_not_enforced(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    cluster: mcruntime.Cluster,
) -> None:
    monkeypatch.setattr(_cel, "_library", lambda: None)
    monkeypatch.setattr(_cel, "_warned", set())
    bad = {**POLICY, "spec": {**POLICY["spec"], "validations": [{"expression": "object.data <"}]}}
    with caplog.at_level(logging.WARNING, logger="mcruntime.envtest"):
        cluster.client.create(bad)
        cluster.client.create(BINDING)
        cluster.client.create(configmap("big", 3))
        cluster.client.create(configmap("bigger", 4))
    warnings = [r.getMessage() for r in caplog.records if "not enforced" in r.getMessage()]
    assert len(warnings) == 1
    assert "replicas.example.com" in warnings[0] and "mcruntime[cel]" in warnings[0]


def test_policy_status_is_written_once_per_generation(cluster: mcruntime.Cluster) -> None:
    pytest.importorskip("cel")
    created = cluster.client.create(POLICY)
    assert created["metadata"]["generation"] == 1
    got = cluster.uncached_client.get(f"{GROUP}/ValidatingAdmissionPolicy", "replicas.example.com")
    assert got["status"] == {"observedGeneration": 1, "typeChecking": {}}
    managers = [(m["manager"], m.get("subresource")) for m in got["metadata"]["managedFields"]]
    assert (_policies.STATUS_MANAGER, "status") in managers
