"""The ``/scale`` subresource: an ``autoscaling/v1`` ``Scale`` view of a replicated object.

Deployments, ReplicaSets and StatefulSets have it, as in kube-apiserver, and
so does every CRD version that declares ``subresources.scale``
(``specReplicasPath``, ``statusReplicasPath``, optional ``labelSelectorPath``).
Reading returns the Scale; writing (PUT, or a patch of the Scale) sets only the
parent's desired replicas, through the parent's ordinary update.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._jsonpath import JSONPathError, find
from mcruntime.envtest._registry import ServedResource
from mcruntime.envtest._status import StatusError

__all__ = ["BUILTIN_SCALE", "SCALE_VERBS", "to_scale", "with_replicas", "requested_replicas"]

SCALE_VERBS = ("get", "patch", "update")
BUILTIN_SCALE: dict[str, Any] = {
    "specReplicasPath": ".spec.replicas",
    "statusReplicasPath": ".status.replicas",
}


def _selector_string(sel: Any) -> str:
    """A LabelSelector as the string form Scale.status.selector carries."""
    if not isinstance(sel, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or ():
        if not isinstance(e, dict):
            continue
        key, op = e.get("key", ""), e.get("operator", "")
        values = ",".join(sorted(str(v) for v in e.get("values") or ()))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _first(obj: dict[str, Any], path: str | None) -> Any:
    if not path:
        return None
    try:
        values = find(obj, path)
    except JSONPathError:
        return None
    return values[0] if values else None


def to_scale(res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale of ``obj``."""
    assert res.scale is not None
    meta = obj["metadata"]
    replicas = _first(obj, res.scale.get("specReplicasPath"))
    current = _first(obj, res.scale.get("statusReplicasPath"))
    if res.custom:
        selector = _first(obj, res.scale.get("labelSelectorPath"))
        selector = selector if isinstance(selector, str) else ""
    else:
        selector = _selector_string((obj.get("spec") or {}).get("selector"))
    status: dict[str, Any] = {"replicas": current if isinstance(current, int) else 0}
    if selector:
        status["selector"] = selector
    out_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": out_meta,
        "spec": {"replicas": replicas if isinstance(replicas, int) else 0},
        "status": status,
    }


def requested_replicas(res: ServedResource, name: str, scale: Any) -> int:
    """``spec.replicas`` of a Scale sent by a client (422 unless a non-negative integer)."""
    if not isinstance(scale, dict):
        raise StatusError.bad_request("the body of the request must be a JSON object")
    kind = scale.get("kind")
    if kind not in (None, "", "Scale"):
        raise StatusError.bad_request(
            f"the kind of the provided object ({kind}) does not match the resource (Scale)"
        )
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise StatusError.invalid(
            "Scale",
            name,
            "autoscaling",
            "spec.replicas",
            f"Invalid value: {replicas!r}: must be greater than or equal to 0",
        )
    return replicas


def with_replicas(res: ServedResource, obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    """A copy of ``obj`` whose desired replicas (at ``specReplicasPath``) are ``replicas``."""
    assert res.scale is not None
    path = str(res.scale.get("specReplicasPath") or ".spec.replicas").lstrip(".").split(".")
    new = dict(obj)
    node = new
    for key in path[:-1]:
        child = node.get(key)
        child = dict(child) if isinstance(child, dict) else {}
        node[key] = child
        node = child
    node[path[-1]] = replicas
    return new
