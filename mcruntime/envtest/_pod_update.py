"""What an update of a Pod may change: kube-apiserver's ``ValidatePodUpdate``
(``pkg/apis/core/validation/validation.go``, 1.31).

A pod's spec is fixed once it is created, but for a few fields: the containers' and
init containers' images, ``activeDeadlineSeconds`` (set, or lowered), tolerations
(added; an existing one may change only its ``tolerationSeconds``), scheduling gates
(removed), ``terminationGracePeriodSeconds`` (from a negative value to 1) and, while the
pod has scheduling gates, ``nodeSelector`` (keys added). Anything else is a 422:
``spec: Forbidden: pod updates may not change fields other than ...``. A controller
that re-renders a pod's spec from a template on every reconcile, as it may a
Deployment's, meets this on a cluster; envtest refuses it too. (kube-apiserver ends the
message with a Go ``cmp.Diff`` of the two specs; envtest names the fields that differ.)

The spec compared is the one stored: defaulted, with the fields the built-in admission
plugins set, as kube-apiserver validates the object after both.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._gofmt import go_string
from mcruntime.envtest._status import StatusError

__all__ = ["check_pod_update"]

#: kube-apiserver 1.31's ``updatablePodSpecFields`` (InPlacePodVerticalScaling is off)
_UPDATABLE = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    )
)
_MAX_INT32 = 2**31 - 1
_Cause = tuple[str, str, str]


def _list(spec: dict[str, Any], field: str) -> list[Any]:
    value = spec.get(field)
    return list(value) if isinstance(value, list) else []


def _container_causes(new: list[Any], old: list[Any], at: str) -> tuple[list[_Cause], bool]:
    """``ValidateContainerUpdates``: (its causes, whether the update stops there)."""
    if len(new) != len(old):
        return [
            (
                "FieldValueForbidden",
                at,
                f"{at}: Forbidden: pod updates may not add or remove containers",
            )
        ], True
    causes: list[_Cause] = []
    for i, c in enumerate(new):
        image = str((c or {}).get("image") or "") if isinstance(c, dict) else ""
        if not image:
            causes.append(
                ("FieldValueRequired", f"{at}[{i}].image", f"{at}[{i}].image: Required value")
            )
        elif image.strip() != image:
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{at}[{i}].image",
                    f"{at}[{i}].image: Invalid value: {go_string(image)}: must not have leading or "
                    "trailing whitespace",
                )
            )
    return causes, False


def _without_seconds(toleration: Any) -> Any:
    if not isinstance(toleration, dict):
        return toleration
    return {k: v for k, v in toleration.items() if k != "tolerationSeconds"}


def check_pod_update(name: str, new: dict[str, Any], old: dict[str, Any]) -> None:
    """Refuse (422) an update of pod ``name`` from ``old`` to ``new`` that changes what
    ``ValidatePodUpdate`` keeps fixed."""
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    assert isinstance(new_spec, dict) and isinstance(old_spec, dict)
    if new_spec == old_spec:
        return
    causes: list[_Cause] = []
    for field in ("containers", "initContainers"):
        found, stop = _container_causes(
            _list(new_spec, field), _list(old_spec, field), f"spec.{field}"
        )
        causes += found
        if stop:
            raise StatusError.invalid_causes("Pod", name, "", causes)

    deadline, old_deadline = (
        new_spec.get("activeDeadlineSeconds"),
        old_spec.get("activeDeadlineSeconds"),
    )
    at = "spec.activeDeadlineSeconds"
    if deadline is not None:
        if not isinstance(deadline, int) or not 0 < deadline <= _MAX_INT32:
            causes.append(
                (
                    "FieldValueInvalid",
                    at,
                    f"{at}: Invalid value: {deadline}: must be between 1 and {_MAX_INT32}, inclusive",
                )
            )
            raise StatusError.invalid_causes("Pod", name, "", causes)
        if isinstance(old_deadline, int) and old_deadline < deadline:
            causes.append(
                (
                    "FieldValueInvalid",
                    at,
                    f"{at}: Invalid value: {deadline}: must be less than or equal to previous value",
                )
            )
            raise StatusError.invalid_causes("Pod", name, "", causes)
    elif old_deadline is not None:
        causes.append(
            (
                "FieldValueInvalid",
                at,
                f'{at}: Invalid value: "null": must not update from a positive integer to nil value',
            )
        )

    new_tolerations = [_without_seconds(t) for t in _list(new_spec, "tolerations")]
    if any(_without_seconds(t) not in new_tolerations for t in _list(old_spec, "tolerations")):
        causes.append(
            (
                "FieldValueForbidden",
                "spec.tolerations",
                "spec.tolerations: Forbidden: existing toleration can not be modified except its "
                "tolerationSeconds",
            )
        )
    old_gates = {g.get("name") for g in _list(old_spec, "schedulingGates") if isinstance(g, dict)}
    for i, gate in enumerate(_list(new_spec, "schedulingGates")):
        gate_name = gate.get("name") if isinstance(gate, dict) else None
        if gate_name not in old_gates:
            at = f"spec.schedulingGates[{i}].name"
            causes.append(
                (
                    "FieldValueForbidden",
                    at,
                    f"{at}: Forbidden: only deletion is allowed, but found new scheduling gate "
                    f"'{gate_name}'",
                )
            )

    # what may change, taken from the old spec; anything else that differs is forbidden
    munged = dict(new_spec)
    for field in ("containers", "initContainers"):
        olds = _list(old_spec, field)
        if field in munged:
            munged[field] = [
                {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                for c, o in zip(_list(new_spec, field), olds, strict=False)
            ]
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if field in old_spec:
            munged[field] = old_spec[field]
        else:
            munged.pop(field, None)
    grace, old_grace = (
        munged.get("terminationGracePeriodSeconds"),
        old_spec.get("terminationGracePeriodSeconds"),
    )
    if isinstance(old_grace, int) and old_grace < 0 and grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old_spec.get("schedulingGates"):  # a gated pod may gain nodeSelector keys
        selector = munged.get("nodeSelector") or {}
        old_selector = old_spec.get("nodeSelector") or {}
        if (
            isinstance(selector, dict)
            and isinstance(old_selector, dict)
            and all(selector.get(k) == v for k, v in old_selector.items())
        ):
            if "nodeSelector" in old_spec:
                munged["nodeSelector"] = old_spec["nodeSelector"]
            else:
                munged.pop("nodeSelector", None)
    if munged != old_spec:
        differ = sorted(
            k for k in munged.keys() | old_spec.keys() if munged.get(k) != old_spec.get(k)
        )
        detail = ", ".join(f"spec.{k}" for k in differ)
        causes.append(
            (
                "FieldValueForbidden",
                "spec",
                f"spec: Forbidden: pod updates may not change fields other than {_UPDATABLE}\n"
                f"(envtest: {detail} differ)",
            )
        )
    if causes:
        raise StatusError.invalid_causes("Pod", name, "", causes)
