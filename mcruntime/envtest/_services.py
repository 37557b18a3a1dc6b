"""What kube-apiserver's Service registry fills in and keeps: IP families and node ports.

On create (``pkg/registry/core/service/storage/alloc.go``, a single-stack IPv4
cluster), a Service that needs a cluster IP (every type but ExternalName) gets
``ipFamilyPolicy: SingleStack`` and ``ipFamilies: [IPv4]``; a NodePort Service, and a
LoadBalancer one unless ``allocateLoadBalancerNodePorts: false``, gets a ``nodePort``
from 30000-32767 for each port that names none (the dynamic allocations come from
the upper band, 30086-32767, as kube-apiserver's static subrange leaves the lower one
to ports asked for by number); a LoadBalancer Service with ``externalTrafficPolicy:
Local`` gets a ``healthCheckNodePort``. A port asked for outside the range, or taken
by another Service, is a 422, as is a ``nodePort`` on a ClusterIP Service.

On update, as ``patchAllocatedValues`` and ``dropTypeDependentFields`` do: a cluster
IP, node port or health check port the update leaves out (or empty) keeps its value,
so a controller that re-renders a Service does not lose them; a Service that turns
into a type that needs none loses those it did not change.
"""

from __future__ import annotations

import random
from typing import Any

from mcruntime.envtest._gofmt import go_strings
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore

__all__ = ["externally_accessible", "prepare_create", "prepare_update", "with_allocation"]

