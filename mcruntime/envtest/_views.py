"""Resources that are views of another resource's stored objects, converted both ways.

As kube-apiserver stores one version of a resource and converts the others,
envtest keeps ``events.k8s.io/v1`` Events in their core/v1 form and
``autoscaling/v1`` HorizontalPodAutoscalers in their ``autoscaling/v2`` form.
A view's reads, lists and watches convert each object on the way out; its
writes convert on the way in and are made on the stored resource.

The v1 HorizontalPodAutoscaler has one metric, ``targetCPUUtilizationPercentage``;
as kube-apiserver does, the conversion keeps what v1 cannot hold (other
metrics, the ``behavior``, current metrics and conditions) in annotations
``autoscaling.alpha.kubernetes.io/...`` so that a v1 client's update loses
nothing. (envtest writes their values in the v2 form.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcruntime import _json
from mcruntime.envtest._events import check_events_v1, to_core_event, to_events_v1
from mcruntime.envtest._registry import ServedResource

__all__ = ["View", "cpu_metric", "view_of"]

Obj = dict[str, Any]
_ALPHA = "autoscaling.alpha.kubernetes.io/"
#: v2 fields that v1 keeps in annotations: (where in v2, annotation)
_KEPT = (
    (("spec", "metrics"), _ALPHA + "metrics"),
    (("spec", "behavior"), _ALPHA + "behavior"),
    (("status", "currentMetrics"), _ALPHA + "current-metrics"),
    (("status", "conditions"), _ALPHA + "conditions"),
)
_SCALAR_SPEC = ("scaleTargetRef", "minReplicas", "maxReplicas")
_SCALAR_STATUS = ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")


@dataclass(frozen=True, slots=True)
class View:
    """How a view's objects map to the stored ones."""

    #: (group, version, plural) of the stored resource
    storage: tuple[str, str, str]
    to_view: Callable[[Obj], Obj]
    to_storage: Callable[[Obj], Obj]
    #: refuses, in its stored form, an object the view creates (old None) or updates (old)
    check: Callable[[Obj, Obj | None], None] | None = None


def cpu_metric(key: str, utilization: int) -> Obj:
    """A v2 metric of CPU utilization: a target (``key`` "target", in the spec) or a current
    value (``key`` "current", in the status)."""
    value: Obj = {"averageUtilization": utilization}
    if key == "target":
        value = {"type": "Utilization", **value}
    return {"type": "Resource", "resource": {"name": "cpu", key: value}}


def _split_cpu(metrics: Any, key: str) -> tuple[int | None, list[Any]]:
    """The CPU utilization among v2 ``metrics`` (``key`` as for `cpu_metric`) and the others."""
    rest = list(metrics or ())
    for i, m in enumerate(rest):
        if not isinstance(m, dict) or m.get("type") != "Resource":
            continue
        source = m.get("resource") or {}
        value = source.get(key) or {}
        if source.get("name") == "cpu" and "averageUtilization" in value:
            del rest[i]
            return value["averageUtilization"], rest
    return None, rest


def hpa_to_v1(obj: Obj) -> Obj:
    """A stored (autoscaling/v2) HorizontalPodAutoscaler as autoscaling/v1 shows it."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out: Obj = {**obj, "apiVersion": "autoscaling/v1"}
    meta = dict(obj.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    v1_spec = {k: spec[k] for k in _SCALAR_SPEC if k in spec}
    cpu, metrics = _split_cpu(spec.get("metrics"), "target")
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu
    v1_status = {k: status[k] for k in _SCALAR_STATUS if k in status}
    cpu_now, current = _split_cpu(status.get("currentMetrics"), "current")
    if cpu_now is not None:
        v1_status["currentCPUUtilizationPercentage"] = cpu_now
    rest = {
        ("spec", "metrics"): metrics,
        ("spec", "behavior"): spec.get("behavior"),
        ("status", "currentMetrics"): current,
        ("status", "conditions"): status.get("conditions"),
    }
    for where, annotation in _KEPT:
        if rest[where]:
            annotations[annotation] = _json.dumps(rest[where]).decode()
    if annotations:
        meta["annotations"] = annotations
    out["metadata"] = meta
    out["spec"] = v1_spec
    if "status" in obj:
        out["status"] = v1_status
    return out


def hpa_to_v2(obj: Obj) -> Obj:
    """An autoscaling/v1 HorizontalPodAutoscaler in the stored (autoscaling/v2) form."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = dict(obj.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    kept: dict[tuple[str, str], Any] = {}
    for where, annotation in _KEPT:
        if annotation in annotations:
            # as kube-apiserver: a value it cannot read is dropped
            with contextlib.suppress(_json.JSONDecodeError):
                kept[where] = _json.loads(annotations.pop(annotation))
    v2_spec = {k: spec[k] for k in _SCALAR_SPEC if k in spec}
    cpu = spec.get("targetCPUUtilizationPercentage")
    metrics = [cpu_metric("target", cpu)] if cpu is not None else []
    metrics += kept.get(("spec", "metrics")) or []
    if metrics:
        v2_spec["metrics"] = metrics
    if kept.get(("spec", "behavior")):
        v2_spec["behavior"] = kept[("spec", "behavior")]
    v2_status = {k: status[k] for k in _SCALAR_STATUS if k in status}
    cpu_now = status.get("currentCPUUtilizationPercentage")
    current = [cpu_metric("current", cpu_now)] if cpu_now is not None else []
    current += kept.get(("status", "currentMetrics")) or []
    if current:
        v2_status["currentMetrics"] = current
    if kept.get(("status", "conditions")):
        v2_status["conditions"] = kept[("status", "conditions")]
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out: Obj = {**obj, "apiVersion": "autoscaling/v2", "metadata": meta, "spec": v2_spec}
    if "status" in obj:
        out["status"] = v2_status
    return out


_VIEWS = {
    ("events.k8s.io", "v1", "events"): View(
        ("", "v1", "events"), to_events_v1, to_core_event, check_events_v1
    ),
    ("autoscaling", "v1", "horizontalpodautoscalers"): View(
        ("autoscaling", "v2", "horizontalpodautoscalers"), hpa_to_v1, hpa_to_v2
    ),
}


def view_of(res: ServedResource) -> View | None:
    """How ``res`` maps to its stored objects, when it is a view of another resource's."""
    return _VIEWS.get((res.group, res.version, res.plural)) if res.storage is not None else None
