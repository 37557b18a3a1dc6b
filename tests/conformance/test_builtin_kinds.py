"""Built-in kinds that operators own besides their workloads: HorizontalPodAutoscalers (v2, and
v1 converted to and from it), PodDisruptionBudgets, PriorityClasses, ResourceQuotas and
LimitRanges, with the defaults and checks kube-apiserver applies to them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiClient

from ._support import raw, unique

pytestmark = pytest.mark.timeout(30)

HPA_V1 = "/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers"
HPA_V2 = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def created(api: ApiClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = raw(api, "POST", path, body=body)
    assert resp.status == 201, resp.data
    return resp.json()  # type: ignore[no-any-return]


def got(api: ApiClient, path: str) -> dict[str, Any]:
    resp = raw(api, "GET", path)
    assert resp.status == 200, resp.data
    return resp.json()  # type: ignore[no-any-return]


def cpu(utilization: int) -> dict[str, Any]:
    target = {"type": "Utilization", "averageUtilization": utilization}
    return {"type": "Resource", "resource": {"name": "cpu", "target": target}}


def test_an_hpa_gets_kube_apiservers_defaults(api: ApiClient, ns: str) -> None:
    hpa = created(
        api,
        HPA_V2.format(ns=ns),
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": unique("hpa")},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 4, "behavior": {"scaleDown": {}}},
        },
    )
    spec = hpa["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [cpu(80)]
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert spec["behavior"]["scaleUp"]["selectPolicy"] == "Max"


def test_a_v1_hpa_is_the_v2_one_converted(api: ApiClient, ns: str) -> None:
    name = unique("hpa")
    v1 = created(
        api,
        HPA_V1.format(ns=ns),
        {
            "apiVersion": "autoscaling/v1",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {
                "scaleTargetRef": TARGET,
                "maxReplicas": 3,
                "targetCPUUtilizationPercentage": 50,
            },
        },
    )
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    v2 = got(api, f"{HPA_V2.format(ns=ns)}/{name}")
    assert v2["spec"]["metrics"] == [cpu(50)]
    assert v2["spec"]["minReplicas"] == 1


def test_what_v1_cannot_hold_survives_a_v1_update(api: ApiClient, ns: str) -> None:
    name = unique("hpa")
    memory = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}},
    }
    created(
        api,
        HPA_V2.format(ns=ns),
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": [cpu(70), memory]},
        },
    )
    v1 = got(api, f"{HPA_V1.format(ns=ns)}/{name}")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70
    assert "autoscaling.alpha.kubernetes.io/metrics" in v1["metadata"]["annotations"]
    v1["spec"]["maxReplicas"] = 6
    resp = raw(api, "PUT", f"{HPA_V1.format(ns=ns)}/{name}", body=v1)
    assert resp.status == 200, resp.data
    v2 = got(api, f"{HPA_V2.format(ns=ns)}/{name}")
    assert v2["spec"]["maxReplicas"] == 6
    assert v2["spec"]["metrics"] == [cpu(70), memory]
    assert "autoscaling.alpha.kubernetes.io/metrics" not in (
        v2["metadata"].get("annotations") or {}
    )


def test_a_pdb_takes_min_available_or_max_unavailable(api: ApiClient, ns: str) -> None:
    path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    selector = {"matchLabels": {"app": "web"}}

    def pdb(**spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": unique("pdb")},
            "spec": {"selector": selector, **spec},
        }

    made = created(api, path, pdb(minAvailable="50%"))
    assert made["spec"]["minAvailable"] == "50%"
    both = raw(api, "POST", path, body=pdb(minAvailable=1, maxUnavailable=1))
    assert both.status == 422, both.data
    assert "minAvailable and maxUnavailable cannot be both set" in both.json()["message"]


def test_every_cluster_has_the_system_priority_classes(api: ApiClient) -> None:
    for name, value in (
        ("system-node-critical", 2000001000),
        ("system-cluster-critical", 2000000000),
    ):
        assert got(api, f"{PRIORITY_CLASSES}/{name}")["value"] == value


def test_a_priority_class_is_checked_and_defaulted(api: ApiClient) -> None:
    name = unique("conformance-pc")

    def pc(value: int, pc_name: str = name) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc_name},
            "value": value,
        }

    made = created(api, PRIORITY_CLASSES, pc(1000))
    try:
        assert made["preemptionPolicy"] == "PreemptLowerPriority"
        changed = raw(api, "PUT", f"{PRIORITY_CLASSES}/{name}", body={**made, "value": 2000})
        assert changed.status == 422, changed.data
        too_high = raw(
            api, "POST", PRIORITY_CLASSES, body=pc(1_000_000_001, unique("conformance-pc"))
        )
        assert too_high.status == 422, too_high.data
        assert "maximum allowed value of a user defined priority" in too_high.json()["message"]
        reserved = raw(api, "POST", PRIORITY_CLASSES, body=pc(5, unique("system-conformance")))
        assert reserved.status == 422, reserved.data
    finally:
        raw(api, "DELETE", f"{PRIORITY_CLASSES}/{name}")


def test_quotas_and_limit_ranges_are_stored(api: ApiClient, ns: str) -> None:
    quota = created(
        api,
        f"/api/v1/namespaces/{ns}/resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "10"}},
        },
    )
    assert quota["spec"]["hard"] == {"pods": "10"}
    limits = {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}
    created(
        api,
        f"/api/v1/namespaces/{ns}/limitranges",
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": limits},
    )
    assert got(api, f"/api/v1/namespaces/{ns}/limitranges/l")["spec"]["limits"][0]["default"] == {
        "cpu": "500m"
    }
