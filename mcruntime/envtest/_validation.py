"""The most common of kube-apiserver's validation refusals of built-in kinds
(``pkg/apis/core/validation``, ``pkg/apis/apps/validation``, 1.31), each a 422 on
create and update:

- a workload's (Deployment, ReplicaSet, DaemonSet, StatefulSet) ``spec.selector`` must
  match its template's labels (```selector` does not match template `labels```), the
  mistake every controller author makes once, and its template needs containers; its
  ``replicas`` may not be negative (a computed count gone below zero); a Deployment's,
  DaemonSet's or StatefulSet's update strategy is of a known type, and a Deployment's
  ``rollingUpdate`` goes with the ``RollingUpdate`` strategy only, a StatefulSet's not with
  ``OnDelete``; a StatefulSet's rolling update has a ``partition`` not below 0 and a
  ``maxUnavailable`` that is a number above 0 or a percentage from 1% to 100%
  (``validateRollingUpdateStatefulSet``: the field is kube's MaxUnavailableStatefulSet
  feature, on by default from 1.35, which 1.31 would drop instead; the 1 that 1.35's
  defaulting gives a rolling update without one is not filled in); a Deployment's (or
  ReplicaSet's) selector is not empty, its rolling update can make progress
  (``maxUnavailable`` and ``maxSurge`` not both 0, ``maxUnavailable`` at most 100%), its
  ``minReadySeconds`` and ``revisionHistoryLimit`` are not negative and its
  ``progressDeadlineSeconds`` is above ``minReadySeconds``;
- a Pod (and a workload's pod template) needs containers, each with a name (an RFC 1123
  label, not used twice among the containers and init containers) and an image, mounting
  only volumes of the pod (each named once, by an RFC 1123 label), each at its own path, requesting no more than its limits, with
  valid ports, a known pull policy and probes of one handler each; its restart policy is
  known, and a workload's is ``Always``;
- a Service needs ports, unless it is headless or of type ExternalName, each port number
  and target port in 1..65535, each port named (an RFC 1123 label, once) when there are
  several, a known protocol, no (protocol, port) twice, a selector of labels, a known
  ``type`` and session affinity, and as ExternalName a DNS ``externalName``;
- a CronJob needs a ``schedule`` robfig/cron parses: five fields in range, or a descriptor;
- the keys of a ConfigMap's ``data`` and ``binaryData`` and of a Secret's ``data`` are
  config keys (``[-._a-zA-Z0-9]+``, not ``.``, ``..`` or starting with ``..``), a
  ConfigMap's key is not in both bags, and their values total 1 MiB at most;
- a Secret of a built-in ``type`` has the keys the type needs (``ValidateSecret``: a TLS
  pair, a docker configuration that is a JSON object, ...), checked on update after the
  type's immutability (``ValidateSecretUpdate``);
- an Event passes kube-apiserver's old rules (``legacyValidateEvent``, in `_events`; the
  strict rules of ``events.k8s.io/v1`` are checked by its view);
- a Node's ``spec.podCIDRs`` are valid CIDRs, one of each family at most, none twice
  (``ValidateNode``, `_ips`), and once set never change (``ValidateNodeUpdate``: ``node
  updates may not change podCIDR except from "" to valid``).

envtest does not validate built-in kinds in full; these are the checks a controller is
likeliest to meet first on a cluster.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from mcruntime._selectors import (
    LabelSelector,
    SelectorError,
    qualified_name_problems,
    regex_error,
)
from mcruntime.envtest import _quantity
from mcruntime.envtest._events import legacy_causes
from mcruntime.envtest._gofmt import go_int_or_string, go_map, go_pointer, go_selector, go_string
from mcruntime.envtest._gojson import unmarshal_object_error
from mcruntime.envtest._immutable import secret_update_causes
from mcruntime.envtest._ips import POD_CIDRS
from mcruntime.envtest._names import label_causes, name_problems
from mcruntime.envtest._status import StatusError

__all__ = ["selects", "template_labels", "validate"]

_Cause = tuple[str, str, str]
_WORKLOADS = {
    ("apps", "deployments"): "Deployment",
    ("apps", "replicasets"): "ReplicaSet",
    ("apps", "daemonsets"): "DaemonSet",
    ("apps", "statefulsets"): "StatefulSet",
}
_CONFIG_KEY_FORMAT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY = re.compile(_CONFIG_KEY_FORMAT)
_CONFIG_KEY_MESSAGE = regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    _CONFIG_KEY_FORMAT,
    "key.name",
    "KEY_NAME",
    "key-name",
)


def _required(at: str) -> _Cause:
    return ("FieldValueRequired", at, f"{at}: Required value")


def _containers(spec: dict[str, Any], at: str) -> list[_Cause]:
    """``ValidatePodSpec``, in part: the volumes (`_volumes`), ``validateContainers`` and
    ``validateInitContainers`` (names, images, ports, volume mounts, pull policy, requests
    within limits, probes), then ``validateRestartPolicy``."""
    causes: list[_Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [_required(f"{at}.containers")]
    seen: set[str] = set()
    volumes: set[str] = set()  # those without faults: a mount of another is not found
    causes += _volumes(spec.get("volumes"), f"{at}.volumes", volumes)
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        for i, c in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(c, dict):
                continue
            where = f"{at}.{field}[{i}]"
            name = c.get("name")
            if not name:
                causes.append(_required(f"{where}.name"))
            elif problems := name_problems(name if isinstance(name, str) else "", "label"):
                causes += [
                    (
                        "FieldValueInvalid",
                        f"{where}.name",
                        f"{where}.name: Invalid value: {go_string(name)}: {why}",
                    )
                    for why in problems
                ]
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
            causes += _container_ports(c.get("ports"), f"{where}.ports")
            causes += _volume_mounts(c.get("volumeMounts"), volumes, f"{where}.volumeMounts")
            pull = c.get("imagePullPolicy")
            causes += _not_supported(f"{where}.imagePullPolicy", pull, _PULL_POLICIES)
            causes += _requests_within_limits(c.get("resources"), f"{where}.resources")
            if field == "containers":  # an init container's probes are checked otherwise
                for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                    causes += _probe_handler(c.get(probe), f"{where}.{probe}")
    # ValidatePodSpec goes on with the restart policy (defaulted to Always)
    policy = spec.get("restartPolicy")
    causes += _not_supported(f"{at}.restartPolicy", policy, _RESTART_POLICIES)
    return causes


#: ``validateRestartPolicy``'s values, in its order
_RESTART_POLICIES = ("Always", "OnFailure", "Never")


#: ``validatePullPolicy``'s values, in its order
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
#: the handlers of a probe, in ``validateHandler``'s order
_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")


def _volumes(listed: Any, at: str, valid: set[str]) -> list[_Cause]:
    """``ValidateVolumes``, in part: each volume has a name (an RFC 1123 label) that no
    volume before it without faults has; the names of those without faults go to ``valid``
    (what mounts may name)."""
    causes: list[_Cause] = []
    for i, volume in _objects_in(listed):
        where = f"{at}[{i}]"
        faults: list[_Cause] = []  # one without a source is an emptyDir (SetDefaults_Volume)
        name = volume.get("name")
        name = name if isinstance(name, str) else ""
        if not name:
            faults.append(_required(f"{where}.name"))
        else:
            problems = name_problems(name, "label")
            faults += _invalid_each(f"{where}.name", go_string(name), problems)
        if name in valid:
            duplicate = f"{where}.name: Duplicate value: {go_string(name)}"
            faults.append(("FieldValueDuplicate", f"{where}.name", duplicate))
        if faults:
            causes += faults
        else:
            valid.add(name)
    return causes


def _objects_in(items: Any) -> list[tuple[int, dict[str, Any]]]:
    """The objects of list ``items`` with their indexes (none when it is no list)."""
    if not isinstance(items, list):
        return []
    return [(i, item) for i, item in enumerate(items) if isinstance(item, dict)]


def _container_ports(ports: Any, at: str) -> list[_Cause]:
    """``validateContainerPorts``: a name is an IANA service name used once, the container
    port is given and in range (the host port too), the protocol is known."""
    causes: list[_Cause] = []
    names: set[str] = set()
    for j, port in _objects_in(ports):
        where = f"{at}[{j}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            if problems := _port_name_problems(name):
                causes += _invalid_each(f"{where}.name", go_string(name), problems)
            elif name in names:
                duplicate = f"{where}.name: Duplicate value: {go_string(name)}"
                causes.append(("FieldValueDuplicate", f"{where}.name", duplicate))
            names.add(name)
        number = port.get("containerPort")
        if number == 0 or number is None:
            causes.append(_required(f"{where}.containerPort"))
        elif _out_of_port_range(number):
            causes += _invalid_each(f"{where}.containerPort", str(number), [_PORT_RANGE])
        host = port.get("hostPort")
        if host not in (None, 0) and _out_of_port_range(host):
            causes += _invalid_each(f"{where}.hostPort", str(host), [_PORT_RANGE])
        causes += _not_supported(f"{where}.protocol", port.get("protocol"), _PROTOCOLS)
    return causes


def _probe_handler(probe: Any, at: str) -> list[_Cause]:
    """``validateHandler`` of a container's probe: exactly one handler."""
    if not isinstance(probe, dict):
        return []
    given = [h for h in _HANDLERS if probe.get(h) is not None]
    if not given:
        return [("FieldValueRequired", at, f"{at}: Required value: must specify a handler type")]
    why = "may not specify more than 1 handler type"
    return [("FieldValueForbidden", f"{at}.{h}", f"{at}.{h}: Forbidden: {why}") for h in given[1:]]