SERVICES = ("", "services")
#: a Service's cluster IPs and their families: allocated once, kept by updates
_CLUSTER_IP_FIELDS = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")
_RANGE = range(30000, 32768)
#: kube-apiserver's static subrange: min(max(16, size/32), 128) ports at the bottom
_DYNAMIC = range(30000 + min(max(16, len(_RANGE) // 32), 128), 32768)
_Cause = tuple[str, str, str]


def _ports(spec: dict[str, Any]) -> list[dict[str, Any]]:
    ports = spec.get("ports")
    if not isinstance(ports, list):
        return []
    spec["ports"] = ports = [dict(p) if isinstance(p, dict) else p for p in ports]
    return [p for p in ports if isinstance(p, dict)]


def _needs_node_ports(spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    return kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def _port_key(port: dict[str, Any]) -> tuple[Any, str]:
    """How ``patchAllocatedValues`` matches a port with the old one: number and protocol."""
    return port.get("port"), str(port.get("protocol") or "TCP")


def externally_accessible(spec: dict[str, Any]) -> bool:
    """``ExternallyAccessible``: a NodePort or LoadBalancer Service, or one with external IPs."""
    kind = spec.get("type")
    return kind in ("NodePort", "LoadBalancer") or (
        kind == "ClusterIP" and bool(spec.get("externalIPs"))
    )


def _needs_health_check_port(spec: dict[str, Any]) -> bool:
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _used(store: ObjectStore, ns: str, name: str) -> set[int]:
    """The node ports every other Service holds (node ports are cluster-wide)."""
    used: set[int] = set()
    for svc in store.iter(SERVICES, None):
        meta = svc.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == (ns, name):
            continue
        spec = svc.get("spec") or {}
        used.update(p["nodePort"] for p in _ports(dict(spec)) if isinstance(p.get("nodePort"), int))
        if isinstance(spec.get("healthCheckNodePort"), int):
            used.add(spec["healthCheckNodePort"])
    return used


def _allocate(used: set[int]) -> int:
    free = [p for p in _DYNAMIC if p not in used] or [p for p in _RANGE if p not in used]
    if not free:
        raise StatusError(500, "InternalError", "Internal error occurred: range is full")
    port = random.choice(free)
    used.add(port)
    return port


def _asked(value: int, at: str, used: set[int], causes: list[_Cause]) -> None:
    """A port asked for by number: in the range and not taken (else a cause)."""
    if value not in _RANGE:
        causes.append(
            (
                "FieldValueInvalid",
                at,
                f"{at}: Invalid value: {value}: provided port is not in the valid range. "
                f"The range of valid ports is {_RANGE.start}-{_RANGE.stop - 1}",
            )
        )
    elif value in used:
        causes.append(
            (
                "FieldValueInvalid",
                at,
                f"{at}: Invalid value: {value}: provided port is already allocated",
            )
        )
    used.add(value)


def _node_ports(
    store: ObjectStore, ns: str, name: str, spec: dict[str, Any], kept: set[int]
) -> None:
    """Check the node ports ``spec`` asks for and allocate the missing ones (``kept``: the
    ones this Service held already, not checked again); 422 naming each fault."""
    causes: list[_Cause] = []
    used = _used(store, ns, name)
    ports = _ports(spec)
    if _needs_node_ports(spec):
        for i, port in enumerate(ports):
            value = port.get("nodePort")
            if isinstance(value, int) and value:
                if value not in kept:
                    _asked(value, f"spec.ports[{i}].nodePort", used, causes)
                else:
                    used.add(value)
        for port in ports:
            if not port.get("nodePort"):
                port["nodePort"] = _allocate(used)
    else:
        for i, port in enumerate(ports):
            if port.get("nodePort"):
                at = f"spec.ports[{i}].nodePort"
                causes.append(
                    (
                        "FieldValueForbidden",
                        at,
                        f"{at}: Forbidden: may not be used when `type` is '{spec.get('type')}'",
                    )
                )
    if _needs_health_check_port(spec):
        value = spec.get("healthCheckNodePort")
        if isinstance(value, int) and value:
            if value not in kept:
                _asked(value, "spec.healthCheckNodePort", used, causes)
        else:
            spec["healthCheckNodePort"] = _allocate(used)
    if causes:
        raise StatusError.invalid_causes("Service", name, "", causes)


def _same_cluster_ips(name: str, spec: dict[str, Any], old: dict[str, Any]) -> None:
    """A cluster IP, once set, stays (``normalizeClusterIPs`` then
    ``validateUpgradeDowngradeClusterIPs``: 422 ``may not change once set``)."""
    if spec.get("clusterIP") != old.get("clusterIP") and spec.get("clusterIPs") == old.get(
        "clusterIPs"
    ):
        spec["clusterIPs"] = [spec.get("clusterIP")]  # clusterIP changed alone
    before, after = old.get("clusterIPs") or [], spec.get("clusterIPs") or []
    if len(before) != len(after):
        return
    causes: list[_Cause] = []
    for i, ip in enumerate(before):
        if ip != after[i]:
            at = f"spec.clusterIPs[{i}]"
            shown = go_strings(after)
            causes.append(
                ("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: may not change once set")
            )
    if causes:
        raise StatusError.invalid_causes("Service", name, "", causes)


def _families(spec: dict[str, Any]) -> None:
    if spec.get("type") == "ExternalName":
        return
    if not spec.get("ipFamilyPolicy"):
        headless_unselected = spec.get("clusterIP") == "None" and not spec.get("selector")
        spec["ipFamilyPolicy"] = "RequireDualStack" if headless_unselected else "SingleStack"
    if not spec.get("ipFamilies"):
        spec["ipFamilies"] = ["IPv4"]


def prepare_create(store: ObjectStore, ns: str, name: str, spec: dict[str, Any]) -> None:
    """The registry's fields of a Service being created (``spec`` changed in place; the
    cluster IP is given by the caller)."""
    _families(spec)
    _node_ports(store, ns, name, spec, set())


#: what a Service's REST storage allocates on create (its node ports aside)
_ALLOCATED = (*_CLUSTER_IP_FIELDS, "healthCheckNodePort")


def with_allocation(service: dict[str, Any], allocated: dict[str, Any]) -> dict[str, Any]:
    """``service`` (a body being created) with what was allocated for it in ``allocated``
    (the same body, prepared once already): admission showed the validating webhooks that
    allocation, and kube-apiserver allocates once, so the Service is stored with it."""
    spec, done = dict(service.get("spec") or {}), allocated.get("spec") or {}
    for key in _ALLOCATED:
        if key in done and not spec.get(key):
            spec[key] = done[key]
    ports, done_ports = _ports(spec), _ports(done)
    if len(ports) == len(done_ports):
        spec["ports"] = [
            {**p, "nodePort": d["nodePort"]} if d.get("nodePort") and not p.get("nodePort") else p
            for p, d in zip(ports, done_ports, strict=True)
        ]
    return {**service, "spec": spec}


def prepare_update(
    store: ObjectStore, ns: str, name: str, spec: dict[str, Any], old: dict[str, Any]
) -> None:
    """The registry's fields of a Service being updated from ``old`` (its spec), as
    ``dropTypeDependentFields`` and ``patchAllocatedValues`` keep and drop them."""
    old_ports = [p for p in old.get("ports") or () if isinstance(p, dict)]
    ports = _ports(spec)
    same_node_ports = [p.get("nodePort") for p in ports] == [p.get("nodePort") for p in old_ports]
    if _needs_node_ports(old) and not _needs_node_ports(spec) and same_node_ports:
        for port in ports:
            port.pop("nodePort", None)
    if (
        _needs_health_check_port(old)
        and not _needs_health_check_port(spec)
        and spec.get("healthCheckNodePort") == old.get("healthCheckNodePort")
    ):
        spec.pop("healthCheckNodePort", None)
    if (
        externally_accessible(old)
        and not externally_accessible(spec)
        and spec.get("externalTrafficPolicy") == old.get("externalTrafficPolicy")
    ):
        spec.pop("externalTrafficPolicy", None)
    if (
        old.get("type") == "LoadBalancer"
        and spec.get("type") != "LoadBalancer"
        and spec.get("allocateLoadBalancerNodePorts") == old.get("allocateLoadBalancerNodePorts")
    ):
        spec.pop("allocateLoadBalancerNodePorts", None)
    if old.get("type") != "ExternalName" and spec.get("type") != "ExternalName":
        for key in _CLUSTER_IP_FIELDS:
            if not spec.get(key) and old.get(key):
                spec[key] = old[key]
        _same_cluster_ips(name, spec, old)
    elif old.get("type") != "ExternalName":  # turned ExternalName: no cluster IP any more
        for key in _CLUSTER_IP_FIELDS:
            if spec.get(key) == old.get(key):
                spec.pop(key, None)
    kept: set[int] = set()
    if _needs_node_ports(old) and _needs_node_ports(spec):
        by_port = {_port_key(p): p.get("nodePort") for p in old_ports}
        taken = {p.get("nodePort") for p in ports if p.get("nodePort")}
        for port in ports:
            if not port.get("nodePort"):
                previous = by_port.get(_port_key(port))
                if previous and previous not in taken:
                    port["nodePort"] = previous
                    taken.add(previous)
        kept = {p["nodePort"] for p in old_ports if isinstance(p.get("nodePort"), int)}
    if _needs_health_check_port(old) and _needs_health_check_port(spec):
        if not spec.get("healthCheckNodePort") and old.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old["healthCheckNodePort"]
        if isinstance(old.get("healthCheckNodePort"), int):
            kept.add(old["healthCheckNodePort"])
    _families(spec)
    _node_ports(store, ns, name, spec, kept)
