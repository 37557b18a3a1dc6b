"""The status kube-apiserver writes into a Pod being created (the pod strategy's
``PrepareForCreate``, ``pkg/registry/core/pod/strategy.go``, 1.31).

Whatever status the request carried is replaced by ``phase: Pending`` and the pod's
``qosClass`` (``pkg/apis/core/helper/qos``), which kubectl shows as "QoS Class" and
eviction and autoscaling read: ``BestEffort`` without any cpu or memory request or
limit, ``Guaranteed`` when every container limits both and the sums of the requests
equal the sums of the limits, ``Burstable`` otherwise (containers and init containers;
zero quantities count as none; requests defaulted from limits count). A pod with
scheduling gates also gets the ``PodScheduled`` condition ``SchedulingGated``.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._quantity import parse

__all__ = ["created_pod_status"]

_COMPUTE = ("cpu", "memory")


def created_pod_status(spec: Any) -> dict[str, Any]:
    """The status of a pod created with ``spec`` (defaulted)."""
    status: dict[str, Any] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    if isinstance(spec, dict) and spec.get("schedulingGates"):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": None,
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ]
    return status


def _qos_class(spec: Any) -> str:
    """``GetPodQOS`` without pod-level resources (not in 1.31)."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    containers = []
    if isinstance(spec, dict):
        for field in ("containers", "initContainers"):
            containers += [c for c in spec.get(field) or () if isinstance(c, dict)]
    for c in containers:
        resources = c.get("resources")
        if not isinstance(resources, dict):
            resources = {}
        for kind, into in (("requests", requests), ("limits", limits)):
            found = _compute(resources.get(kind))
            for name, nanos in found.items():
                into[name] = into.get(name, 0) + nanos
            if kind == "limits" and set(found) != set(_COMPUTE):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _compute(values: Any) -> dict[str, int]:
    """The cpu and memory of a requests or limits map, in nanos, zeros left out."""
    out: dict[str, int] = {}
    if isinstance(values, dict):
        for name in _COMPUTE:
            parsed = parse(values.get(name)) if name in values else None
            if parsed is not None and parsed[0] > 0:
                out[name] = parsed[0]
    return out
