"""Server-side printing: ``meta.k8s.io/v1`` ``Table`` responses, as ``kubectl get`` asks for them.

A client asks with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
(kubectl lists that, the v1beta1 form and plain JSON). The columns follow
kube-apiserver's printers for the built-in kinds envtest serves (the columns
``kubectl get`` shows, ``priority`` 1 for those only ``-o wide`` shows), a
CRD's ``additionalPrinterColumns`` (JSONPath on the object; ``Age`` when it
declares none), and for the kinds kube-apiserver has no printer for the default
table convertor's Name/Created At. ``includeObject`` is ``None``,
``Metadata`` (the default: a ``PartialObjectMetadata`` per row) or ``Object``.
"""

from __future__ import annotations

import calendar
import datetime
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from mcruntime.envtest._events import to_core_event
from mcruntime.envtest._gofmt import go_float_v, go_json
from mcruntime.envtest._jsonpath import JSONPathError, find
from mcruntime.envtest._registry import ServedResource
from mcruntime.envtest._status import StatusError

__all__ = ["INCLUDE_OBJECT", "human_duration", "include_policy", "to_table"]

INCLUDE_OBJECT = ("None", "Metadata", "Object")

Obj = dict[str, Any]
Column = tuple[str, str, str, int, str]  # name, type, format, priority, description
Printer = tuple[list[Column], Callable[[Obj], list[Any]]]


