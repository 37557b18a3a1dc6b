"""The ``pods/binding`` subresource: a scheduler assigns a pod to a node.

A custom scheduler, or a controller that places pods itself, does not update a
pod's ``spec.nodeName`` (the field is immutable once set, and an update may not
set it either): it POSTs a ``v1`` ``Binding`` to
``/api/v1/namespaces/{ns}/pods/{name}/binding``. envtest answers as
kube-apiserver's ``BindingREST`` does (``pkg/registry/core/pod/storage/storage.go``,
1.31):

- the Binding's name must be the URL's (400), its ``target`` must name a node
  (``target.kind`` empty or ``Node``, ``target.name`` set: kube-apiserver
  answers these with a 500 without reason, its validation errors unwrapped);
- the Binding's ``uid`` and ``resourceVersion``, when set, are preconditions
  on the pod (409);
- a pod being deleted, one already on a node, or one with scheduling gates is
  a 409 Conflict on ``pods/binding``;
- otherwise the pod gets ``spec.nodeName``, the Binding's annotations, and the
  ``PodScheduled`` condition set to ``True`` (its transition time moves only
  when its status changes, `podutil.UpdatePodCondition`), written straight to
  storage as kube-apiserver writes it: no field manager entry, no admission
  of the pod itself. The answer is a ``Status`` ``Success`` (201).

The binding is admitted as a CREATE of ``pods/binding`` (kind ``Binding``), so
admission webhooks registered for it see it.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._bodies import typed_body
from mcruntime.envtest._conditions import update_pod_condition
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore

__all__ = ["BINDING_KIND", "bind", "binding_body", "check_binding"]

#: the kind of the ``binding`` subresource's body, as discovery and admission webhooks name it
BINDING_KIND: dict[str, str] = {"group": "", "version": "v1", "kind": "Binding"}
_PODS = ("", "pods")
_CONFLICT_ON = "pods/binding"
#: the condition a bound pod gets (its reason and message, if any, go)
_SCHEDULED: dict[str, Any] = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}


def binding_body(ns: str, body: Any) -> dict[str, Any]:
    """The request's Binding, checked as kube-apiserver decodes it (400 for another kind or
    version, or another namespace than the request's); its namespace is the request's."""
    return typed_body(ns, body, "Binding", ("v1",))


def check_binding(name: str, binding: dict[str, Any]) -> dict[str, Any]:
    """``binding`` (after the mutating webhooks) if it binds pod ``name`` to a node, as
    ``BindingREST.Create`` checks it; else its error."""
    meta = binding.get("metadata") or {}
    if meta.get("name") != name:
        raise StatusError.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if not isinstance(target, dict):
        raise StatusError.bad_request("target must be a JSON object")
    errors = []
    if target.get("kind") and target["kind"] != "Node":
        errors.append(
            f'target.kind: Unsupported value: "{target["kind"]}": supported values: '
            '"Node", "<empty>"'
        )
    if not target.get("name"):
        errors.append("target.name: Required value")
    if errors:  # ValidatePodBinding's errors reach the client unwrapped: a 500
        raise StatusError(500, "", errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return binding


def bind(store: ObjectStore, ns: str, binding: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """Assign the pod ``binding`` names to its target node (a `binding_body`); the
    ``Status`` to answer with (201), or a StatusError."""
    meta = binding["metadata"]
    name = meta["name"]
    pod = store.get(_PODS, ns, name)
    if pod is None:
        raise StatusError.not_found("pods", name, "", "pods")
    pod_meta, spec = pod["metadata"], pod.get("spec") or {}
    for field in ("uid", "resourceVersion"):
        want = meta.get(field)
        if want and want != pod_meta[field]:
            label = "UID" if field == "uid" else "ResourceVersion"
            raise StatusError.conflict(
                "pods",
                name,
                "",
                "pods",
                f"Precondition failed: {label} in precondition: {want}, "
                f"{label} in object meta: {pod_meta[field]}",
            )
    why = ""
    if pod_meta.get("deletionTimestamp"):
        why = f"pod {name} is being deleted, cannot be assigned to a host"
    elif spec.get("nodeName"):
        why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
    elif spec.get("schedulingGates"):
        why = f"pod {name} has non-empty .spec.schedulingGates"
    if why:
        raise StatusError.conflict(_CONFLICT_ON, name, "", _CONFLICT_ON, why)
    if not dry_run:
        new_meta = dict(pod_meta)
        annotations = {**(pod_meta.get("annotations") or {}), **(meta.get("annotations") or {})}
        if annotations:  # an empty map is not stored (omitempty)
            new_meta["annotations"] = annotations
        status = dict(pod.get("status") or {})
        status["conditions"] = update_pod_condition(status.get("conditions") or [], _SCHEDULED)
        node = (binding.get("target") or {})["name"]
        new = {**pod, "metadata": new_meta, "spec": {**spec, "nodeName": node}, "status": status}
        store.commit(_PODS, "MODIFIED", new, pod)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
