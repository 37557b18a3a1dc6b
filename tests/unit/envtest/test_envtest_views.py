"""The autoscaling/v1 view of autoscaling/v2 HorizontalPodAutoscalers: nothing is lost either way."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.envtest._views import hpa_to_v1, hpa_to_v2

pytestmark = pytest.mark.timeout(10)


def resource(name: str, key: str, **value: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": name, key: value}}


V2: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "apps", "annotations": {"team": "a"}},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": 9,
        "metrics": [
            resource("cpu", "target", type="Utilization", averageUtilization=70),
            resource("memory", "target", type="AverageValue", averageValue="500Mi"),
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
    },
    "status": {
        "observedGeneration": 3,
        "currentReplicas": 4,
        "desiredReplicas": 5,
        "currentMetrics": [
            resource("cpu", "current", averageUtilization=91),
            resource("memory", "current", averageValue="420Mi"),
        ],
        "conditions": [{"type": "AbleToScale", "status": "True"}],
    },
}


def test_v1_shows_the_cpu_target_and_keeps_the_rest_in_annotations() -> None:
    v1 = hpa_to_v1(V2)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {
        "scaleTargetRef": V2["spec"]["scaleTargetRef"],
        "minReplicas": 2,
        "maxReplicas": 9,
        "targetCPUUtilizationPercentage": 70,
    }
    assert v1["status"] == {
        "observedGeneration": 3,
        "currentReplicas": 4,
        "desiredReplicas": 5,
        "currentCPUUtilizationPercentage": 91,
    }
    annotations = v1["metadata"]["annotations"]
    assert annotations["team"] == "a"
    assert {k.removeprefix("autoscaling.alpha.kubernetes.io/") for k in annotations} == {
        "team",
        "metrics",
        "behavior",
        "current-metrics",
        "conditions",
    }


def test_a_round_trip_through_v1_gives_back_the_v2_object() -> None:
    assert hpa_to_v2(hpa_to_v1(V2)) == V2


def test_a_v1_object_without_a_cpu_target_has_no_metrics_until_defaulted() -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "web",
            "annotations": {"autoscaling.alpha.kubernetes.io/metrics": "{"},
        },
        "spec": {"scaleTargetRef": V2["spec"]["scaleTargetRef"], "maxReplicas": 3},
    }
    v2 = hpa_to_v2(v1)
    assert "metrics" not in v2["spec"] and "status" not in v2
    assert (
        "annotations" not in v2["metadata"]
    )  # an unreadable one is dropped, as kube-apiserver does
