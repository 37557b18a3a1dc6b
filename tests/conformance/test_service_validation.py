"""``ValidateService``'s checks of a Service's ports and spec (``pkg/apis/core/validation``):
the faults a controller that renders Services meets on a cluster, most often when it adds
a second port (``spec.ports[0].name: Required value``)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from ._support import raises_status, unique

pytestmark = pytest.mark.timeout(60)

RFC1123_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"app": "web"}, **spec}}


def refusal(core: client.CoreV1Api, ns: str, body: dict[str, Any]) -> str:
    """The faults kube-apiserver lists refusing ``body`` (its message after the name)."""
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(ns, body)
    prefix = f'Service "{body["metadata"]["name"]}" is invalid: '
    message: str = status["message"]
    assert message.startswith(prefix), message
    return message.removeprefix(prefix)


def test_several_ports_need_names_each_an_rfc_1123_label_used_once(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("svc")
    two = [{"port": 80}, {"port": 9090, "name": "metrics"}]
    assert refusal(core, ns, service(name, ports=two)) == "spec.ports[0].name: Required value"
    upper = [{"port": 80, "name": "HTTP"}]
    assert refusal(core, ns, service(name, ports=upper)) == (
        f'spec.ports[0].name: Invalid value: "HTTP": {RFC1123_LABEL}'
    )
    twice = [{"port": 80, "name": "web"}, {"port": 81, "name": "web"}]
    assert refusal(core, ns, service(name, ports=twice)) == (
        'spec.ports[1].name: Duplicate value: "web"'
    )
    named = [{"port": 80, "name": "http"}, {"port": 9090, "name": "metrics"}]
    created = core.create_namespaced_service(ns, service(name, ports=named))
    assert [p.name for p in created.spec.ports] == ["http", "metrics"]


def test_a_port_and_protocol_pair_is_served_once(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    ports = [{"port": 80, "name": "a"}, {"port": 80, "name": "b", "targetPort": 8080}]
    assert refusal(core, ns, service(name, ports=ports)) == (
        'spec.ports[1]: Duplicate value: core.ServicePort{Name:"", Protocol:"TCP", '
        "AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, "
        'StrVal:""}, NodePort:0}'
    )
    ports[1]["protocol"] = "UDP"  # the same number over another protocol is another port
    core.create_namespaced_service(ns, service(name, ports=ports))


def test_a_protocol_and_a_target_port_are_checked(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    http = [{"port": 80, "protocol": "HTTP"}]
    assert refusal(core, ns, service(name, ports=http)) == (
        'spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'
    )
    far = [{"port": 80, "targetPort": 70000}]
    assert refusal(core, ns, service(name, ports=far)) == (
        "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
    )
    bad_name = [{"port": 80, "targetPort": "Web_Port"}]
    assert refusal(core, ns, service(name, ports=bad_name)) == (
        'spec.ports[0].targetPort: Invalid value: "Web_Port": must contain only alpha-numeric '
        "characters (a-z, 0-9), and hyphens (-)"
    )
    digits = [{"port": 80, "targetPort": "8080"}]  # a string: a name, which needs a letter
    assert refusal(core, ns, service(name, ports=digits)) == (
        'spec.ports[0].targetPort: Invalid value: "8080": must contain at least one letter (a-z)'
    )
    created = core.create_namespaced_service(
        ns, service(name, ports=[{"port": 80, "targetPort": "web-port"}])
    )
    assert created.spec.ports[0].target_port == "web-port"


def test_an_external_name_service_needs_a_dns_name(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    assert refusal(core, ns, service(name, type="ExternalName")) == (
        "spec.externalName: Required value"
    )
    message = refusal(core, ns, service(name, type="ExternalName", externalName="db_host"))
    assert message.startswith(
        'spec.externalName: Invalid value: "db_host": a lowercase RFC 1123 subdomain must '
    ), message
    with_ip = service(
        name, type="ExternalName", externalName="db.example.com", clusterIP="10.0.0.77"
    )
    assert "spec.clusterIPs: Forbidden: may not be set for ExternalName services" in (
        refusal(core, ns, with_ip)
    )
    core.create_namespaced_service(
        ns, service(name, type="ExternalName", externalName="db.example.com.")
    )


def test_a_selector_and_a_session_affinity_are_checked(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    ports = [{"port": 80}]
    body = service(name, ports=ports)
    body["spec"]["selector"] = {"app": "web server"}
    assert refusal(core, ns, body).startswith(
        'spec.selector: Invalid value: "web server": a valid label must be an empty string '
    )
    sticky = service(name, ports=ports, sessionAffinity="Sticky")
    assert refusal(core, ns, sticky) == (
        'spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"'
    )


def test_an_update_is_checked_as_a_create_is(core: client.CoreV1Api, ns: str) -> None:
    """``ValidateServiceUpdate`` ends with ``ValidateService``: adding a second port without
    naming the first is refused by an update too."""
    name = unique("svc")
    core.create_namespaced_service(ns, service(name, ports=[{"port": 80}]))
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_service(
            name, ns, {"spec": {"ports": [{"port": 80}, {"port": 9090, "name": "metrics"}]}}
        )
    assert status["message"] == (f'Service "{name}" is invalid: spec.ports[0].name: Required value')
