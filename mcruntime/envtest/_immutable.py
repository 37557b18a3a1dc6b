"""Fields that an update may not change, refused as kube-apiserver's validation refuses
them (``pkg/apis/core/validation``, ``pkg/apis/apps/validation`` and the apps
registries' ``ValidateUpdate``, 1.31):

- a ConfigMap or Secret marked ``immutable: true`` keeps its ``data`` (and
  ``binaryData``) and stays immutable (``field is immutable when `immutable` is set``);
  a Secret's ``type`` never changes (``field is immutable``);
- the ``spec.selector`` of a Deployment, ReplicaSet or DaemonSet (``apps/v1``) never
  changes (``field is immutable``): the classic failure of a chart or controller that
  adds a label to a workload's selector;
- a PersistentVolumeClaim's spec is fixed but for ``volumeName`` (set once),
  ``storageClassName`` (set from none) and, once bound, the storage it requests, which
  may grow but never shrink (``field can not be less than previous value``: volume
  expansion failure recovery is off in 1.31);
- a StatefulSet's spec changes only in ``replicas``, ``ordinals``, ``template``,
  ``updateStrategy``, ``revisionHistoryLimit``, ``persistentVolumeClaimRetentionPolicy``
  and ``minReadySeconds`` (``volumeClaimTemplates``, ``serviceName``, ``selector``,
  ``podManagementPolicy`` are fixed).

Each is a 422 ``Invalid`` naming the field, so a controller meets on envtest the
refusal it would meet on a cluster.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest import _quantity
from mcruntime.envtest._gofmt import go_selector, go_string
from mcruntime.envtest._status import StatusError

__all__ = ["check_update", "secret_update_causes"]

_CONFIG_MAPS, _SECRETS = ("", "configmaps"), ("", "secrets")
_SELECTOR_FIXED = {
    ("apps", "deployments"): "Deployment",
    ("apps", "replicasets"): "ReplicaSet",
    ("apps", "daemonsets"): "DaemonSet",
}
_STATEFULSETS = ("apps", "statefulsets")
_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)
_IMMUTABLE_SET = "field is immutable when `immutable` is set"
_PVCS = ("", "persistentvolumeclaims")
_Cause = tuple[str, str, str]


def _immutable_data(
    new: dict[str, Any], old: dict[str, Any], fields: tuple[str, ...]
) -> list[_Cause]:
    """``ValidateConfigMapUpdate``/``ValidateSecretUpdate`` for an immutable object."""
    if old.get("immutable") is not True:
        return []
    causes: list[_Cause] = []
    if new.get("immutable") is not True:
        causes.append(
            ("FieldValueForbidden", "immutable", f"immutable: Forbidden: {_IMMUTABLE_SET}")
        )
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append(("FieldValueForbidden", field, f"{field}: Forbidden: {_IMMUTABLE_SET}"))
    return causes


def secret_update_causes(new: dict[str, Any], old: dict[str, Any]) -> list[_Cause]:
    """``ValidateSecretUpdate``'s own faults of the update of Secret ``old`` to ``new``, in
    its order: a changed ``type``, then those of an immutable Secret (it goes on with
    ``ValidateSecret`` of ``new``, `_validation`'s)."""
    causes: list[_Cause] = []
    new_type, old_type = new.get("type"), old.get("type")
    if new_type != old_type:
        causes.append(
            (
                "FieldValueInvalid",
                "type",
                f"type: Invalid value: {go_string(new_type or '')}: field is immutable",
            )
        )
    return causes + _immutable_data(new, old, ("data",))


def _claim(name: str, new: dict[str, Any], old: dict[str, Any]) -> None:
    """``ValidatePersistentVolumeClaimUpdate`` (VolumeAttributesClass and
    RecoverVolumeExpansionFailure off, as in 1.31): the spec is fixed but for ``volumeName``
    set once, ``storageClassName`` set from none, and, once the claim is bound, the storage
    it requests; that storage never shrinks, bound or not."""
    spec = dict(new.get("spec") or {})
    old_spec = dict(old.get("spec") or {})
    if not old_spec.get("volumeName"):
        old_spec.pop("volumeName", None)
        spec.pop("volumeName", None)
    if old_spec.get("storageClassName") is None and spec.get("storageClassName") is not None:
        spec.pop("storageClassName")
    if (new.get("status") or {}).get("phase") == "Bound":
        for s in (spec, old_spec):
            resources = dict(s.get("resources") or {})
            requests = dict(resources.get("requests") or {})
            requests.pop("storage", None)
            resources["requests"] = requests
            s["resources"] = resources
    causes: list[_Cause] = []
    if spec != old_spec:
        causes.append(
            (
                "FieldValueForbidden",
                "spec",
                "spec: Forbidden: spec is immutable after creation except resources.requests "
                "for bound claims",
            )
        )
    size, old_size = _storage(new), _storage(old)
    if size is not None and old_size is not None and size < old_size:
        at = "spec.resources.requests.storage"
        causes.append(
            (
                "FieldValueForbidden",
                at,
                f"{at}: Forbidden: field can not be less than previous value",
            )
        )
    if causes:
        raise StatusError.invalid_causes("PersistentVolumeClaim", name, "", causes)


def _storage(claim: dict[str, Any]) -> int | None:
    """The storage ``claim`` requests, in nanos (None: none, or not a quantity)."""
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests")
    parsed = _quantity.parse(requests.get("storage")) if isinstance(requests, dict) else None
    return None if parsed is None else parsed[0]


def check_update(key: tuple[str, str], name: str, new: dict[str, Any], old: dict[str, Any]) -> None:
    """Refuse (422) an update of ``name`` (stored under ``key``) from ``old`` to ``new``
    that changes a field kube-apiserver keeps fixed."""
    if key == _CONFIG_MAPS:
        causes = _immutable_data(new, old, ("data", "binaryData"))
        if causes:
            raise StatusError.invalid_causes("ConfigMap", name, "", causes)
    elif key == _SECRETS:
        causes = secret_update_causes(new, old)
        if causes:
            raise StatusError.invalid_causes("Secret", name, "", causes)
    elif key in _SELECTOR_FIXED:
        selector = (new.get("spec") or {}).get("selector")
        if selector != (old.get("spec") or {}).get("selector"):
            raise StatusError.invalid_causes(
                _SELECTOR_FIXED[key],
                name,
                "apps",
                [
                    (
                        "FieldValueInvalid",
                        "spec.selector",
                        f"spec.selector: Invalid value: {go_selector(selector)}: field is immutable",
                    )
                ],
            )
    elif key == _PVCS:
        _claim(name, new, old)
    elif key == _STATEFULSETS:
        spec = dict(new.get("spec") or {})
        old_spec = old.get("spec") or {}
        for field in _STATEFULSET_MUTABLE:
            if field in old_spec:
                spec[field] = old_spec[field]
            else:
                spec.pop(field, None)
        if spec != old_spec:
            allowed = ", ".join(f"'{f}'" for f in _STATEFULSET_MUTABLE[:-1])
            why = (
                f"updates to statefulset spec for fields other than {allowed} and "
                f"'{_STATEFULSET_MUTABLE[-1]}' are forbidden"
            )
            raise StatusError.invalid_causes(
                "StatefulSet",
                name,
                "apps",
                [("FieldValueForbidden", "spec", f"spec: Forbidden: {why}")],
            )