def human_duration(seconds: float) -> str:
    """kubectl's short age ("45s", "3m20s", "5h", "12d"), as apimachinery's HumanDuration."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d" if h % 24 == 0 else f"{h // 24}d{h % 24}h"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        d = h // 24 - 365 * (h // (24 * 365))
        return f"{h // (24 * 365)}y" if d == 0 else f"{h // (24 * 365)}y{d}d"
    return f"{h // (24 * 365)}y"


def _age(ts: Any) -> str:
    if not isinstance(ts, str) or not ts:
        return "<unknown>"
    try:
        t = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return "<unknown>"
    return human_duration(time.time() - t)


def _get(obj: Any, *path: str | int) -> Any:
    for p in path:
        if isinstance(p, int):
            obj = obj[p] if isinstance(obj, list) and len(obj) > p else None
        else:
            obj = obj.get(p) if isinstance(obj, dict) else None
    return obj


def _meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _or_none(value: Any) -> Any:
    return "<none>" if value in (None, "", [], {}) else value


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _selector(sel: Any) -> str:
    if not isinstance(sel, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or ():
        if isinstance(e, dict):
            values = ",".join(e.get("values") or ())
            parts.append(f"{e.get('key')} {str(e.get('operator', '')).lower()} ({values})")
    return ",".join(parts) or "<none>"


def _containers(template_spec: Any) -> tuple[str, str]:
    cs = [c for c in (_get(template_spec, "containers") or ()) if isinstance(c, dict)]
    names = ",".join(str(c.get("name", "")) for c in cs)
    images = ",".join(str(c.get("image", "")) for c in cs)
    return _or_none(names), _or_none(images)


def _col(
    name: str, type: str = "string", fmt: str = "", priority: int = 0, description: str = ""
) -> Column:
    return (name, type, fmt, priority, description)


_NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
_AGE = _col("Age", description="CreationTimestamp is the time the object was created.")


def _pod(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    containers = spec.get("containers") or []
    cstatus = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    ready = sum(1 for c in cstatus if c.get("ready"))
    restarts = sum(_int(c.get("restartCount")) for c in cstatus)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in cstatus:
        waiting = _get(c, "state", "waiting", "reason")
        terminated = _get(c, "state", "terminated", "reason")
        if waiting or terminated:
            reason = waiting or terminated
    if _meta(o).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        _meta(o).get("name"),
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        _age(_meta(o).get("creationTimestamp")),
        _or_none(status.get("podIP")),
        _or_none(spec.get("nodeName")),
        _or_none(status.get("nominatedNodeName")),
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _deployment(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(o).get("name"),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _replicaset(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(o).get("name"),
        _int(spec.get("replicas")),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _statefulset(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(o).get("name"),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
    ]


def _daemonset(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    node_sel = _get(spec, "template", "spec", "nodeSelector") or {}
    return [
        _meta(o).get("name"),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        ",".join(f"{k}={v}" for k, v in sorted(node_sel.items())) or "<none>",
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _job(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    state = "Running"
    if conds.get("Complete") == "True":
        state = "Complete"
    elif conds.get("Failed") == "True":
        state = "Failed"
    elif spec.get("suspend"):
        state = "Suspended"
    completions = spec.get("completions")
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(o).get("name"),
        state,
        f"{_int(status.get('succeeded'))}/{completions if completions is not None else 1}",
        _duration(status.get("startTime"), status.get("completionTime")),
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _duration(start: Any, end: Any) -> str:
    if not isinstance(start, str):
        return ""
    try:
        t0 = calendar.timegm(time.strptime(start[:19], "%Y-%m-%dT%H:%M:%S"))
        t1 = (
            calendar.timegm(time.strptime(end[:19], "%Y-%m-%dT%H:%M:%S"))
            if isinstance(end, str)
            else time.time()
        )
    except ValueError:
        return ""
    return human_duration(t1 - t0)


def _cronjob(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    names, images = _containers(_get(spec, "jobTemplate", "spec", "template", "spec"))
    last = status.get("lastScheduleTime")
    return [
        _meta(o).get("name"),
        spec.get("schedule", ""),
        _or_none(spec.get("timeZone")),
        "True" if spec.get("suspend") else "False",
        len(status.get("active") or ()),
        _age(last) if last else "<none>",
        _age(_meta(o).get("creationTimestamp")),
        names,
        images,
        _selector(_get(spec, "jobTemplate", "spec", "selector")),
    ]


def _ports(ports: Any) -> str:
    out = []
    for p in ports or ():
        if not isinstance(p, dict):
            continue
        s = str(p.get("port", ""))
        if p.get("nodePort"):
            s += f":{p['nodePort']}"
        out.append(f"{s}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) or "<none>"


def _service(o: Obj) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    type_ = spec.get("type") or "ClusterIP"
    external = ",".join(spec.get("externalIPs") or ())
    if type_ == "LoadBalancer":
        ingress = [
            i.get("ip") or i.get("hostname") or ""
            for i in _get(status, "loadBalancer", "ingress") or ()
            if isinstance(i, dict)
        ]
        external = ",".join([*ingress, *(spec.get("externalIPs") or ())]) or "<pending>"
    elif type_ == "ExternalName":
        external = spec.get("externalName") or ""
    sel = spec.get("selector") or {}
    return [
        _meta(o).get("name"),
        type_,
        _or_none(spec.get("clusterIP")),
        external or "<none>",
        _ports(spec.get("ports")),
        _age(_meta(o).get("creationTimestamp")),
        ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>",
    ]


def _data_count(o: Obj) -> int:
    return len(o.get("data") or {}) + len(o.get("binaryData") or {})


def _node(o: Obj) -> list[Any]:
    status = o.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    state = "Ready" if conds.get("Ready") == "True" else "NotReady"
    if conds.get("Ready") is None:
        state = "Unknown"
    if _get(o, "spec", "unschedulable"):
        state += ",SchedulingDisabled"
    labels = _meta(o).get("labels") or {}
    roles = sorted(
        k.split("/", 1)[1]
        for k in labels
        if k.startswith("node-role.kubernetes.io/") and "/" in k and k.split("/", 1)[1]
    )
    addrs = {a.get("type"): a.get("address") for a in status.get("addresses") or ()}
    info = status.get("nodeInfo") or {}
    return [
        _meta(o).get("name"),
        state,
        ",".join(roles) or "<none>",
        _age(_meta(o).get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        _or_none(addrs.get("InternalIP")),
        _or_none(addrs.get("ExternalIP")),
        _or_none(info.get("osImage")),
        _or_none(info.get("kernelVersion")),
        _or_none(info.get("containerRuntimeVersion")),
    ]


def _core_event(o: Obj) -> list[Any]:
    """printEvent: first seen falls back to the eventTime, last seen to the first (or, for a
    series, its last observation); a singleton's count is 1; the source is the component (or
    reporting controller) and the host (or reporting instance). An events.k8s.io Event is
    read as core/v1 words it (``regarding`` as ``involvedObject``, ``note`` as ``message``)."""
    o = to_core_event(o)
    involved = o.get("involvedObject") or {}
    source = o.get("source") or {}
    first = _age(o.get("firstTimestamp") or o.get("eventTime"))
    last = _age(o["lastTimestamp"]) if o.get("lastTimestamp") else first
    count = _int(o.get("count"))
    series = o.get("series")
    if isinstance(series, dict):
        last, count = _age(series.get("lastObservedTime")), _int(series.get("count"))
    elif count == 0:
        count = 1
    kind, name = str(involved.get("kind", "")).lower(), involved.get("name")
    src = str(source.get("component") or o.get("reportingComponent") or "")
    instance = source.get("host") or o.get("reportingInstance")
    return [
        last,
        o.get("type", ""),
        o.get("reason", ""),
        f"{kind}/{name}" if name else kind,
        involved.get("fieldPath", ""),
        f"{src}, {instance}" if instance else src,
        str(o.get("message", "")).strip(),
        first,
        count,
        _meta(o).get("name"),
    ]


def _int_or_na(value: Any) -> str:
    return "N/A" if value is None else str(value)


def _hpa_targets(o: Obj) -> str:
    """``cpu: <unknown>/80%``: each metric's current value (none until the controller sets it)
    over its target, as kubectl 1.30+ prints them."""
    out = []
    v1_target = _get(o, "spec", "targetCPUUtilizationPercentage")  # an autoscaling/v1 object
    if v1_target is not None:
        out.append(f"cpu: <unknown>/{v1_target}%")
    for m in _get(o, "spec", "metrics") or ():
        source = m.get("resource") or m.get("containerResource") or {}
        target = source.get("target") or {}
        if m.get("type") in ("Resource", "ContainerResource") and "averageUtilization" in target:
            out.append(f"{source.get('name')}: <unknown>/{target['averageUtilization']}%")
        else:
            value = target.get("averageValue") or target.get("value") or "<unset>"
            out.append(f"<unknown>/{value}")
    return ", ".join(out) or "<none>"


def _quota(o: Obj, limits: bool) -> str:
    """A quota's REQUEST (or LIMIT) column: ``used/hard`` of each resource its *status*
    enforces, as ``printResourceQuota`` prints them (blank until a quota controller has
    written ``status.hard``)."""
    hard, used = _get(o, "status", "hard") or {}, _get(o, "status", "used") or {}
    return ", ".join(
        f"{name}: {used.get(name, '0')}/{hard[name]}"
        for name in sorted(hard)
        if name.startswith("limits.") == limits
    )


def _csr_condition(o: Obj) -> str:
    """A CertificateSigningRequest's CONDITION: Denied, Approved or Pending, then Failed
    and Issued (``Approved,Issued``), as kube-apiserver's printer words it."""
    types = {c.get("type") for c in _get(o, "status", "conditions") or ()}
    text = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        text += ",Failed"
    return text + (",Issued" if _get(o, "status", "certificate") else "")