def _volume_mounts(mounts: Any, volumes: set[str], at: str) -> list[_Cause]:
    """``ValidateVolumeMounts``, in part: each mount names a volume of the pod and a path no
    other mount of the container has."""
    causes: list[_Cause] = []
    paths: set[str] = set()
    for j, mount in _objects_in(mounts):
        where = f"{at}[{j}]"
        name, path = mount.get("name"), mount.get("mountPath")
        if not name:
            causes.append(_required(f"{where}.name"))
        if name not in volumes:
            shown = go_string(name if isinstance(name, str) else "")
            causes.append(
                ("FieldValueNotFound", f"{where}.name", f"{where}.name: Not found: {shown}")
            )
        if not path:
            causes.append(_required(f"{where}.mountPath"))
        if path in paths:
            causes += _invalid_each(f"{where}.mountPath", go_string(path), ["must be unique"])
        if isinstance(path, str):
            paths.add(path)
    return causes


def _requests_within_limits(resources: Any, at: str) -> list[_Cause]:
    """``ValidateContainerResourceRequirements``' check of a request against its limit: not
    above it, and for a resource that cannot be overcommitted (huge pages, extended
    resources) equal to it."""
    if not isinstance(resources, dict):
        return []
    requests, limits = resources.get("requests"), resources.get("limits")
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return []
    causes: list[_Cause] = []
    for resource, value in requests.items():
        request, limit = _quantity.parse(value), _quantity.parse(limits.get(resource))
        if request is None or limit is None:
            continue
        native = "/" not in resource or "kubernetes.io/" in resource
        overcommit = native and not resource.startswith("hugepages-")
        shown, bound = _quantity.canonical(value), _quantity.canonical(limits[resource])
        if request[0] != limit[0] and not overcommit:
            why = f"must be equal to {resource} limit of {bound}"
        elif request[0] > limit[0]:
            why = f"must be less than or equal to {resource} limit of {bound}"
        else:
            continue
        causes += _invalid_each(f"{at}.requests", go_string(shown), [why])
    return causes


