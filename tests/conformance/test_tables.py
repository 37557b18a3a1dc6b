"""``kubectl get`` tables (``as=Table``) of built-in kinds: kube-apiserver's printers' columns
(``pkg/printers/internalversion/printers.go``) and, for kinds it has no printer for, the
default table convertor's ``NAME CREATED AT``."""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from ._support import raw, unique

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _table(api: ApiClient, path: str) -> dict[str, Any]:
    got = raw(api, "GET", path, accept=TABLE)
    assert got.status == 200, got.data
    table: dict[str, Any] = got.json()
    assert table["kind"] == "Table"
    return table


def _columns(table: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]


def _create(api: ApiClient, path: str, body: dict[str, Any]) -> None:
    got = raw(api, "POST", path, body=body)
    assert got.status == 201, got.data


def _delete(api: ApiClient, path: str) -> None:
    raw(api, "DELETE", path)


def test_roles_cluster_roles_and_crds_have_the_default_convertor_s_created_at(
    api: ApiClient, ns: str
) -> None:
    """No printer in printers.go: ``NAME CREATED AT``, the creationTimestamp in RFC 3339."""
    role = unique("role")
    _create(api, f"{RBAC}/namespaces/{ns}/roles", {"metadata": {"name": role}, "rules": []})
    paths = [
        f"{RBAC}/namespaces/{ns}/roles/{role}",
        f"{RBAC}/clusterroles/view",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ]
    for path in paths:
        table = _table(api, path)
        assert _columns(table) == [("Name", "string", 0), ("Created At", "date", 0)], path
        assert table["columnDefinitions"][0]["format"] == "name"
        for row in table["rows"]:
            name, created = row["cells"]
            assert created == row["object"]["metadata"]["creationTimestamp"], path
            assert RFC3339.match(created), created


ROLE_BINDING_COLUMNS = [
    ("Name", "string", 0),
    ("Role", "string", 0),
    ("Age", "string", 0),
    ("Users", "string", 1),
    ("Groups", "string", 1),
    ("ServiceAccounts", "string", 1),
]


def _binding(name: str, role_kind: str, role: str, ns: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": ns},
        ],
    }


def test_role_bindings_show_the_role_and_wide_the_subjects(api: ApiClient, ns: str) -> None:
    name = unique("rb")
    _create(api, f"{RBAC}/namespaces/{ns}/rolebindings", _binding(name, "ClusterRole", "view", ns))
    cluster_name = unique("crb")
    _create(api, f"{RBAC}/clusterrolebindings", _binding(cluster_name, "ClusterRole", "view", ns))
    try:
        for path in (
            f"{RBAC}/namespaces/{ns}/rolebindings/{name}",
            f"{RBAC}/clusterrolebindings/{cluster_name}",
        ):
            table = _table(api, path)
            assert _columns(table) == ROLE_BINDING_COLUMNS
            (row,) = table["rows"]
            assert row["cells"][1] == "ClusterRole/view"
            assert row["cells"][3:] == ["bob, carol", "devs", f"{ns}/robot"]
    finally:
        _delete(api, f"{RBAC}/clusterrolebindings/{cluster_name}")


