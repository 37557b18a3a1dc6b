"""The most common of kube-apiserver's validation refusals of built-in kinds
(``pkg/apis/core/validation``, ``pkg/apis/apps/validation``, 1.31), each a 422 on
create and update:

- a workload's (Deployment, ReplicaSet, DaemonSet, StatefulSet) ``spec.selector`` must
  match its template's labels (```selector` does not match template `labels```), the
  mistake every controller author makes once, and its template needs containers;
- a Pod needs containers, each with a name (an RFC 1123 label, not used twice among the
  containers and init containers) and, in a Pod, an image;
- a Service needs ports, unless it is headless or of type ExternalName;
- the keys of a ConfigMap's ``data`` and ``binaryData`` and of a Secret's ``data`` are
  config keys (``[-._a-zA-Z0-9]+``).

envtest does not validate built-in kinds in full; these are the checks a controller is
likeliest to meet first on a cluster.
"""

from __future__ import annotations

import re
from typing import Any

from mcruntime._selectors import LabelSelector, SelectorError
from mcruntime.envtest._gofmt import go_map, go_string
from mcruntime.envtest._status import StatusError

__all__ = ["selects", "template_labels", "validate"]

_Cause = tuple[str, str, str]
_WORKLOADS = {
    ("apps", "deployments"): "Deployment",
    ("apps", "replicasets"): "ReplicaSet",
    ("apps", "daemonsets"): "DaemonSet",
    ("apps", "statefulsets"): "StatefulSet",
}
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)


def _required(at: str) -> _Cause:
    return ("FieldValueRequired", at, f"{at}: Required value")


def _containers(spec: dict[str, Any], at: str, *, pod: bool) -> list[_Cause]:
    """``validateContainers`` and ``validateInitContainers``, in part."""
    causes: list[_Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [_required(f"{at}.containers")]
    seen: set[str] = set()
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        for i, c in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(c, dict):
                continue
            where = f"{at}.{field}[{i}]"
            name = c.get("name")
            if not name:
                causes.append(_required(f"{where}.name"))
            elif not isinstance(name, str) or len(name) > 63 or not _LABEL.match(name):
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{where}.name",
                        f"{where}.name: Invalid value: {go_string(name)}: {_LABEL_MESSAGE}",
                    )
                )
            elif name in seen:
                causes.append(
                    (
                        "FieldValueDuplicate",
                        f"{where}.name",
                        f"{where}.name: Duplicate value: {go_string(name)}",
                    )
                )
            if isinstance(name, str):
                seen.add(name)
            if pod and not c.get("image"):
                causes.append(_required(f"{where}.image"))
    return causes


def selects(selector: Any, labels: dict[str, Any]) -> bool | None:
    """Whether ``selector`` (a ``metav1.LabelSelector``; None selects nothing) selects
    ``labels``; None when it does not parse (its own validation says so)."""
    try:
        parsed = LabelSelector.from_label_selector(selector)
    except SelectorError:
        return None
    return parsed.matches({str(k): str(v) for k, v in labels.items()})


def template_labels(spec: dict[str, Any]) -> dict[str, Any]:
    """The labels of ``spec.template.metadata`` ({} when there are none)."""
    template = spec.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _workload(spec: dict[str, Any]) -> list[_Cause]:
    causes: list[_Cause] = []
    template = spec.get("template")
    if not isinstance(template, dict):
        return [_required("spec.template")]
    meta = template.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None  # printed as sent
    selector = spec.get("selector")
    if (
        isinstance(selector, dict)
        and (selector.get("matchLabels") or selector.get("matchExpressions"))
        and selects(selector, template_labels(spec)) is False
    ):
        at = "spec.template.metadata.labels"
        causes.append(
            (
                "FieldValueInvalid",
                at,
                f"{at}: Invalid value: {go_map(labels)}: `selector` does not match template "
                "`labels`",
            )
        )
    pod_spec = template.get("spec")
    if isinstance(pod_spec, dict):
        causes += _containers(pod_spec, "spec.template.spec", pod=False)
    else:
        causes.append(_required("spec.template.spec.containers"))
    return causes


def _config_keys(obj: dict[str, Any], fields: tuple[str, ...]) -> list[_Cause]:
    causes: list[_Cause] = []
    for field in fields:
        data = obj.get(field)
        for key in data if isinstance(data, dict) else ():
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                at = f"{field}[{key}]"
                causes.append(
                    (
                        "FieldValueInvalid",
                        at,
                        f"{at}: Invalid value: {go_string(key)}: {_CONFIG_KEY_MESSAGE}",
                    )
                )
    return causes


def validate(key: tuple[str, str], obj: dict[str, Any]) -> None:
    """Refuse (422) ``obj``, of the built-in kind stored under ``key``, for the faults above."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    name = str((obj.get("metadata") or {}).get("name") or "")
    causes: list[_Cause]
    if key in _WORKLOADS and spec is not None:
        causes, kind, group = _workload(spec), _WORKLOADS[key], "apps"
    elif key == ("", "pods") and spec is not None:
        causes, kind, group = _containers(spec, "spec", pod=True), "Pod", ""
    elif key == ("", "services") and spec is not None:
        headless = spec.get("clusterIP") == "None"
        needs = spec.get("type") != "ExternalName" and not headless
        causes = [_required("spec.ports")] if needs and not spec.get("ports") else []
        kind, group = "Service", ""
    elif key == ("", "configmaps"):
        causes, kind, group = _config_keys(obj, ("data", "binaryData")), "ConfigMap", ""
    elif key == ("", "secrets"):
        causes, kind, group = _config_keys(obj, ("data",)), "Secret", ""
    else:
        return
    if causes:
        raise StatusError.invalid_causes(kind, name, group, causes)