def _replication_controller(o: Obj) -> list[Any]:
    row = _replicaset(o)
    row[-1] = _labels(_get(o, "spec", "selector"))  # a map of labels, not a LabelSelector
    return row


def _labels(labels: Any) -> str:
    """A label map as ``labels.FormatLabels`` writes it (``<none>`` when empty)."""
    items = sorted(labels.items()) if isinstance(labels, dict) else []
    return ",".join(f"{k}={v}" for k, v in items) or "<none>"


#: the short forms of the access modes, in the order kube-apiserver's printer lists them
_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _persistent_volume(o: Obj) -> list[Any]:
    spec, meta = o.get("spec") or {}, _meta(o)
    modes = spec.get("accessModes") or ()
    claim = spec.get("claimRef")
    storage_class = (meta.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    return [
        meta.get("name"),
        str(_get(spec, "capacity", "storage") or "0"),
        ",".join(short for mode, short in _ACCESS_MODES if mode in modes),
        spec.get("persistentVolumeReclaimPolicy", ""),
        "Terminating" if meta.get("deletionTimestamp") else _get(o, "status", "phase") or "",
        f"{claim.get('namespace', '')}/{claim.get('name', '')}" if isinstance(claim, dict) else "",
        storage_class or spec.get("storageClassName", ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        _get(o, "status", "reason") or "",
        _age(meta.get("creationTimestamp")),
        spec.get("volumeMode") or "<unset>",
    ]


def _persistent_volume_claim(o: Obj) -> list[Any]:
    """printPersistentVolumeClaim: capacity and access modes only once bound to a volume."""
    spec, meta = o.get("spec") or {}, _meta(o)
    volume = spec.get("volumeName") or ""
    modes = _get(o, "status", "accessModes") or ()
    storage_class = (meta.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    return [
        meta.get("name"),
        "Terminating" if meta.get("deletionTimestamp") else _get(o, "status", "phase") or "",
        volume,
        str(_get(o, "status", "capacity", "storage") or "0") if volume else "",
        ",".join(short for mode, short in _ACCESS_MODES if mode in modes) if volume else "",
        storage_class or spec.get("storageClassName") or "",
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(meta.get("creationTimestamp")),
        spec.get("volumeMode") or "<unset>",
    ]


_DEFAULT_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _storage_class(o: Obj) -> list[Any]:
    meta = _meta(o)
    annotations = meta.get("annotations") or {}
    default = any(annotations.get(a) == "true" for a in _DEFAULT_CLASS)
    return [
        f"{meta.get('name')} (default)" if default else meta.get("name"),
        o.get("provisioner", ""),
        o.get("reclaimPolicy") or "Delete",
        o.get("volumeBindingMode") or "Immediate",
        bool(o.get("allowVolumeExpansion")),
        _age(meta.get("creationTimestamp")),
    ]


def _csi_driver(o: Obj) -> list[Any]:
    spec = o.get("spec") or {}
    tokens = spec.get("tokenRequests")
    return [
        _meta(o).get("name"),
        spec.get("attachRequired") is not False,
        bool(spec.get("podInfoOnMount")),
        bool(spec.get("storageCapacity")),
        "<unset>"
        if tokens is None
        else ",".join(str(r.get("audience", "")) for r in tokens if isinstance(r, dict)),
        bool(spec.get("requiresRepublish")),
        ",".join(spec.get("volumeLifecycleModes") or ()) or "<none>",
        _age(_meta(o).get("creationTimestamp")),
    ]


def _ingress_class_parameters(o: Obj) -> str:
    params = _get(o, "spec", "parameters")
    if not isinstance(params, dict):
        return "<none>"
    group = f".{params['apiGroup']}" if params.get("apiGroup") else ""
    return f"{params.get('kind', '')}{group}/{params.get('name', '')}"


def _controller_of(o: Obj) -> str:
    """``kind.group/name`` of the object's controller, as ``FormatResourceName`` writes it."""
    for ref in _meta(o).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = f"{ref.get('kind', '')}.{group}" if group else str(ref.get("kind", ""))
            return f"{kind.lower()}/{ref.get('name', '')}"
    return "<none>"


def _param_kind(o: Obj) -> str:
    kind = _get(o, "spec", "paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def _param_ref(o: Obj) -> str:
    ref = _get(o, "spec", "paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    name = ref.get("name") or ("*" if ref.get("selector") is not None else "")
    return f"{ref['namespace']}/{name}" if ref.get("namespace") else f"*/{name}"


def _endpoints(o: Obj) -> list[str]:
    """``formatEndpoints``: each port's ``host:port`` per subset (IPs alone without ports)."""
    out: list[str] = []
    for sub in o.get("subsets") or ():
        ips = [str(a.get("ip")) for a in sub.get("addresses") or ()]
        ports = sub.get("ports") or ()
        if not ports:
            out += ips
        for p in ports:
            out += [
                f"[{ip}]:{p.get('port')}" if ":" in ip else f"{ip}:{p.get('port')}" for ip in ips
            ]
    return out


def _first_three(items: list[str]) -> str:
    """printers.go's lists of ports and addresses: the first three, then ``+ N more...``."""
    if len(items) > 3:
        return f"{','.join(items[:3])} + {len(items) - 3} more..."
    return ",".join(items)


def _simple(*extra: tuple[Column, Callable[[Obj], Any]]) -> Printer:
    cols = [_NAME, *(c for c, _ in extra), _AGE]
    fns = [f for _, f in extra]

    def cells(o: Obj) -> list[Any]:
        return [
            _meta(o).get("name"),
            *(f(o) for f in fns),
            _age(_meta(o).get("creationTimestamp")),
        ]

    return cols, cells


def _created_at(o: Obj) -> str:
    """The default table convertor's CREATED AT: the creationTimestamp in RFC 3339, UTC."""
    ts = _meta(o).get("creationTimestamp")
    if not isinstance(ts, str) or not ts:
        return "0001-01-01T00:00:00Z"  # a zero metav1.Time, as Go formats it
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return ts


#: ``rest.NewDefaultTableConvertor``'s table, for the kinds printers.go has no printer for
#: (CustomResourceDefinitions, Roles, ClusterRoles): ``NAME CREATED AT``
_CREATED_AT: Printer = (
    [
        _NAME,
        _col(
            "Created At",
            "date",
            description="CreationTimestamp is a timestamp representing the server time when "
            "this object was created.",
        ),
    ],
    lambda o: [_meta(o).get("name"), _created_at(o)],
)


def _ingress_hosts(o: Obj) -> str:
    """``formatHosts``: the first three rules' hosts (``*`` when none has one)."""
    rules = [r for r in _get(o, "spec", "rules") or () if isinstance(r, dict)]
    hosts: list[str] = []
    more = False
    for r in rules:
        if len(hosts) == 3:
            more = True
        if not more and r.get("host"):
            hosts.append(str(r["host"]))
    if not hosts:
        return "*"
    return ",".join(hosts) + (f" + {len(rules) - 3} more..." if more else "")


def _ingress(o: Obj) -> list[Any]:
    spec = o.get("spec") or {}
    addresses = sorted(
        {
            str(i.get("ip") or i.get("hostname"))
            for i in _get(o, "status", "loadBalancer", "ingress") or ()
            if isinstance(i, dict) and (i.get("ip") or i.get("hostname"))
        }
    )
    return [
        _meta(o).get("name"),
        spec.get("ingressClassName") or "<none>",
        _ingress_hosts(o),
        ",".join(addresses),
        "80, 443" if spec.get("tls") else "80",
        _age(_meta(o).get("creationTimestamp")),
    ]


def _role_binding(o: Obj) -> list[Any]:
    """printRoleBinding: ``Kind/name`` of the role, then (wide) users, groups and
    ``namespace/name`` of the service accounts, as ``rbac.SubjectsStrings`` lists them."""
    ref = o.get("roleRef") or {}
    kinds: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for s in o.get("subjects") or ():
        if isinstance(s, dict) and s.get("kind") in kinds:
            name = str(s.get("name", ""))
            if s["kind"] == "ServiceAccount":
                name = f"{s.get('namespace', '')}/{name}"
            kinds[s["kind"]].append(name)
    return [
        _meta(o).get("name"),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(_meta(o).get("creationTimestamp")),
        ", ".join(kinds["User"]),
        ", ".join(kinds["Group"]),
        ", ".join(kinds["ServiceAccount"]),
    ]


def _role_binding_columns(kind: str) -> list[Column]:
    return [
        _NAME,
        _col(
            "Role",
            description="RoleRef can only reference a ClusterRole in the global namespace."
            if kind == "clusterRoleBinding"
            else "RoleRef can reference a Role in the current "
            "namespace or a ClusterRole in the global namespace.",
        ),
        _AGE,
        _col("Users", priority=_WIDE, description=f"Users in the {kind}"),
        _col("Groups", priority=_WIDE, description=f"Groups in the {kind}"),
        _col("ServiceAccounts", priority=_WIDE, description=f"ServiceAccounts in the {kind}"),
    ]


_WEBHOOKS = (
    _col(
        "Webhooks",
        "integer",
        description="Webhooks indicates the number of webhooks registered in this configuration",
    ),
    lambda o: len(o.get("webhooks") or ()),
)


_WIDE = 1
#: the wide columns of workloads with a pod template (`kubectl get -o wide`): containers,
#: images and (all but StatefulSets) the selector
_TEMPLATE_WIDE = (
    _col("Containers", priority=_WIDE, description="Names of each container in the template."),
    _col("Images", priority=_WIDE, description="Images referenced by each container."),
    _col("Selector", priority=_WIDE, description="Label query over pods."),
)
#: the columns of ReplicaSets and ReplicationControllers
_REPLICATED = [
    _NAME,
    _col("Desired", "integer", description="Number of desired pods."),
    _col("Current", "integer", description="Number of actual replicas."),
    _col("Ready", "integer", description="Number of ready replicas."),
    _AGE,
    *_TEMPLATE_WIDE,
]
_EVENT_COLUMNS: list[Column] = [
    _col("Last Seen", description="The time the event was last seen."),
    _col("Type", description="Type of this event (Normal, Warning)."),
    _col("Reason", description="Why the action was taken."),
    _col("Object", description="The object this event is about."),
    _col("Subobject", priority=_WIDE, description="The subobject this event is about."),
    _col("Source", priority=_WIDE, description="The component reporting this event."),
    _col(
        "Message",
        description="A human-readable description of the status of this operation.",
    ),
    _col("First Seen", priority=_WIDE, description="The time the event was first seen."),
    _col(
        "Count",
        priority=_WIDE,
        description="The number of times this event has occurred.",
    ),
    _col(
        "Name",
        fmt="name",
        priority=_WIDE,
        description="Name must be unique within a namespace.",
    ),
]
_PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "pods"): (
        [
            _NAME,
            _col("Ready", description="The aggregate readiness state of this pod."),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col("Restarts", description="The number of times the containers were restarted."),
            _AGE,
            _col("IP", priority=_WIDE, description="IP address allocated to the pod."),
            _col("Node", priority=_WIDE, description="Name of the node the pod runs on."),
            _col(
                "Nominated Node", priority=_WIDE, description="The node nominated by the scheduler."
            ),
            _col("Readiness Gates", priority=_WIDE, description="The pod's readiness gates."),
        ],
        _pod,
    ),
    ("apps", "deployments"): (
        [
            _NAME,
            _col("Ready", description="Number of the pod with ready state"),
            _col(
                "Up-to-date",
                description="Total number of non-terminated pods "
                "targeted by this deployment that have the desired template spec.",
            ),
            _col("Available", description="Total number of available pods."),
            _AGE,
            *_TEMPLATE_WIDE,
        ],
        _deployment,
    ),
    ("apps", "replicasets"): (
        _REPLICATED,
        _replicaset,
    ),
    ("apps", "statefulsets"): (
        [
            _NAME,
            _col("Ready", description="Number of the pod with ready state"),
            _AGE,
            *_TEMPLATE_WIDE[:2],
        ],
        _statefulset,
    ),
    ("apps", "daemonsets"): (
        [
            _NAME,
            _col("Desired", "integer", description="Nodes that should run the daemon pod."),
            _col("Current", "integer", description="Nodes running at least one daemon pod."),
            _col("Ready", "integer", description="Nodes with a ready daemon pod."),
            _col("Up-to-date", "integer", description="Nodes running the updated daemon pod."),
            _col("Available", "integer", description="Nodes with an available daemon pod."),
            _col("Node Selector", description="The node selector of the pod template."),
            _AGE,
            *_TEMPLATE_WIDE,
        ],
        _daemonset,
    ),
    ("", "replicationcontrollers"): (
        _REPLICATED,
        _replication_controller,
    ),
    ("", "podtemplates"): (
        [
            _NAME,
            _col("Containers", description="Names of each container in the template."),
            _col("Images", description="Images referenced by each container in the template."),
            _col("Pod Labels", description="The labels for the pod template."),
        ],
        lambda o: [
            _meta(o).get("name"),
            *_containers(_get(o, "template", "spec")),
            _labels(_get(o, "template", "metadata", "labels")),
        ],
    ),
    ("apps", "controllerrevisions"): _simple(
        (_col("Controller", description="Controller of the object"), _controller_of),
        (
            _col("Revision", description="Revision indicates the revision of the state."),
            lambda o: _int(o.get("revision")),
        ),
    ),
    ("batch", "jobs"): (
        [
            _NAME,
            _col("Status", description="Status of the job."),
            _col("Completions", description="The desired number of successfully finished pods."),
            _col("Duration", description="Time required to complete the job."),
            _AGE,
            *_TEMPLATE_WIDE,
        ],
        _job,
    ),
    ("batch", "cronjobs"): (
        [
            _NAME,
            _col("Schedule", description="The schedule in Cron format."),
            _col("Timezone", description="The time zone of the schedule."),
            _col("Suspend", "boolean", description="Whether subsequent runs are suspended."),
            _col("Active", "integer", description="Number of running jobs."),
            _col("Last Schedule", description="When the job was last scheduled."),
            _AGE,
            *_TEMPLATE_WIDE,
        ],
        _cronjob,
    ),
    ("", "services"): (
        [
            _NAME,
            _col("Type", description="The type of the service."),
            _col("Cluster-IP", description="The IP address of the service."),
            _col("External-IP", description="External IPs of the service."),
            _col("Port(s)", description="The ports the service exposes."),
            _AGE,
            _col(
                "Selector", priority=_WIDE, description="Route traffic to pods with these labels."
            ),
        ],
        _service,
    ),
    ("", "configmaps"): _simple(
        (
            _col("Data", description="The number of keys in data and binaryData."),
            _data_count,
        )
    ),
    ("", "secrets"): _simple(
        (_col("Type", description="The type of secret."), lambda o: o.get("type", "")),
        (_col("Data", description="The number of keys in data."), _data_count),
    ),
    ("", "namespaces"): _simple(
        (
            _col("Status", description="The status of the namespace."),
            lambda o: _get(o, "status", "phase") or "",
        )
    ),
    ("", "serviceaccounts"): _simple(
        (
            _col("Secrets", description="The number of secrets."),
            lambda o: len(o.get("secrets") or ()),
        )
    ),
    ("", "endpoints"): _simple(
        (
            _col("Endpoints", description="Endpoints of the service."),
            lambda o: _first_three(_endpoints(o)) or "<none>",
        )
    ),
    ("discovery.k8s.io", "endpointslices"): _simple(
        (
            _col("AddressType", description="The type of address carried by this slice."),
            lambda o: o.get("addressType") or "",
        ),
        (
            _col("Ports", description="The network ports exposed by each endpoint."),
            lambda o: (
                _first_three(
                    [
                        str(p["port"]) if p.get("port") is not None else p.get("name") or "*"
                        for p in o.get("ports") or ()
                        if isinstance(p, dict)
                    ]
                )
                or "<unset>"
            ),
        ),
        (
            _col("Endpoints", description="The addresses of the endpoints in this slice."),
            lambda o: (
                _first_three(
                    [a for e in o.get("endpoints") or () for a in e.get("addresses") or ()]
                )
                or "<unset>"
            ),
        ),
    ),
    ("", "persistentvolumeclaims"): (
        [
            _NAME,
            _col("Status", description="The phase of the claim."),
            _col("Volume", description="The binding reference to the bound volume."),
            _col("Capacity", description="The capacity of the bound volume."),
            _col("Access Modes", description="The access modes of the bound volume."),
            _col("StorageClass", description="StorageClass of the pvc"),
            _col("VolumeAttributesClass", description="VolumeAttributesClass of the pvc"),
            _AGE,
            _col("VolumeMode", priority=_WIDE, description="Filesystem or Block."),
        ],
        _persistent_volume_claim,
    ),
    ("autoscaling", "horizontalpodautoscalers"): _simple(
        (
            _col("Reference", description="The workload this autoscaler scales."),
            lambda o: (
                f"{_get(o, 'spec', 'scaleTargetRef', 'kind')}/"
                f"{_get(o, 'spec', 'scaleTargetRef', 'name')}"
            ),
        ),
        (_col("Targets", description="The metrics and their targets."), _hpa_targets),
        (
            _col("MinPods", description="The lower limit of the replicas."),
            lambda o: _get(o, "spec", "minReplicas") or "<unset>",
        ),
        (
            _col("MaxPods", description="The upper limit of the replicas."),
            lambda o: _int(_get(o, "spec", "maxReplicas")),
        ),
        (
            _col("Replicas", description="The current number of replicas."),
            lambda o: _int(_get(o, "status", "currentReplicas")),
        ),
    ),
    ("policy", "poddisruptionbudgets"): _simple(
        (
            _col("Min Available", description="The pods that must stay available."),
            lambda o: _int_or_na(_get(o, "spec", "minAvailable")),
        ),
        (
            _col("Max Unavailable", description="The pods that may be unavailable."),
            lambda o: _int_or_na(_get(o, "spec", "maxUnavailable")),
        ),
        (
            _col("Allowed Disruptions", "integer", description="Pod disruptions allowed now."),
            lambda o: _int(_get(o, "status", "disruptionsAllowed")),
        ),
    ),
    ("certificates.k8s.io", "certificatesigningrequests"): (
        [
            _NAME,
            _AGE,
            _col("SignerName", description="The signer the request is for."),
            _col("Requestor", description="Who created the request."),
            _col("RequestedDuration", description="The validity the request asks for."),
            _col("Condition", description="Approved, denied or pending; failed; issued."),
        ],
        lambda o: [
            _meta(o).get("name"),
            _age(_meta(o).get("creationTimestamp")),
            _get(o, "spec", "signerName") or "<none>",
            _get(o, "spec", "username") or "",
            human_duration(seconds)
            if isinstance(seconds := _get(o, "spec", "expirationSeconds"), int)
            else "<none>",
            _csr_condition(o),
        ],
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        [
            _NAME,
            _col("Value", "integer", description="The priority of the pods of this class."),
            _col("Global-Default", "boolean", description="Whether pods without a class get it."),
            _AGE,
            _col("PreemptionPolicy", description="Whether its pods may preempt others."),
        ],
        lambda o: [
            _meta(o).get("name"),
            _int(o.get("value")),
            bool(o.get("globalDefault")),
            _age(_meta(o).get("creationTimestamp")),
            o.get("preemptionPolicy", ""),
        ],
    ),
    ("", "resourcequotas"): (
        [
            _NAME,
            _AGE,
            _col("Request", description="The requests of the quota: used/hard."),
            _col("Limit", description="The limits of the quota: used/hard."),
        ],
        lambda o: [
            _meta(o).get("name"),
            _age(_meta(o).get("creationTimestamp")),
            _quota(o, limits=False),
            _quota(o, limits=True),
        ],
    ),
    ("", "limitranges"): (
        [_NAME, _col("Created At", "date", description="When the limit range was created.")],
        lambda o: [_meta(o).get("name"), _meta(o).get("creationTimestamp", "")],
    ),
    ("", "persistentvolumes"): (
        [
            _NAME,
            _col("Capacity", description="The capacity of the volume."),
            _col("Access Modes", description="The ways the volume can be mounted."),
            _col("Reclaim Policy", description="What happens to the volume when released."),
            _col("Status", description="The phase of the volume."),
            _col("Claim", description="The claim bound to the volume."),
            _col("StorageClass", description="StorageClass of the pv"),
            _col("VolumeAttributesClass", description="VolumeAttributesClass of the pv"),
            _col("Reason", description="Why the volume is in its phase."),
            _AGE,
            _col("VolumeMode", priority=_WIDE, description="Filesystem or Block."),
        ],
        _persistent_volume,
    ),
    ("storage.k8s.io", "storageclasses"): (
        [
            _NAME,
            _col("Provisioner", description="The provisioner of the class's volumes."),
            _col("ReclaimPolicy", description="The reclaim policy of its volumes."),
            _col("VolumeBindingMode", description="When its claims are bound."),
            _col("AllowVolumeExpansion", description="Whether its volumes can grow."),
            _AGE,
        ],
        _storage_class,
    ),
    ("storage.k8s.io", "csidrivers"): (
        [
            _NAME,
            _col("AttachRequired", "boolean", description="Whether volumes need attaching."),
            _col("PodInfoOnMount", "boolean", description="Whether mounts get pod info."),
            _col("StorageCapacity", "boolean", description="Whether capacity is considered."),
            _col("TokenRequests", description="The audiences of the tokens it gets."),
            _col("RequiresRepublish", "boolean", description="Whether mounts are republished."),
            _col("Modes", description="The volume lifecycle modes it supports."),
            _AGE,
        ],
        _csi_driver,
    ),
    ("storage.k8s.io", "csinodes"): _simple(
        (
            _col(
                "Drivers",
                "integer",
                description="Drivers indicates the number of CSI drivers registered on the node",
            ),
            lambda o: len(_get(o, "spec", "drivers") or ()),
        )
    ),
    ("storage.k8s.io", "volumeattachments"): _simple(
        (
            _col("Attacher", fmt="name", description="The driver that attaches the volume."),
            lambda o: _get(o, "spec", "attacher") or "",
        ),
        (
            _col("PV", description="The persistent volume attached."),
            lambda o: _get(o, "spec", "source", "persistentVolumeName") or "",
        ),
        (
            _col("Node", description="The node the volume is attached to."),
            lambda o: _get(o, "spec", "nodeName") or "",
        ),
        (
            _col("Attached", "boolean", description="Whether the volume is attached."),
            lambda o: bool(_get(o, "status", "attached")),
        ),
    ),
    ("networking.k8s.io", "networkpolicies"): _simple(
        (
            _col("Pod-Selector", description="The pods the policy applies to."),
            lambda o: _selector(_get(o, "spec", "podSelector")),
        )
    ),
    ("networking.k8s.io", "ingressclasses"): _simple(
        (
            _col(
                "Controller", description="Controller that is responsible for handling this class"
            ),
            lambda o: _get(o, "spec", "controller") or "",
        ),
        (
            _col("Parameters", description="A reference to a resource with additional parameters"),
            _ingress_class_parameters,
        ),
    ),
    ("node.k8s.io", "runtimeclasses"): _simple(
        (
            _col("Handler", description="The CRI handler of the class."),
            lambda o: o.get("handler", ""),
        )
    ),
    ("coordination.k8s.io", "leases"): _simple(
        (
            _col("Holder", description="The holder of the lease."),
            lambda o: _get(o, "spec", "holderIdentity") or "",
        )
    ),
    ("", "nodes"): (
        [
            _NAME,
            _col("Status", description="The status of the node."),
            _col("Roles", description="The roles of the node."),
            _AGE,
            _col("Version", description="Kubelet version."),
            _col("Internal-IP", priority=_WIDE, description="The internal IP of the node."),
            _col("External-IP", priority=_WIDE, description="The external IP of the node."),
            _col("OS-Image", priority=_WIDE, description="OS image reported by the node."),
            _col("Kernel-Version", priority=_WIDE, description="Kernel version of the node."),
            _col("Container-Runtime", priority=_WIDE, description="Container runtime version."),
        ],
        _node,
    ),
    ("", "events"): (_EVENT_COLUMNS, _core_event),
    # events.k8s.io is served from the core events' storage: the same printer
    ("events.k8s.io", "events"): (_EVENT_COLUMNS, _core_event),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): _simple(
        (
            _col(
                "Validations",
                "integer",
                description="Validations indicates the number of validation rules defined in "
                "this configuration",
            ),
            lambda o: len(_get(o, "spec", "validations") or ()),
        ),
        (
            _col(
                "ParamKind",
                description="ParamKind specifies the kind of resources used to parameterize "
                "this policy",
            ),
            _param_kind,
        ),
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): _simple(
        (
            _col(
                "PolicyName",
                description="PolicyName indicates the policy definition which the policy "
                "binding binded to",
            ),
            lambda o: _get(o, "spec", "policyName") or "",
        ),
        (
            _col(
                "ParamRef",
                description="ParamRef indicates the param resource which sets the configration "
                "param",
            ),
            _param_ref,
        ),
    ),
    ("networking.k8s.io", "ingresses"): (
        [
            _NAME,
            _col(
                "Class",
                description="The name of the IngressClass resource that should be used for "
                "additional configuration",
            ),
            _col(
                "Hosts",
                description="Hosts that incoming requests are matched against before the "
                "ingress rule",
            ),
            _col(
                "Address",
                description="Address is a list containing ingress points for the load-balancer",
            ),
            _col("Ports", description="Ports of TLS configurations that open"),
            _AGE,
        ],
        _ingress,
    ),
    ("rbac.authorization.k8s.io", "rolebindings"): (
        _role_binding_columns("roleBinding"),
        _role_binding,
    ),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): (
        _role_binding_columns("clusterRoleBinding"),
        _role_binding,
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _simple(_WEBHOOKS),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _simple(_WEBHOOKS),
}
_DEFAULT: Printer = _CREATED_AT


def _cell(col: dict[str, Any], obj: Obj) -> Any:
    """A printer column's cell as apiextensions' ``tableconvertor`` makes it: the first value
    the column's JSONPath finds (``results[0][0]``), a ``string`` column's printed as
    ``jsonpath`` prints it, another's as ``cellForJSONValue`` converts it (none when it is
    not of the column's type)."""
    try:
        values = find(obj, str(col.get("jsonPath", "")))
    except JSONPathError:
        return None
    if not values or values[0] is None:
        return None
    value = values[0]
    type_ = col.get("type")
    if type_ == "string":
        return _printed(value)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if type_ == "integer":
        return int(value) if number else None  # a float64 truncated, as int64(f)
    if type_ == "number":
        return float(value) if number else None
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    if type_ == "date":
        return _date_cell(value) if isinstance(value, str) else None
    return None


def _printed(value: Any) -> str:
    """``value`` as client-go's ``jsonpath`` ``PrintResults`` prints it: a string as it is, a
    map or a list as compact JSON, a number or a boolean as Go's ``%v``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float_v(value)
    if isinstance(value, int):
        return str(value)
    return go_json(value).removesuffix("\n")


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def _date_cell(text: str) -> str:
    """A ``date`` column's cell: the age of an RFC 3339 time, ``<unknown>`` for none (""),
    ``<invalid>`` for what is not one (``metav1.Time.UnmarshalQueryParameter``)."""
    if text in ("", "null"):
        return "<unknown>"
    m = _RFC3339.fullmatch(text)
    if m is None:
        return "<invalid>"
    try:
        year, month, day, hour, minute, second = (int(m[i]) for i in range(1, 7))
        when = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    except ValueError:
        return "<invalid>"
    zone = m[8]
    if zone != "Z":
        minutes = int(zone[1:3]) * 60 + int(zone[4:6])
        when -= datetime.timedelta(minutes=minutes if zone[0] == "+" else -minutes)
    return human_duration(time.time() - when.timestamp())


def _crd_printer(res: ServedResource) -> Printer:
    declared = [c for c in res.printer_columns if isinstance(c, dict) and c.get("name")]
    if not declared:
        declared = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    cols: list[Column] = [_NAME]
    for c in declared:
        cols.append(
            (
                str(c["name"]),
                str(c.get("type") or "string"),
                str(c.get("format") or ""),
                _int(c.get("priority")),
                str(c.get("description") or ""),
            )
        )

    def cells(o: Obj) -> list[Any]:
        return [_meta(o).get("name"), *(_cell(c, o) for c in declared)]

    return cols, cells


def _printer(res: ServedResource) -> Printer:
    if res.custom:
        return _crd_printer(res)
    return _PRINTERS.get(res.key, _DEFAULT)


def include_policy(query: dict[str, str]) -> str:
    """The ``includeObject`` of a request (400 for an unknown one)."""
    value = query.get("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise StatusError.bad_request(
            f'includeObject: Unsupported value: "{value}": supported values: '
            + ", ".join(f'"{v}"' for v in INCLUDE_OBJECT)
        )
    return value


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "Object":
        return obj
    if include == "None":
        return None
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


#: the columns of a ``Scale`` (kube's printers for built-in kinds, apiextensions'
#: ``getScaleColumnsForVersion`` for a custom resource's ``/scale``)
_SCALE_COLUMNS: tuple[Column, ...] = (
    _NAME,
    _col(
        "Desired",
        "integer",
        description="replicas is the desired number of instances for the scaled object.",
    ),
    _col(
        "Available",
        "integer",
        description="actual number of observed instances of the scaled object.",
    ),
    _AGE,
)


def _definitions(cols: Iterable[Column]) -> list[Obj]:
    """A Table's ``columnDefinitions``."""
    return [
        {"name": n, "type": t, "format": f, "description": d, "priority": p}
        for n, t, f, p, d in cols
    ]


def scale_table(scale: Obj, *, api_version: str, include: str) -> Obj:
    """A ``Table`` of one ``Scale`` (``kubectl get ... --subresource=scale``)."""
    meta = _meta(scale)
    cells = [
        meta.get("name"),
        _int(_get(scale, "spec", "replicas")),
        _int(_get(scale, "status", "replicas")),
        _age(meta.get("creationTimestamp")),
    ]
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
        "columnDefinitions": _definitions(_SCALE_COLUMNS),
        "rows": [{"cells": cells, "object": _row_object(scale, include)}],
    }


def to_table(
    res: ServedResource,
    objs: Iterable[Obj],
    *,
    api_version: str,
    include: str,
    list_meta: dict[str, Any] | None = None,
    headers: bool = True,
) -> Obj:
    """A ``Table`` of ``objs``; ``headers=False`` leaves out the column definitions (watch events after the first)."""
    cols, cells = _printer(res)
    rows = []
    for o in objs:
        row: dict[str, Any] = {"cells": cells(o)}
        obj = _row_object(o, include)
        row["object"] = obj
        rows.append(row)
    out: Obj = {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta or {},
        "columnDefinitions": _definitions(cols) if headers else None,
        "rows": rows,
    }
    return out
