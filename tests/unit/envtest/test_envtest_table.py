"""Server-side printing: Table responses for get, list and watch, as kubectl asks for them."""

from __future__ import annotations

import http.client
from typing import Any

import orjson
import pytest
from kubernetes import client

from mcruntime.envtest import APIServer
from mcruntime.envtest._table import human_duration

pytestmark = pytest.mark.timeout(30)

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {
                        "name": "Ready",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                    },
                    {"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "priority": 1},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            },
            {
                "name": "v2",
                "served": True,
                "storage": False,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            },
        ],
    },
}


def _get(server: APIServer, path: str, accept: str = TABLE) -> tuple[int, Any]:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request("GET", path, headers={"Authorization": f"Bearer {server.token}", "Accept": accept})
    resp = conn.getresponse()
    return resp.status, orjson.loads(resp.read())


def _columns(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


def test_list_as_table_has_the_kubectl_columns_and_partial_metadata(
    server: APIServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}, "data": {"a": "1"}})
    code, table = _get(server, "/api/v1/namespaces/default/configmaps", KUBECTL_ACCEPT)
    assert code == 200
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"]["resourceVersion"]
    assert _columns(table) == ["Name", "Data", "Age"]
    row = next(r for r in table["rows"] if r["cells"][0] == "c1")
    assert row["cells"][1] == 1 and row["cells"][2].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "c1" and "data" not in row["object"]


def test_include_object_picks_what_each_row_carries(
    server: APIServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}, "data": {"a": "1"}})
    base = "/api/v1/namespaces/default/configmaps/c1?includeObject="
    _, full = _get(server, base + "Object")
    assert full["rows"][0]["object"]["data"] == {"a": "1"}
    _, none = _get(server, base + "None")
    assert none["rows"][0]["object"] is None
    code, bad = _get(server, base + "Everything")
    assert code == 400 and "includeObject" in bad["message"]


def test_without_a_table_accept_the_list_is_plain_json(server: APIServer) -> None:
    code, body = _get(server, "/api/v1/namespaces", "application/json")
    assert code == 200 and body["kind"] == "NamespaceList"


def test_builtin_printers_for_deployments_pods_services_and_secrets(
    server: APIServer, api: client.ApiClient
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    pod_spec = {"containers": [{"name": "web", "image": "nginx:1"}]}
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec},
            },
        },
    )
    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": pod_spec})
    core.create_namespaced_service(
        "default", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    )
    core.create_namespaced_secret(
        "default", {"metadata": {"name": "x"}, "type": "Opaque", "data": {"k": "dg=="}}
    )
    _, deps = _get(server, "/apis/apps/v1/namespaces/default/deployments")
    assert _columns(deps)[:5] == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    wide = [c["name"] for c in deps["columnDefinitions"] if c["priority"] == 1]
    assert wide == ["Containers", "Images", "Selector"]
    cells = deps["rows"][0]["cells"]
    assert cells[:4] == ["web", "0/2", 0, 0] and cells[5:] == ["web", "nginx:1", "app=web"]
    _, pods = _get(server, "/api/v1/namespaces/default/pods/p")
    assert _columns(pods)[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert pods["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", 0]
    _, svcs = _get(server, "/api/v1/namespaces/default/services/s")
    svc = svcs["rows"][0]["cells"]
    assert _columns(svcs)[:6] == ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"]
    assert svc[1] == "ClusterIP" and svc[2].startswith("10.96.") and svc[4] == "80/TCP"
    _, secrets = _get(server, "/api/v1/namespaces/default/secrets/x")
    assert secrets["rows"][0]["cells"][:3] == ["x", "Opaque", 1]


def test_crd_printer_columns_evaluate_jsonpath_per_version(
    server: APIServer, api: client.ApiClient
) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGETS)
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "widgets",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3, "owner": "ops"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    _, table = _get(server, "/apis/example.com/v1/namespaces/default/widgets")
    assert _columns(table) == ["Name", "Size", "Ready", "Owner"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 1]
    assert table["rows"][0]["cells"] == ["w", 3, "True", "ops"]
    # v2 declares no columns: Name and Age, as kube-apiserver defaults them
    _, v2 = _get(server, "/apis/example.com/v2/namespaces/default/widgets/w")
    assert _columns(v2) == ["Name", "Age"] and v2["rows"][0]["cells"][0] == "w"


def test_watch_as_table_sends_rows_and_the_columns_once(
    server: APIServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request(
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1",
        headers={"Authorization": f"Bearer {server.token}", "Accept": KUBECTL_ACCEPT},
    )
    resp = conn.getresponse()
    first = orjson.loads(resp.readline())
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    second = orjson.loads(resp.readline())
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert _columns(first["object"]) == ["Name", "Data", "Age"]
    assert first["object"]["rows"][0]["cells"][0] == "a"
    assert second["type"] == "ADDED" and second["object"]["columnDefinitions"] is None
    assert second["object"]["rows"][0]["cells"][0] == "b"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
    ],
)
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


_ITEMS = {"l": [0, 1, 2, 3, 4], "m": {"a.b/c": 1, "x": {"y": 2}}}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        # client-go's evalArray: negative bounds from the end, a step, out of bounds nothing
        (".l[-1:]", [4]),
        (".l[1:3]", [1, 2]),
        (".l[::2]", [0, 2, 4]),
        (".l[:-3]", [0, 1]),
        (".l[2:2]", []),
        (".l[3:1]", []),
        (".l[0:9]", []),
        (".l[-9:]", []),
        # parseField: a backslash escapes the next character, "/" is part of a name
        (".m.a\\.b/c", [1]),
        (".m.*", [1, {"y": 2}]),
        ("{.m.x.y}", [2]),
    ],
)
def test_jsonpath_slices_and_escaped_field_names(path: str, found: list[Any]) -> None:
    from mcruntime.envtest._jsonpath import find

    assert find(_ITEMS, path) == found
