"""A Pod's status as kube-apiserver stores it. On create, the status it writes (the pod
strategy's ``PrepareForCreate``, ``pkg/registry/core/pod/strategy.go``, 1.31).

Whatever status the request carried is replaced by ``phase: Pending`` and the pod's
``qosClass`` (``pkg/apis/core/helper/qos``), which kubectl shows as "QoS Class" and
eviction and autoscaling read: ``BestEffort`` without any cpu or memory request or
limit, ``Guaranteed`` when every container limits both and the sums of the requests
equal the sums of the limits, ``Burstable`` otherwise (containers and init containers;
zero quantities count as none; requests defaulted from limits count). A pod with
scheduling gates also gets the ``PodScheduled`` condition ``SchedulingGated``.

A status written later (``/status``) is decoded as kube-apiserver decodes it. Its
``podIP`` and ``podIPs`` are one field in the internal type (``PodIPs``), so the two are
kept in step (``pkg/apis/core/v1/conversion.go``, ``Convert_v1_PodStatus_To_core_PodStatus``
and back): ``podIP`` alone becomes ``podIPs: [{ip: podIP}]``; ``podIPs`` alone gives
``podIP`` its first IP; when both are sent and differ, ``podIP`` wins and ``podIPs`` is
``[{ip: podIP}]`` (an older client that patched ``podIP`` only). ``hostIP`` and ``hostIPs``
are two fields there: neither fills the other, but ``hostIPs[0]`` must equal ``hostIP``
(``validateHostIPs``, ``pkg/apis/core/validation``) or the write is a 422. Both lists are
validated as ``validatePodIPs`` and ``validateHostIPs`` validate them (`_ips`): valid IPs,
one of each family at most, none twice.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._gofmt import go_string
from mcruntime.envtest._ips import HOST_IPS, POD_IPS, in_step
from mcruntime.envtest._quantity import parse
from mcruntime.envtest._status import StatusError

__all__ = ["check_pod_status", "created_pod_status", "decoded_pod_status"]

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


def decoded_pod_status(status: Any) -> Any:
    """``status``, written to a Pod, with ``podIP`` and ``podIPs`` in step (see above)."""
    if not isinstance(status, dict):
        return status
    return in_step(status, "podIP", "podIPs", "ip")


def _ip_of(entry: Any) -> Any:
    return entry.get("ip") if isinstance(entry, dict) else None


def check_pod_status(name: str, status: Any) -> None:
    """Refuse (422) a Pod's ``status`` whose pod IPs or host IPs are not valid, or whose
    first host IP is not its ``hostIP`` (``ValidatePodStatusUpdate``: ``validatePodIPs``,
    then ``validateHostIPs``)."""
    if not isinstance(status, dict):
        return
    causes = POD_IPS.causes(status.get("podIPs"))
    ips = status.get("hostIPs")
    if isinstance(ips, list) and ips:
        first = str(_ip_of(ips[0]) or "")
        if first != str(status.get("hostIP") or ""):
            at = "status.hostIPs[0].ip"
            why = f"Invalid value: {go_string(first)}: must be equal to `hostIP`"
            causes.append(("FieldValueInvalid", at, f"{at}: {why}"))
        causes += HOST_IPS.causes(ips)
    if causes:
        raise StatusError.invalid_causes("Pod", name, "", causes)


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