def _webhook_configuration(name: str, kind: str, webhooks: int) -> dict[str, Any]:
    hook = {
        "clientConfig": {"url": "https://127.0.0.1:1/x"},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Ignore",
        "rules": [
            {
                "apiGroups": ["tables.example.com"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["nothings"],
            }
        ],
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [{**hook, "name": f"h{i}.tables.example.com"} for i in range(webhooks)],
    }


def test_webhook_configurations_count_their_webhooks(api: ApiClient) -> None:
    base = "/apis/admissionregistration.k8s.io/v1"
    for plural, kind in (
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
    ):
        name = unique("whc")
        _create(api, f"{base}/{plural}", _webhook_configuration(name, kind, 2))
        try:
            table = _table(api, f"{base}/{plural}/{name}")
            assert _columns(table) == [
                ("Name", "string", 0),
                ("Webhooks", "integer", 0),
                ("Age", "string", 0),
            ]
            (row,) = table["rows"]
            assert row["cells"][:2] == [name, 2]
        finally:
            _delete(api, f"{base}/{plural}/{name}")


def test_ingresses_show_class_hosts_address_and_ports(kube_api_client: ApiClient, ns: str) -> None:
    net = client.NetworkingV1Api(kube_api_client)
    backend = {"service": {"name": "svc", "port": {"number": 80}}}
    http = {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}
    net.create_namespaced_ingress(
        ns,
        {
            "metadata": {"name": "plain"},
            "spec": {"defaultBackend": backend},
        },
    )
    net.create_namespaced_ingress(
        ns,
        {
            "metadata": {"name": "hosts"},
            "spec": {
                "ingressClassName": "nginx",
                "rules": [{"host": f"h{i}.example.com", "http": http} for i in range(5)],
                "tls": [{"hosts": ["h0.example.com"], "secretName": "tls"}],
            },
        },
    )
    table = _table(kube_api_client, f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses")
    assert _columns(table) == [
        ("Name", "string", 0),
        ("Class", "string", 0),
        ("Hosts", "string", 0),
        ("Address", "string", 0),
        ("Ports", "string", 0),
        ("Age", "string", 0),
    ]
    rows = {r["cells"][0]: r["cells"][:5] for r in table["rows"]}
    assert rows == {
        "plain": ["plain", "<none>", "*", "", "80"],
        "hosts": [
            "hosts",
            "nginx",
            "h0.example.com,h1.example.com,h2.example.com + 2 more...",
            "",
            "80, 443",
        ],
    }


def test_counts_printers_go_declares_as_strings_are_strings(api: ApiClient, ns: str) -> None:
    """printers.go declares these counts ``string`` columns though their cells are numbers:
    ConfigMap and Secret DATA, ServiceAccount SECRETS, Deployment UP-TO-DATE and AVAILABLE,
    HorizontalPodAutoscaler MAXPODS and REPLICAS."""
    declared = {
        f"/api/v1/namespaces/{ns}/configmaps": {"Data": "string"},
        f"/api/v1/namespaces/{ns}/secrets": {"Data": "string"},
        f"/api/v1/namespaces/{ns}/serviceaccounts": {"Secrets": "string"},
        f"/apis/apps/v1/namespaces/{ns}/deployments": {
            "Up-to-date": "string",
            "Available": "string",
        },
        f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers": {
            "MinPods": "string",
            "MaxPods": "string",
            "Replicas": "string",
        },
    }
    for path, types in declared.items():
        columns = {name: type_ for name, type_, _ in _columns(_table(api, path))}
        assert {name: columns.get(name) for name in types} == types, path


def test_an_unbound_claim_shows_its_class_and_no_capacity_yet(
    core: client.CoreV1Api, api: ApiClient, ns: str
) -> None:
    """printPersistentVolumeClaim: capacity and access modes wait for a bound volume; the
    volume attributes class is ``<unset>``; wide, the volume mode."""
    core.create_namespaced_persistent_volume_claim(
        ns,
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "tables-none",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    table = _table(api, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
    assert _columns(table) == [
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Volume", "string", 0),
        ("Capacity", "string", 0),
        ("Access Modes", "string", 0),
        ("StorageClass", "string", 0),
        ("VolumeAttributesClass", "string", 0),
        ("Age", "string", 0),
        ("VolumeMode", "string", 1),
    ]
    (row,) = table["rows"]
    cells = row["cells"]
    claim = core.read_namespaced_persistent_volume_claim("data", ns)
    phase = claim.status.phase or ""  # Pending on kube-apiserver (a default)
    assert cells[:7] == ["data", phase, "", "", "", "tables-none", "<unset>"]
    assert cells[8] == (claim.spec.volume_mode or "<unset>")  # Filesystem on kube-apiserver


EVENT_COLUMNS = [
    ("Last Seen", "string", 0),
    ("Type", "string", 0),
    ("Reason", "string", 0),
    ("Object", "string", 0),
    ("Subobject", "string", 1),
    ("Source", "string", 1),
    ("Message", "string", 0),
    ("First Seen", "string", 1),
    ("Count", "string", 1),
    ("Name", "string", 1),
]


def test_events_of_either_group_have_the_core_event_printer(api: ApiClient, ns: str) -> None:
    """events.k8s.io is served from the core events' storage: one printer for both; an event
    of the new API is a singleton (count 1) from its reporting controller and instance."""
    name = unique("ev")
    _create(
        api,
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": name},
            "eventTime": "2026-01-02T03:04:05.000000Z",
            "reportingController": "tables.example.com/ctl",
            "reportingInstance": "ctl-1",
            "action": "Checking",
            "reason": "Checked",
            "type": "Normal",
            "note": "  all good  ",
            "regarding": {"kind": "Pod", "name": "p", "namespace": ns, "apiVersion": "v1"},
        },
    )
    for path in (
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}",
        f"/api/v1/namespaces/{ns}/events/{name}",
    ):
        table = _table(api, path)
        assert _columns(table) == EVENT_COLUMNS, path
        (row,) = table["rows"]
        last, type_, reason, target, sub, source, message, first, count, got = row["cells"]
        assert (type_, reason, target, sub) == ("Normal", "Checked", "pod/p", ""), path
        assert (source, message, count, got) == (
            "tables.example.com/ctl, ctl-1",
            "all good",
            1,
            name,
        )
        assert last == first and re.match(r"^\d+d$", first), (last, first)


def test_a_crds_printer_columns_cells_are_the_first_value_converted_to_the_column_type(
    api: ApiClient, fresh_group: str, ns: str
) -> None:
    # apiextensions' tableconvertor: results[0][0], then cellForJSONValue (a string column's
    # value printed as jsonpath prints it); a value not of the column's type is no cell
    from ._support import crd_manifest, create_crd

    manifest = crd_manifest(fresh_group, "cells", "Cell")
    columns = [
        ("First", "string", ".spec.items[*].name"),
        ("Truncated", "integer", ".spec.ratio"),
        ("NotInt", "integer", ".spec.word"),
        ("Number", "number", ".spec.count"),
        ("NotBool", "boolean", ".spec.word"),
        ("Printed", "string", ".spec.count"),
        ("Float", "string", ".spec.ratio"),
        ("Object", "string", ".spec.obj"),
        ("Bad", "date", ".spec.word"),
        ("App", "string", ".metadata.labels.app\\.kubernetes\\.io/name"),
        ("Last", "string", ".status.conditions[-1:].type"),
    ]
    manifest["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": n, "type": t, "jsonPath": p} for n, t, p in columns
    ]
    create_crd(api, manifest)
    path = f"/apis/{fresh_group}/v1/namespaces/{ns}/cells"
    _create(
        api,
        path,
        {
            "apiVersion": f"{fresh_group}/v1",
            "kind": "Cell",
            "metadata": {"name": "c", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {
                "items": [{"name": "a"}, {"name": "b"}],
                "ratio": 2.7,
                "word": "yes",
                "count": 3,
                "obj": {"b": 1, "a": [True]},
            },
            "status": {"conditions": [{"type": "Ready"}, {"type": "Synced"}]},
        },
    )
    status = {"status": {"conditions": [{"type": "Ready"}, {"type": "Synced"}]}}
    got = raw(
        api,
        "PATCH",
        f"{path}/c/status",
        body=status,
        content_type="application/merge-patch+json",
    )
    assert got.status == 200, got.data
    table = _table(api, f"{path}/c")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", *(n for n, _, _ in columns)]
    assert table["rows"][0]["cells"] == [
        "c",
        "a",
        2,
        None,
        3,
        None,
        "3",
        "2.7",
        '{"a":[true],"b":1}',
        "<invalid>",
        "web",
        "Synced",
    ]
