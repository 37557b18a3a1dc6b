"""The ``pods/ephemeralcontainers`` subresource: how ``kubectl debug`` adds a container to
a running pod.

A pod's ``spec.ephemeralContainers`` cannot be set when it is created (422, ``cannot be
set on create``) nor changed by an update of the pod: only through this subresource
(``GET``, ``PUT``, ``PATCH``), whose write keeps everything of the stored pod but its
ephemeral containers, as kube-apiserver's ``EphemeralContainersREST`` does
(``pkg/registry/core/pod/strategy.go``: ``dropNonEphemeralContainerUpdates``). The
write is checked as ``ValidatePodEphemeralContainersUpdate`` and
``validateEphemeralContainers`` check it (``pkg/apis/core/validation/validation.go``,
1.31): an ephemeral container may be added, never removed or changed; it needs a name
no other container of the pod has and an image; its ``targetContainerName`` must be one
of the pod's containers; it may not have ports, probes, a lifecycle or resources. envtest
runs no kubelet: the container is added to the spec and nothing starts it.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._status import StatusError

__all__ = ["EPHEMERAL", "check_pod_create", "ephemeral_update"]

EPHEMERAL = "ephemeralcontainers"
_PATH = "spec.ephemeralContainers"
#: what an ephemeral container may not have (``validateEphemeralContainers``)
_NOT_ALLOWED = (
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resources",
    "resizePolicy",
    "restartPolicy",
)
_Cause = tuple[str, str, str]


def _names(spec: dict[str, Any], field: str) -> list[str]:
    items = spec.get(field)
    if not isinstance(items, list):
        return []
    return [str(c.get("name") or "") for c in items if isinstance(c, dict)]


def check_pod_create(pod: dict[str, Any]) -> None:
    """``ValidatePodCreate``: a pod is not created with ephemeral containers (422)."""
    spec = pod.get("spec")
    if isinstance(spec, dict) and spec.get("ephemeralContainers"):
        name = str(pod["metadata"].get("name") or "")
        raise StatusError.invalid_causes(
            "Pod",
            name,
            "",
            [("FieldValueForbidden", _PATH, f"{_PATH}: Forbidden: cannot be set on create")],
        )


def _new_container_causes(
    spec: dict[str, Any], containers: list[Any], old_names: set[str]
) -> list[_Cause]:
    """What ``validateEphemeralContainers`` says of the ephemeral containers not in
    ``old_names`` (the ones this write adds)."""
    causes: list[_Cause] = []
    pod_containers = set(_names(spec, "containers"))
    taken = pod_containers | set(_names(spec, "initContainers"))
    for i, c in enumerate(containers):
        at = f"{_PATH}[{i}]"
        if not isinstance(c, dict):
            causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: must be an object"))
            continue
        name = str(c.get("name") or "")
        if name in old_names:
            taken.add(name)
            continue
        if not name:
            causes.append(("FieldValueRequired", f"{at}.name", f"{at}.name: Required value"))
        elif name in taken:
            causes.append(
                ("FieldValueDuplicate", f"{at}.name", f'{at}.name: Duplicate value: "{name}"')
            )
        taken.add(name)
        if not c.get("image"):
            causes.append(("FieldValueRequired", f"{at}.image", f"{at}.image: Required value"))
        target = c.get("targetContainerName")
        if target and target not in pod_containers:
            causes.append(
                (
                    "FieldValueNotFound",
                    f"{at}.targetContainerName",
                    f'{at}.targetContainerName: Not found: "{target}"',
                )
            )
        for field in _NOT_ALLOWED:
            if c.get(field):
                causes.append(
                    (
                        "FieldValueForbidden",
                        f"{at}.{field}",
                        f"{at}.{field}: Forbidden: cannot be set for an Ephemeral Container",
                    )
                )
    return causes


def ephemeral_update(name: str, old: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The pod stored after a write of ``body`` to ``pods/{name}/ephemeralcontainers``:
    ``old`` with ``body``'s ephemeral containers (422 for what the rules above refuse)."""
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    assert isinstance(old_spec, dict)
    sent = (body.get("spec") or {}).get("ephemeralContainers") if isinstance(body, dict) else None
    containers = list(sent) if isinstance(sent, list) else []
    causes: list[_Cause] = []
    if "kubernetes.io/config.mirror" in (old["metadata"].get("annotations") or {}):
        causes.append(
            (
                "FieldValueForbidden",
                "",
                ": Forbidden: static pods do not support ephemeral containers",
            )
        )
        raise StatusError.invalid_causes("Pod", name, "", causes)
    new_by_name = {str(c.get("name") or ""): c for c in containers if isinstance(c, dict)}
    previous = [c for c in old_spec.get("ephemeralContainers") or () if isinstance(c, dict)]
    for c in previous:
        cname = str(c.get("name") or "")
        if cname not in new_by_name:
            why = f'existing ephemeral containers "{cname}" may not be removed\n'
        elif new_by_name[cname] != c:
            why = f'existing ephemeral containers "{cname}" may not be changed\n'
        else:
            continue
        causes.append(("FieldValueForbidden", _PATH, f"{_PATH}: Forbidden: {why}"))
    causes += _new_container_causes(
        old_spec, containers, {str(c.get("name") or "") for c in previous}
    )
    if causes:
        raise StatusError.invalid_causes("Pod", name, "", causes)
    spec = dict(old_spec)
    if containers:
        spec["ephemeralContainers"] = containers
    else:
        spec.pop("ephemeralContainers", None)
    return {**old, "spec": spec}
