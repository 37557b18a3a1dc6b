"""Defaults and checks of built-in kinds whose API server fills in or refuses fields.

kube-apiserver defaults a HorizontalPodAutoscaler's ``minReplicas`` (1), its
``metrics`` (80% CPU utilization) and the unset fields of a ``behavior`` it
is given, and a PriorityClass's ``preemptionPolicy``; it refuses a
PodDisruptionBudget with both ``minAvailable`` and ``maxUnavailable``, a user
PriorityClass above 1,000,000,000 or named ``system-...``, and a change of a
PriorityClass's value. Every cluster has the two system PriorityClasses.
Pods and the workload kinds get their scheme defaults from `_builtin_defaults`;
a Job's ``manualSelector`` and its selector's checks on update come from `_jobs`.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._builtin_defaults import default_builtin
from mcruntime.envtest._ephemeral import check_pod_create
from mcruntime.envtest._jobs import JOBS
from mcruntime.envtest._jobs import default_and_check as job_default_and_check
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._validation import validate
from mcruntime.envtest._views import cpu_metric

__all__ = ["PRIORITY_CLASSES", "SYSTEM_PRIORITY_CLASSES", "default_and_check"]

HPAS = ("autoscaling", "horizontalpodautoscalers")
_PODS = ("", "pods")
PDBS = ("policy", "poddisruptionbudgets")
PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
#: the highest value a PriorityClass not named ``system-...`` may have
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES: tuple[dict[str, Any], ...] = (
    {
        "metadata": {"name": "system-node-critical"},
        "value": 2_000_001_000,
        "description": "Used for system critical pods that must not be moved from their current node.",
    },
    {
        "metadata": {"name": "system-cluster-critical"},
        "value": 2_000_000_000,
        "description": "Used for system critical pods that must run in the cluster, but can be "
        "moved to another node if necessary.",
    },
)
_SYSTEM_VALUES = {pc["metadata"]["name"]: pc["value"] for pc in SYSTEM_PRIORITY_CLASSES}
_DEFAULT_CPU_UTILIZATION = 80
_SCALE_UP = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_SCALE_DOWN = {
    "stabilizationWindowSeconds": 300,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def default_and_check(
    key: tuple[str, str], obj: dict[str, Any], old: dict[str, Any] | None
) -> None:
    """Fill in ``obj``'s defaults and refuse it (422) where kube-apiserver would; ``old`` on update."""
    default_builtin(key, obj)
    validate(key, obj, old)
    if key == HPAS:
        _hpa_defaults(obj)
    elif key == PDBS:
        spec = obj.get("spec") or {}
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            raise _invalid(
                "PodDisruptionBudget",
                "policy",
                obj,
                "FieldValueInvalid",
                "spec",
                "minAvailable and maxUnavailable cannot be both set",
            )
    elif key == PRIORITY_CLASSES:
        _priority_class(obj, old)
    elif key == JOBS:
        job_default_and_check(obj, old)
    elif key == _PODS and old is None:
        check_pod_create(obj)


def _hpa_defaults(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec = obj["spec"] = dict(spec)
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [cpu_metric("target", _DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        spec["behavior"] = {
            "scaleUp": _rules(behavior.get("scaleUp"), _SCALE_UP),
            "scaleDown": _rules(behavior.get("scaleDown"), _SCALE_DOWN),
        }


def _rules(given: Any, default: dict[str, Any]) -> dict[str, Any]:
    """A scaling direction's rules with kube-apiserver's defaults where ``given`` has none."""
    rules = dict(given) if isinstance(given, dict) else {}
    for field, value in default.items():
        if rules.get(field) is None:
            rules[field] = value
    return rules


def _priority_class(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    name, value = obj["metadata"].get("name", ""), obj.get("value")
    field, why = "", ""
    if name.startswith("system-"):
        if _SYSTEM_VALUES.get(name) != value:
            field = "metadata.name"
            why = "priority class names with 'system-' prefix are reserved for system use only"
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        field = "value"
        why = f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
    if not why and old is not None and old.get("value") != value:
        field, why = "value", "may not be changed in an update."
    if why:
        raise _invalid("PriorityClass", "scheduling.k8s.io", obj, "FieldValueForbidden", field, why)


def _invalid(
    kind: str, group: str, obj: dict[str, Any], reason: str, field: str, why: str
) -> StatusError:
    prefix = "Forbidden" if reason == "FieldValueForbidden" else "Invalid value"
    return StatusError.invalid_causes(
        kind, obj["metadata"].get("name", ""), group, [(reason, field, f"{field}: {prefix}: {why}")]
    )