def _nonnegative(spec: dict[str, Any], field: str, at: str = "spec") -> list[_Cause]:
    """``ValidateNonnegativeField`` of ``spec[field]`` (``at``: where ``spec`` is)."""
    value = spec.get(field)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        at = f"{at}.{field}"
        return [
            (
                "FieldValueInvalid",
                at,
                f"{at}: Invalid value: {value}: must be greater than or equal to 0",
            )
        ]
    return []


_PERCENT = re.compile(r"[0-9]+%")  # Go's ^...$: the whole string
_PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)
_GO_INT_MAX = 2**63 - 1


def _go_atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` as ``IntOrString.IntValue`` uses it: 0 for what is no number,
    the bound for one out of range."""
    if not _GO_INT.fullmatch(text):
        return 0
    return max(-_GO_INT_MAX - 1, min(int(text), _GO_INT_MAX))


def _rolling_stateful_set(rolling: dict[str, Any]) -> list[_Cause]:
    """``validateRollingUpdateStatefulSet``: a partition not below 0, and a maxUnavailable
    (``ValidatePositiveIntOrPercent``) that is not 0 (``getIntOrPercentValue``: a string
    that is no percentage counts as its ``Atoi``) nor above 100%."""
    where = "spec.updateStrategy.rollingUpdate"
    causes = _nonnegative(rolling, "partition", where)
    more, number = _int_or_percent(rolling, "maxUnavailable", where)
    if number < 0 and not more:
        return causes  # none given
    causes += more
    value = rolling["maxUnavailable"]
    at, shown = f"{where}.maxUnavailable", go_int_or_string(value)
    if number == 0:
        causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: cannot be 0"))
    if _is_percent(value) and number > 100:
        why = "must not be greater than 100%"
        causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {why}"))
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


def _workload(spec: dict[str, Any], kind: str = "") -> list[_Cause]:
    causes: list[_Cause] = []
    selector = spec.get("selector")
    empty = isinstance(selector, dict) and not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    )
    if kind in ("Deployment", "ReplicaSet") and empty:
        # ValidateDeploymentSpec and ValidateReplicaSetSpec (a ReplicaSet's words too)
        at, why = "spec.selector", "empty selector is invalid for deployment"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_selector(selector)}: {why}")
        )
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
        # a workload's pods restart always (apps ValidatePodTemplateSpecForReplicaSet, ...)
        policy = pod_spec.get("restartPolicy")
        causes += _not_supported("spec.template.spec.restartPolicy", policy, ("Always",))
    else:
        causes.append(_required("spec.template.spec.containers"))
    return causes


#: a workload's update strategy: its field, its types, and the Go names of the strategy
#: and of its rolling update (the internal types kube-apiserver prints a bad value as)
_STRATEGIES = {
    "Deployment": (
        "strategy",
        ("Recreate", "RollingUpdate"),
        "DeploymentStrategy",
        "RollingUpdateDeployment",
    ),
    "DaemonSet": (
        "updateStrategy",
        ("RollingUpdate", "OnDelete"),
        "DaemonSetUpdateStrategy",
        "RollingUpdateDaemonSet",
    ),
    "StatefulSet": (
        "updateStrategy",
        ("RollingUpdate", "OnDelete"),
        "StatefulSetUpdateStrategy",
        "RollingUpdateStatefulSetStrategy",
    ),
}


def _strategy(spec: dict[str, Any], kind: str) -> list[_Cause]:
    """``ValidateDeploymentStrategy``, ``ValidateDaemonSetUpdateStrategy`` and
    ``ValidateStatefulSetSpec``'s update strategy, in part."""
    field, types, go_type, go_rolling = _STRATEGIES[kind]
    strategy = spec.get(field)
    if not isinstance(strategy, dict):
        return []
    type_, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if kind == "Deployment" and type_ == "Recreate" and rolling is not None:
        at = "spec.strategy.rollingUpdate"
        why = "may not be specified when strategy `type` is 'Recreate'"
        return [("FieldValueForbidden", at, f"{at}: Forbidden: {why}")]
    if kind == "StatefulSet" and type_ == "OnDelete" and rolling is not None:
        # the value is the rolling update the pointer points to, as Go's %#v prints it
        fields = rolling if isinstance(rolling, dict) else {}
        partition = fields.get("partition")
        value = (
            f"apps.{go_rolling}{{Partition:{partition if isinstance(partition, int) else 0}, "
            f"MaxUnavailable:(*intstr.IntOrString){go_pointer(fields.get('maxUnavailable'))}}}"
        )
        at = "spec.updateStrategy.rollingUpdate"
        why = "only allowed for updateStrategy 'RollingUpdate'"
        return [("FieldValueInvalid", at, f"{at}: Invalid value: {value}: {why}")]
    if kind == "StatefulSet" and type_ == "RollingUpdate" and isinstance(rolling, dict):
        return _rolling_stateful_set(rolling)
    if kind == "Deployment" and type_ == "RollingUpdate" and isinstance(rolling, dict):
        return _rolling_deployment(rolling)
    if type_ not in types:
        # the whole strategy is the bad value, printed with Go's %#v
        value = (
            f"apps.{go_type}{{Type:{go_string(str(type_ or ''))}, "
            f"RollingUpdate:(*apps.{go_rolling}){go_pointer(rolling)}}}"
        )
        at = f"spec.{field}"
        if kind == "StatefulSet":
            why = "must be 'RollingUpdate' or 'OnDelete'"
            return [("FieldValueInvalid", at, f"{at}: Invalid value: {value}: {why}")]
        supported = f"supported values: {', '.join(go_string(t) for t in types)}"
        return [("FieldValueNotSupported", at, f"{at}: Unsupported value: {value}: {supported}")]
    return []


def _is_percent(value: Any) -> bool:
    return isinstance(value, str) and _PERCENT.fullmatch(value) is not None


def _int_or_percent(rolling: dict[str, Any], field: str, where: str) -> tuple[list[_Cause], int]:
    """``ValidatePositiveIntOrPercent`` of ``rolling[field]``, and its ``getIntOrPercentValue``
    (a string that is no percentage counts as its ``Atoi``); -1 with no cause when the field
    holds no int or string."""
    value = rolling.get(field)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, str)):
        return [], -1
    at, shown = f"{where}.{field}", go_int_or_string(value)
    percent = _is_percent(value)
    causes: list[_Cause] = []
    if isinstance(value, str) and not percent:
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {_PERCENT_MESSAGE}")
        )
    causes += _nonnegative({field: value}, field, where)
    number = value if isinstance(value, int) else _go_atoi(value.rstrip("%") if percent else value)
    return causes, number


def _rolling_deployment(rolling: dict[str, Any]) -> list[_Cause]:
    """``ValidateRollingUpdateDeployment``: ``maxUnavailable`` and ``maxSurge`` are numbers
    not below 0 or percentages, not both 0, and ``maxUnavailable`` at most 100%."""
    where = "spec.strategy.rollingUpdate"
    causes, unavailable = _int_or_percent(rolling, "maxUnavailable", where)
    more, surge = _int_or_percent(rolling, "maxSurge", where)
    causes += more
    value = rolling.get("maxUnavailable")
    at = f"{where}.maxUnavailable"
    if unavailable == 0 and surge == 0:
        why = "may not be 0 when `maxSurge` is 0"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_int_or_string(value)}: {why}")
        )
    if _is_percent(value) and unavailable > 100:
        why = "must not be greater than 100%"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_int_or_string(value)}: {why}")
        )
    return causes


def _deployment_timing(spec: dict[str, Any]) -> list[_Cause]:
    """The end of ``ValidateDeploymentSpec``: ``minReadySeconds``, ``revisionHistoryLimit`` and
    ``progressDeadlineSeconds`` not below 0, and the deadline (600 unless given) above
    ``minReadySeconds``."""
    causes = _nonnegative(spec, "minReadySeconds") + _nonnegative(spec, "revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool):
        causes += _nonnegative(spec, "progressDeadlineSeconds")
        ready = spec.get("minReadySeconds")
        if deadline <= (ready if isinstance(ready, int) else 0):
            at = "spec.progressDeadlineSeconds"
            why = "must be greater than minReadySeconds"
            causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {deadline}: {why}"))
    return causes


def _pod_management(spec: dict[str, Any]) -> list[_Cause]:
    """``ValidateStatefulSetSpec``'s ``podManagementPolicy`` (defaulted to OrderedReady)."""
    policy = spec.get("podManagementPolicy")
    if policy in (None, "OrderedReady", "Parallel"):
        return []
    at = "spec.podManagementPolicy"
    why = "must be 'OrderedReady' or 'Parallel'"
    return [("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(str(policy))}: {why}")]


#: ``supportedServiceType``, ``supportedPortProtocols``, ``supportedSessionAffinityType``, as
#: ``sets.List`` sorts them
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_AFFINITIES = ("ClientIP", "None")
#: ``IsValidPortNum``'s complaint
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_PORT_NAME_CHARSET = re.compile(r"[-a-z0-9]+")


def _not_supported(at: str, value: Any, allowed: tuple[str, ...]) -> list[_Cause]:
    """``field.NotSupported`` of a string ``value`` not among ``allowed`` (none else)."""
    if not isinstance(value, str) or not value or value in allowed:
        return []
    listed = ", ".join(f'"{t}"' for t in allowed)
    why = f"Unsupported value: {go_string(value)}: supported values: {listed}"
    return [("FieldValueNotSupported", at, f"{at}: {why}")]


def _invalid_each(at: str, shown: str, problems: list[str]) -> list[_Cause]:
    return [("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {why}") for why in problems]


def _port_name_problems(name: str) -> list[str]:
    """apimachinery's ``IsValidPortName`` (an IANA service name)."""
    problems = ["must be no more than 15 characters"] if len(name) > 15 else []
    if not _PORT_NAME_CHARSET.fullmatch(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name[:1] == "-" or name[-1:] == "-":
        problems.append("must not begin or end with a hyphen")
    return problems


def _out_of_port_range(value: Any) -> bool:
    """A number that is not a port (``IsValidPortNum``)."""
    return isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535


def _service_port(port: dict[str, Any], at: str, named: bool, names: set[str]) -> list[_Cause]:
    """``validateServicePort``: a name (required among several ports: an RFC 1123 label, not
    used twice), the port, a known protocol, the target port (a number in range or an IANA
    service name), the app protocol (a qualified name)."""
    causes: list[_Cause] = []
    name = port.get("name")
    if named and not name:
        causes.append(_required(f"{at}.name"))
    elif isinstance(name, str) and name:
        causes += _invalid_each(f"{at}.name", go_string(name), name_problems(name, "label"))
        if name in names:
            causes.append(
                (
                    "FieldValueDuplicate",
                    f"{at}.name",
                    f"{at}.name: Duplicate value: {go_string(name)}",
                )
            )
        names.add(name)
    number = port.get("port")
    if _out_of_port_range(number):
        causes += _invalid_each(f"{at}.port", str(number), [_PORT_RANGE])
    causes += _not_supported(f"{at}.protocol", port.get("protocol"), _PROTOCOLS)
    target = port.get("targetPort")
    if _out_of_port_range(target):
        causes += _invalid_each(f"{at}.targetPort", str(target), [_PORT_RANGE])
    elif isinstance(target, str):
        causes += _invalid_each(f"{at}.targetPort", go_string(target), _port_name_problems(target))
    app = port.get("appProtocol")
    if isinstance(app, str):
        causes += _invalid_each(f"{at}.appProtocol", go_string(app), qualified_name_problems(app))
    return causes


def _go_service_port_key(port: dict[str, Any]) -> str:
    """The ``core.ServicePort`` of (protocol, port) that ``ValidateService`` names a duplicate
    by (Go's ``%#v``)."""
    return (
        f'core.ServicePort{{Name:"", Protocol:{go_string(port.get("protocol") or "")}, '
        f"AppProtocol:(*string)(nil), Port:{port.get('port')}, "
        'TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}'
    )


def _service(spec: dict[str, Any]) -> list[_Cause]:
    """``ValidateService``, in part and in its order: ports (unless headless or
    ExternalName), an ExternalName Service's ``externalName`` (a DNS subdomain, a trailing
    dot allowed) and no cluster IPs or IP families, each port (`_service_port`), the
    selector (labels), a known session affinity, a known type, no (protocol, port) twice."""
    causes: list[_Cause] = []
    headless = spec.get("clusterIP") == "None"
    kind, ports = spec.get("type"), spec.get("ports")
    if kind != "ExternalName" and not headless and not ports:
        causes.append(_required("spec.ports"))
    if kind == "ExternalName":
        for field in ("clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if spec.get(field):
                at = f"spec.{field}"
                why = "may not be set for ExternalName services"
                causes.append(("FieldValueForbidden", at, f"{at}: Forbidden: {why}"))
        cname = spec.get("externalName")
        cname = cname.removesuffix(".") if isinstance(cname, str) else ""
        if cname:
            problems = name_problems(cname, "subdomain")
            causes += _invalid_each("spec.externalName", go_string(cname), problems)
        else:
            causes.append(_required("spec.externalName"))
    items = [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []
    names: set[str] = set()
    for i, port in enumerate(items):
        causes += _service_port(port, f"spec.ports[{i}]", len(items) > 1, names)
    selector = spec.get("selector")
    if isinstance(selector, dict):
        causes += label_causes(selector, "spec.selector")
    causes += _not_supported("spec.sessionAffinity", spec.get("sessionAffinity"), _AFFINITIES)
    causes += _not_supported("spec.type", kind, _SERVICE_TYPES)
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(items):
        key = (port.get("protocol"), port.get("port"))
        if key in seen:
            at = f"spec.ports[{i}]"
            shown = _go_service_port_key(port)
            causes.append(("FieldValueDuplicate", at, f"{at}: Duplicate value: {shown}"))
        seen.add(key)
    return causes


#: the descriptors robfig/cron's standard parser takes instead of five fields
_CRON_DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


#: robfig/cron's bounds of the five standard fields, and the names two of them take
_CRON_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (
        1,
        12,
        {
            m: i + 1
            for i, m in enumerate(
                ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
            )
        },
    ),
    (0, 6, {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}),
)
_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_GO_UNITS = frozenset(("ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h"))


def _go_duration_error(text: str) -> str | None:
    """What Go's ``time.ParseDuration`` says of ``text``, None when it parses."""
    s = text[1:] if text[:1] in ("+", "-") else text
    if s == "0":
        return None
    if not s:
        return f"time: invalid duration {go_string(text)}"
    while s:
        number = _GO_NUMBER.match(s)
        assert number is not None  # it matches the empty string at least
        if not number.group(1) and not number.group(2):
            return f"time: invalid duration {go_string(text)}"
        s = s[number.end() :]
        unit = re.match(r"[^0-9.]*", s)
        name = unit.group() if unit else ""
        if not name:
            return f"time: missing unit in duration {go_string(text)}"
        if name not in _GO_UNITS:
            return f"time: unknown unit {go_string(name)} in duration {go_string(text)}"
        s = s[len(name) :]
    return None


def _cron_int(expr: str, names: dict[str, int]) -> int:
    """robfig/cron's ``parseIntOrName``: a name, or ``strconv.Atoi`` of a non-negative int."""
    if expr.lower() in names:
        return names[expr.lower()]
    if not _GO_INT.fullmatch(expr):
        raise ValueError(
            f"failed to parse int from {expr}: strconv.Atoi: parsing {go_string(expr)}: "
            "invalid syntax"
        )
    num = int(expr)
    if not -(2**63) <= num < 2**63:
        raise ValueError(
            f"failed to parse int from {expr}: strconv.Atoi: parsing {go_string(expr)}: "
            "value out of range"
        )
    if num < 0:
        raise ValueError(f"negative number ({num}) not allowed: {expr}")
    return num


def _cron_range(expr: str, low: int, high: int, names: dict[str, int]) -> None:
    """robfig/cron v3's ``getRange``: raises ValueError with its message."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _cron_int(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _cron_int(low_and_high[1], names)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _cron_int(range_and_step[1], {})
        if len(low_and_high) == 1:
            end = high  # "N/step" means "N-max/step"
    elif len(range_and_step) > 2:
        raise ValueError(f"too many slashes: {expr}")
    if start < low:
        raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")


def _cron_error(text: str) -> str | None:
    """What ``cron.ParseStandard`` says of ``text`` (its TZ prefix removed), None if it parses."""
    if text.startswith("@"):
        if text in _CRON_DESCRIPTORS:
            return None
        if text.startswith("@every "):
            bad = _go_duration_error(text[len("@every ") :])
            return None if bad is None else f"failed to parse duration {text}: {bad}"
        return f"unrecognized descriptor: {text}"
    fields = text.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for field, (low, high, names) in zip(fields, _CRON_BOUNDS, strict=True):
        for expr in (e for e in field.split(",") if e):
            try:
                _cron_range(expr, low, high, names)
            except ValueError as e:
                return str(e)
    return None


def _schedule(spec: dict[str, Any]) -> list[_Cause]:
    """``validateScheduleFormat``: a schedule is required, ``cron.ParseStandard`` parses it
    (five fields in their ranges, or a descriptor; a TZ prefix's zone is not looked up),
    and names no TZ."""
    schedule = spec.get("schedule")
    if not schedule:
        return [_required("spec.schedule")]
    if not isinstance(schedule, str):
        return []
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        text = text.split(None, 1)[1] if " " in text else ""
    at = "spec.schedule"
    causes: list[_Cause] = []
    why = _cron_error(text)
    if why is not None:
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(schedule)}: {why}")
        )
    if "TZ" in schedule:  # a new CronJob names its zone in spec.timeZone
        why = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        causes.append(
            ("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(schedule)}: {why}")
        )
    return causes


def _config_key_problems(key: str) -> list[str]:
    """apimachinery's ``IsConfigMapKey``: at most 253 bytes, the config key regex (matched
    whole, as Go's ``^...$`` does: no trailing newline), and ``hasChDirPrefix`` (a key is a
    file name when the object is mounted: not ``.``, ``..`` or ``..``-prefixed, the names
    the kubelet's atomic writer keeps for itself), each its own message."""
    problems: list[str] = []
    if len(key.encode()) > 253:
        problems.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        problems.append(_CONFIG_KEY_MESSAGE)
    if key in (".", ".."):
        problems.append(f"must not be '{key}'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def _config_keys(obj: dict[str, Any], fields: tuple[str, ...]) -> list[_Cause]:
    """``ValidateConfigMap``'s and ``ValidateSecret``'s key checks: a field error per
    problem of each key, and (ConfigMap) ``duplicate of key present in binaryData`` at
    ``data[key]`` for a key in both bags."""
    causes: list[_Cause] = []
    for field in fields:
        data = obj.get(field)
        for key in data if isinstance(data, dict) else ():
            at = f"{field}[{key}]"
            problems = _config_key_problems(key)
            other = obj.get("binaryData") if field == "data" and "binaryData" in fields else None
            if isinstance(other, dict) and key in other:
                problems.append("duplicate of key present in binaryData")
            causes += [
                ("FieldValueInvalid", at, f"{at}: Invalid value: {go_string(key)}: {why}")
                for why in problems
            ]
    return causes


#: kube's ``MaxSecretSize``: what the values of a Secret's ``data``, or of a ConfigMap's
#: ``data`` and ``binaryData``, may total (in bytes, decoded)
MAX_DATA_SIZE = 1024 * 1024
#: field.TooLong as kube-apiserver 1.31 words it ("may not be more than ... bytes" from 1.32)
_TOO_LONG = f"Too long: must have at most {MAX_DATA_SIZE} bytes"


def _data_size(obj: dict[str, Any], field: str, encoded: bool = True) -> int:
    """The bytes of the values of map ``field`` of ``obj``, base64-decoded if ``encoded``."""
    data = obj.get(field)
    total = 0
    for value in data.values() if isinstance(data, dict) else ():
        if not isinstance(value, str):
            continue
        if encoded:
            padding = len(value) - len(value.rstrip("="))
            total += len(value) * 3 // 4 - padding
        else:
            total += len(value.encode())
    return total


#: the annotation a ``kubernetes.io/service-account-token`` Secret names its account by
_SERVICE_ACCOUNT_NAME = "kubernetes.io/service-account.name"
#: ``ValidateSecret``'s ``Invalid`` value for a malformed docker configuration
_REDACTED = go_string("<secret contents redacted>")


def _secret_value(data: dict[str, Any], key: str) -> bytes | None:
    """The decoded value of ``key`` of a Secret's ``data`` (None: absent)."""
    if key not in data:
        return None
    value = data[key]
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):  # refused as a body already; read as it is
        return value.encode()


def _secret_type(obj: dict[str, Any]) -> list[_Cause]:
    """``ValidateSecret``'s checks of the keys (and annotation) each built-in Secret type
    needs: ``tls.crt`` and ``tls.key`` present, ``username`` or ``password`` present, a
    non-empty ``ssh-privatekey``, a docker configuration that is a JSON object, the account
    of a ``service-account-token``. Other types (``Opaque``, custom ones) need nothing."""
    data = obj.get("data")
    if not isinstance(data, dict):
        data = {}
    kind = obj.get("type")

    def required(key: str) -> _Cause:
        return _required(f"data[{key}]")

    if kind == "kubernetes.io/service-account-token":
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if not annotations.get(_SERVICE_ACCOUNT_NAME):
            return [_required(f"metadata.annotations[{_SERVICE_ACCOUNT_NAME}]")]
    elif kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        key = ".dockercfg" if kind == "kubernetes.io/dockercfg" else ".dockerconfigjson"
        config = _secret_value(data, key)
        if config is None:
            return [required(key)]
        why = unmarshal_object_error(config)
        if why is not None:
            at = f"data[{key}]"
            return [("FieldValueInvalid", at, f"{at}: Invalid value: {_REDACTED}: {why}")]
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            return [required("username"), required("password")]
    elif kind == "kubernetes.io/ssh-auth":
        if not _secret_value(data, "ssh-privatekey"):
            return [required("ssh-privatekey")]
    elif kind == "kubernetes.io/tls":
        return [required(k) for k in ("tls.crt", "tls.key") if k not in data]
    return []


#: ``ValidateNodeUpdate``'s refusal of a change of set pod CIDRs
_POD_CIDRS_FIXED = 'node updates may not change podCIDR except from "" to valid'


def _node(spec: dict[str, Any], old: dict[str, Any] | None) -> list[_Cause]:
    """``ValidateNode``'s pod CIDRs and, on update, ``ValidateNodeUpdate``'s."""
    cidrs = spec.get("podCIDRs")
    causes = POD_CIDRS.causes(cidrs) if cidrs else []
    old_spec = old.get("spec") if old is not None else None
    old_cidrs = old_spec.get("podCIDRs") if isinstance(old_spec, dict) else None
    if not isinstance(old_cidrs, list) or not old_cidrs:
        return causes  # the controller manager may set them once
    new_cidrs = cidrs if isinstance(cidrs, list) else []
    if len(new_cidrs) != len(old_cidrs):
        changed = 1
    else:
        changed = sum(a != b for a, b in zip(old_cidrs, new_cidrs, strict=True))
    at = "spec.podCIDRs"
    causes += [("FieldValueForbidden", at, f"{at}: Forbidden: {_POD_CIDRS_FIXED}")] * changed
    return causes


def _cluster_subjects(obj: dict[str, Any]) -> list[_Cause]:
    """``ValidateRoleBindingSubject`` of a ClusterRoleBinding, in part: a ServiceAccount
    subject names its namespace (a RoleBinding's defaults to the binding's)."""
    subjects = obj.get("subjects")
    return [
        _required(f"subjects[{i}].namespace")
        for i, s in enumerate(subjects if isinstance(subjects, list) else ())
        if isinstance(s, dict) and s.get("kind") == "ServiceAccount" and not s.get("namespace")
    ]


def validate(key: tuple[str, str], obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    """Refuse (422) ``obj``, of the built-in kind stored under ``key``, for the faults above
    (``old``: the object it updates)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    name = str((obj.get("metadata") or {}).get("name") or "")
    causes: list[_Cause]
    if key in _WORKLOADS and spec is not None:
        # in the order of ValidateXSpec: a StatefulSet's policies first, then replicas (not a
        # DaemonSet's), the template, and a Deployment's or DaemonSet's strategy
        kind, group = _WORKLOADS[key], "apps"
        causes = _pod_management(spec) + _strategy(spec, kind) if kind == "StatefulSet" else []
        if kind != "DaemonSet":
            causes += _nonnegative(spec, "replicas")
        causes += _workload(spec, kind)
        if kind in ("Deployment", "DaemonSet"):
            causes += _strategy(spec, kind)
        if kind == "Deployment":
            causes += _deployment_timing(spec)
    elif key == ("", "pods") and spec is not None:
        causes, kind, group = _containers(spec, "spec"), "Pod", ""
    elif key == ("", "services") and spec is not None:
        causes, kind, group = _service(spec), "Service", ""
    elif key == ("batch", "cronjobs") and spec is not None:
        causes, kind, group = _schedule(spec), "CronJob", "batch"
    elif key == ("", "configmaps"):
        causes, kind, group = _config_keys(obj, ("data", "binaryData")), "ConfigMap", ""
        if _data_size(obj, "data", encoded=False) + _data_size(obj, "binaryData") > MAX_DATA_SIZE:
            # ValidateConfigMap: the whole object's fault, at field.NewPath("") ("[]")
            causes.append(("FieldValueTooLong", "[]", f"[]: {_TOO_LONG}"))
    elif key == ("", "secrets"):
        kind, group = "Secret", ""
        # ValidateSecretUpdate: its own faults, then ValidateSecret's
        causes = secret_update_causes(obj, old) if old is not None else []
        causes += _config_keys(obj, ("data",))
        if _data_size(obj, "data") > MAX_DATA_SIZE:
            causes.append(("FieldValueTooLong", "data", f"data: {_TOO_LONG}"))
        causes += _secret_type(obj)
    elif key == ("", "nodes"):
        causes, kind, group = _node(spec or {}, old), "Node", ""
    elif key == ("rbac.authorization.k8s.io", "clusterrolebindings"):
        causes, kind, group = _cluster_subjects(obj), "ClusterRoleBinding", key[0]
    elif key == ("", "events"):
        causes, kind, group = legacy_causes(obj), "Event", ""
    else:
        return
    if causes:
        raise StatusError.invalid_causes(kind, name, group, causes)
