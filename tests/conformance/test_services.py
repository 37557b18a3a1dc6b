"""What kube-apiserver fills in on a Service, and keeps when a controller re-renders it
without those fields: the classic source of a Service reconciler's endless updates.
(A single-stack IPv4 cluster, as kind and k3s make by default.)"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import raises_status, to_dict, unique

pytestmark = pytest.mark.timeout(60)

NODE_PORTS = range(30000, 32768)


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}], **spec},
    }


def test_a_service_gets_the_scheme_and_registry_defaults(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    spec = to_dict(api, core.create_namespaced_service(ns, service(unique("svc"))))["spec"]
    (port,) = spec["ports"]
    assert (port["protocol"], port["targetPort"]) == ("TCP", 80)
    assert "nodePort" not in port
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert "externalTrafficPolicy" not in spec


def test_node_ports_are_allocated_for_node_port_and_load_balancer_services(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    spec = to_dict(api, core.create_namespaced_service(ns, service(unique("np"), type="NodePort")))[
        "spec"
    ]
    assert spec["ports"][0]["nodePort"] in NODE_PORTS
    assert spec["externalTrafficPolicy"] == "Cluster"
    lb = service(unique("lb"), type="LoadBalancer", externalTrafficPolicy="Local")
    spec = to_dict(api, core.create_namespaced_service(ns, lb))["spec"]
    assert spec["allocateLoadBalancerNodePorts"] is True
    assert spec["ports"][0]["nodePort"] in NODE_PORTS
    assert spec["healthCheckNodePort"] in NODE_PORTS
    no_ports = service(unique("lb"), type="LoadBalancer", allocateLoadBalancerNodePorts=False)
    spec = to_dict(api, core.create_namespaced_service(ns, no_ports))["spec"]
    assert "nodePort" not in spec["ports"][0]


def test_a_re_rendered_service_keeps_its_cluster_ip_and_node_ports(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("svc")
    created = to_dict(api, core.create_namespaced_service(ns, service(name, type="NodePort")))
    # what a controller renders again: no clusterIP (or an empty one), no nodePort
    again = service(name, type="NodePort", clusterIP="")
    again["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    updated = to_dict(api, core.replace_namespaced_service(name, ns, again))
    assert updated["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    assert updated["spec"]["ports"][0]["nodePort"] == created["spec"]["ports"][0]["nodePort"]
    assert updated["spec"] == created["spec"]


def test_a_cluster_ip_may_not_change_once_set(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("svc")
    created = to_dict(api, core.create_namespaced_service(ns, service(name)))
    other = "10.96.250.250" if created["spec"]["clusterIP"] != "10.96.250.250" else "10.96.250.251"
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_service(name, ns, {"spec": {"clusterIP": other}})
    assert status["message"] == (
        f'Service "{name}" is invalid: spec.clusterIPs[0]: Invalid value: '
        f'[]string{{"{other}"}}: may not change once set'
    )


def test_a_node_port_taken_or_out_of_range_or_on_a_cluster_ip_service_is_refused(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    first = to_dict(api, core.create_namespaced_service(ns, service(unique("np"), type="NodePort")))
    taken = first["spec"]["ports"][0]["nodePort"]
    name = unique("np")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(
            ns, service(name, type="NodePort", ports=[{"port": 80, "nodePort": taken}])
        )
    assert status["message"] == (
        f'Service "{name}" is invalid: spec.ports[0].nodePort: Invalid value: {taken}: '
        "provided port is already allocated"
    )
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(
            ns, service(name, type="NodePort", ports=[{"port": 80, "nodePort": 8080}])
        )
    assert status["message"] == (
        f'Service "{name}" is invalid: spec.ports[0].nodePort: Invalid value: 8080: provided '
        "port is not in the valid range. The range of valid ports is 30000-32767"
    )
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(ns, service(name, ports=[{"port": 80, "nodePort": 31000}]))
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.ports[0].nodePort", "FieldValueForbidden")
    ]


def test_turning_into_a_cluster_ip_service_drops_what_it_no_longer_needs(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("svc")
    core.create_namespaced_service(ns, service(name, type="NodePort"))
    spec = to_dict(api, core.patch_namespaced_service(name, ns, {"spec": {"type": "ClusterIP"}}))[
        "spec"
    ]
    assert "nodePort" not in spec["ports"][0]
    assert "externalTrafficPolicy" not in spec
    assert spec["clusterIP"]


def test_a_replace_without_a_type_makes_a_cluster_ip_service(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """The body of an update is defaulted as it is decoded, before the registry sees it: a
    Service sent without ``type`` is a ClusterIP one (the type is not carried forward as the
    allocated cluster IP is), and loses the node ports it no longer needs."""
    name = unique("svc")
    created = to_dict(api, core.create_namespaced_service(ns, service(name, type="NodePort")))
    again = service(name)  # rendered from a template that names no type
    again["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    spec = to_dict(api, core.replace_namespaced_service(name, ns, again))["spec"]
    assert spec["type"] == "ClusterIP"
    assert "nodePort" not in spec["ports"][0]
    assert "externalTrafficPolicy" not in spec
    assert spec["clusterIP"] == created["spec"]["clusterIP"]


def test_the_default_kubernetes_service_and_its_endpoints_name_the_api_server(
    api: ApiClient, core: client.CoreV1Api
) -> None:
    # kube-apiserver's kubernetesservice controller: what in-cluster clients resolve
    # as kubernetes.default.svc, and what a controller listing every Service meets
    svc = to_dict(api, core.read_namespaced_service("kubernetes", "default"))
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    spec = svc["spec"]
    assert (spec["type"], spec["ipFamilyPolicy"], spec["sessionAffinity"]) == (
        "ClusterIP",
        "SingleStack",
        "None",
    )
    assert "selector" not in spec  # maintained by the API server, not by a pod selector
    (port,) = spec["ports"]
    assert (port["name"], port["port"], port["protocol"]) == ("https", 443, "TCP")
    target = port["targetPort"]
    assert isinstance(target, int)
    endpoints = to_dict(api, core.read_namespaced_endpoints("kubernetes", "default"))
    assert endpoints["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    (subset,) = endpoints["subsets"]
    assert subset["ports"] == [{"name": "https", "port": target, "protocol": "TCP"}]
    assert subset["addresses"]
    slices = client.DiscoveryV1Api(api).read_namespaced_endpoint_slice("kubernetes", "default")
    es = to_dict(api, slices)
    assert es["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert es["addressType"] == "IPv4"
    assert es["ports"] == [{"name": "https", "port": target, "protocol": "TCP"}]
    assert sorted(a for e in es["endpoints"] for a in e["addresses"]) == sorted(
        a["ip"] for a in subset["addresses"]
    )
    assert all(e["conditions"]["ready"] for e in es["endpoints"])
