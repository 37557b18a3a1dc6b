"""The most common of kube-apiserver's validation refusals of built-in kinds
(``pkg/apis/core/validation``, ``pkg/apis/apps/validation``, 1.31), each a 422 on
create and update:

- a workload's (Deployment, ReplicaSet, DaemonSet, StatefulSet) ``spec.selector`` must
  match its template's labels (```selector` does not match template `labels```), the
  mistake every controller author makes once, and its template needs containers; its
  ``replicas`` may not be negative (a computed count gone below zero); a Deployment's
  ``rollingUpdate`` goes with the ``RollingUpdate`` strategy only;
- a Pod (and a workload's pod template) needs containers, each with a name (an RFC 1123
  label, not used twice among the containers and init containers) and an image;
- a Service needs ports, unless it is headless or of type ExternalName, each port number
  in 1..65535, and a known ``type``;
- a CronJob needs a ``schedule`` of five fields (or a ``@`` descriptor);
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


def _containers(spec: dict[str, Any], at: str) -> list[_Cause]:
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
            if not c.get("image"):  # validateContainerCommon: templates too
                causes.append(_required(f"{where}.image"))
    return causes


def _nonnegative(spec: dict[str, Any], field: str) -> list[_Cause]:
    """``ValidateNonnegativeField``."""
    value = spec.get(field)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        at = f"spec.{field}"
        return [
            (
                "FieldValueInvalid",
                at,
                f"{at}: Invalid value: {value}: must be greater than or equal to 0",
            )
        ]
    return []


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
        causes += _containers(pod_spec, "spec.template.spec")
    else:
        causes.append(_required("spec.template.spec.containers"))
    return causes


def _strategy(spec: dict[str, Any]) -> list[_Cause]:
    """``ValidateDeploymentStrategy``, in part."""
    strategy = spec.get("strategy")
    if not isinstance(strategy, dict):
        return []
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if kind == "Recreate" and rolling:
        at = "spec.strategy.rollingUpdate"
        why = "may not be specified when strategy `type` is 'Recreate'"
        return [("FieldValueForbidden", at, f"{at}: Forbidden: {why}")]
    if kind not in ("Recreate", "RollingUpdate"):
        # the whole strategy is the bad value, printed with Go's %#v (a pointer that is
        # set shows its address there: a made-up one here)
        pointer = "(nil)" if rolling is None else "(0xc000100000)"
        value = (
            f"apps.DeploymentStrategy{{Type:{go_string(str(kind or ''))}, "
            f"RollingUpdate:(*apps.RollingUpdateDeployment){pointer}}}"
        )
        at = "spec.strategy"
        supported = 'supported values: "Recreate", "RollingUpdate"'
        return [("FieldValueNotSupported", at, f"{at}: Unsupported value: {value}: {supported}")]
    return []


#: ``supportedServiceType``, as ``sets.List`` sorts it
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def _service(spec: dict[str, Any]) -> list[_Cause]:
    """``ValidateService``, in part: ports (unless headless or ExternalName) with numbers in
    range, and a known type."""
    causes: list[_Cause] = []
    headless = spec.get("clusterIP") == "None"
    kind, ports = spec.get("type"), spec.get("ports")
    if kind != "ExternalName" and not headless and not ports:
        causes.append(_required("spec.ports"))
    for i, port in enumerate(ports if isinstance(ports, list) else ()):
        number = port.get("port") if isinstance(port, dict) else None
        if isinstance(number, int) and not isinstance(number, bool) and not 1 <= number <= 65535:
            at = f"spec.ports[{i}].port"
            why = "must be between 1 and 65535, inclusive"
            causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {number}: {why}"))
    if isinstance(kind, str) and kind and kind not in _SERVICE_TYPES:
        at = "spec.type"
        allowed = ", ".join(f'"{t}"' for t in _SERVICE_TYPES)
        causes.append(
            (
                "FieldValueNotSupported",
                at,
                f"{at}: Unsupported value: {go_string(kind)}: supported values: {allowed}",
            )
        )
    return causes


#: the descriptors robfig/cron's standard parser takes instead of five fields
_CRON_DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


def _schedule(spec: dict[str, Any]) -> list[_Cause]:
    """``validateScheduleFormat``, in part: a schedule is required, and ``cron.ParseStandard``
    takes five fields or a descriptor (its error for another count: the fields' values
    are not checked here)."""
    schedule = spec.get("schedule")
    if not schedule:
        return [_required("spec.schedule")]
    if not isinstance(schedule, str):
        return []
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        text = text.split(None, 1)[1] if " " in text else ""
    fields = text.split()
    at = "spec.schedule"
    causes: list[_Cause] = []
    if len(fields) != 5 and not (text in _CRON_DESCRIPTORS or text.startswith("@every ")):
        why = f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(schedule)}: {why}")
        )
    if "TZ" in schedule:  # a new CronJob names its zone in spec.timeZone
        why = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(schedule)}: {why}")
        )
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
        if kind != "DaemonSet":
            causes += _nonnegative(spec, "replicas")
        if kind == "Deployment":
            causes += _strategy(spec)
    elif key == ("", "pods") and spec is not None:
        causes, kind, group = _containers(spec, "spec"), "Pod", ""
    elif key == ("", "services") and spec is not None:
        causes, kind, group = _service(spec), "Service", ""
    elif key == ("batch", "cronjobs") and spec is not None:
        causes, kind, group = _schedule(spec), "CronJob", "batch"
    elif key == ("", "configmaps"):
        causes, kind, group = _config_keys(obj, ("data", "binaryData")), "ConfigMap", ""
    elif key == ("", "secrets"):
        causes, kind, group = _config_keys(obj, ("data",)), "Secret", ""
    else:
        return
    if causes:
        raise StatusError.invalid_causes(kind, name, group, causes)
