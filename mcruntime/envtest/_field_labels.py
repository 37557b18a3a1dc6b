"""Field labels: the names a field selector may use for a kind, and the values it compares.

kube-apiserver first passes each label of a field selector through the kind's field
label conversion function (which refuses unknown labels and renames old ones), then
matches the selector against the kind's *selectable fields*: a flat set its registry
computes from the object (``GetAttrs``), not the object's own values. For most kinds
the two agree, and the selector reads the object's paths. Pods differ
(`pkg/apis/core/v1/conversion.go`, `pkg/registry/core/pod/strategy.go`
``ToSelectableFields``):

- ``spec.host`` is the old name of ``spec.nodeName``;
- ``spec.hostNetwork`` is ``"false"`` when the pod does not set it;
- ``status.podIP`` is the pod's first IP (``status.podIP``, else ``status.podIPs[0]``);
- ``status.podIPs`` is accepted, but is no selectable field: it compares as ``""``, so
  ``status.podIPs=`` selects every pod and ``status.podIPs=<ip>`` none.

So do core/v1 Events (`pkg/registry/core/event/strategy.go` ``GetAttrs``): ``source`` is
``source.component``, else the ``reportingComponent`` (an Event written through
events.k8s.io/v1 has no ``source``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcruntime._selectors import FieldSelector

if TYPE_CHECKING:
    from mcruntime.envtest._registry import ServedResource

__all__ = ["converted", "selectable"]

#: old field labels the conversion function renames, per (group, kind)
_ALIASES: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("", "Pod"): {"spec.host": "spec.nodeName"},
}


def converted(res: ServedResource, fields: FieldSelector) -> FieldSelector:
    """``fields`` with the labels the kind's conversion function renames renamed."""
    aliases = _ALIASES.get((res.group, res.kind))
    if not aliases or not any(f in aliases for f, _, _ in fields.requirements):
        return fields
    return FieldSelector((aliases.get(f, f), op, v) for f, op, v in fields.requirements)


def selectable(res: ServedResource, obj: dict[str, Any]) -> Mapping[str, Any]:
    """What a field selector reads of ``obj``: the kind's selectable fields where its
    registry computes them (Pods, Events), else ``obj`` itself."""
    if res.group == "" and not res.custom:
        if res.kind == "Pod":
            return _pod_fields(obj)
        if res.kind == "Event":
            source = obj.get("source")
            component = source.get("component") if isinstance(source, dict) else None
            return {**obj, "source": component or obj.get("reportingComponent") or ""}
    return obj


def _pod_fields(pod: dict[str, Any]) -> dict[str, Any]:
    """kube-apiserver's ``ToSelectableFields`` of a Pod, as nested objects."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ips = status.get("podIPs")
    first = ips[0].get("ip") if isinstance(ips, list) and ips and isinstance(ips[0], dict) else ""
    return {
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "spec": {
            "nodeName": spec.get("nodeName"),
            "restartPolicy": spec.get("restartPolicy"),
            "schedulerName": spec.get("schedulerName"),
            "serviceAccountName": spec.get("serviceAccountName"),
            "hostNetwork": "true" if spec.get("hostNetwork") is True else "false",
        },
        "status": {
            "phase": status.get("phase"),
            "podIP": status.get("podIP") or first,
            "nominatedNodeName": status.get("nominatedNodeName"),
        },
    }
