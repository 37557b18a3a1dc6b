"""Object semantics through the real client: CRUD, metadata, errors, patches, status, lists."""

from __future__ import annotations

import http.client

import orjson
import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import APIServer

pytestmark = pytest.mark.timeout(30)


def _err(fn, *args, **kwargs) -> tuple[int, dict]:
    with pytest.raises(client.ApiException) as e:
        fn(*args, **kwargs)
    body = orjson.loads(e.value.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == e.value.status
    return e.value.status, body


def _raw(
    server: APIServer,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict]:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": content_type}
    conn.request(method, path, body, headers)
    resp = conn.getresponse()
    return resp.status, orjson.loads(resp.read())


def test_create_get_update_delete_round_trip(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "rt"}, "data": {"a": "1"}}
    )
    meta = cm.metadata
    assert meta.uid and meta.creation_timestamp and meta.namespace == "default"
    assert meta.generation is None
    assert (cm.kind, cm.api_version) == ("ConfigMap", "v1")
    got = core.read_namespaced_config_map("rt", "default")
    assert got.data == {"a": "1"} and got.metadata.resource_version == meta.resource_version
    got.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("rt", "default", got)
    assert int(updated.metadata.resource_version) > int(meta.resource_version)
    assert updated.metadata.uid == meta.uid
    core.delete_namespaced_config_map("rt", "default")
    code, body = _err(core.read_namespaced_config_map, "rt", "default")
    assert (code, body["reason"], body["details"]["name"]) == (404, "NotFound", "rt")


def test_generate_name_appends_five_characters(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    name = cm.metadata.name
    assert name.startswith("gen-") and len(name) == 9 and name[4:].isalnum()


def test_create_errors_have_real_reasons(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    assert (
        _err(core.create_namespaced_config_map, "default", {"metadata": {"name": "dup"}})[1][
            "reason"
        ]
        == "AlreadyExists"
    )
    assert _err(core.create_namespaced_config_map, "nope", {"metadata": {"name": "x"}})[0] == 404
    assert (
        _err(core.create_namespaced_config_map, "default", {"metadata": {"name": "Bad_Name"}})[1][
            "reason"
        ]
        == "Invalid"
    )
    assert _err(core.create_namespaced_config_map, "default", {"metadata": {}})[0] == 422
    assert _err(core.create_namespace, {"metadata": {"name": "a.b"}})[0] == 422


def test_update_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "cf"}})
    core.patch_namespaced_config_map("cf", "default", {"data": {"x": "1"}})
    code, body = _err(core.replace_namespaced_config_map, "cf", "default", cm)
    assert (code, body["reason"]) == (409, "Conflict")
    stale = {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"y": "1"}}
    assert _err(core.patch_namespaced_config_map, "cf", "default", stale)[0] == 409
    cm.metadata.resource_version = None
    assert core.replace_namespaced_config_map("cf", "default", cm).data is None


def test_unchanged_update_keeps_resource_version(server: APIServer, core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "same"}, "data": {"a": "b"}}
    )
    before = server.resource_version
    again = core.replace_namespaced_config_map("same", "default", cm)
    assert again.metadata.resource_version == cm.metadata.resource_version
    assert server.resource_version == before


def test_generation_counts_spec_changes_only(api: ApiClient) -> None:
    apps = client.AppsV1Api(api)
    dep = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }
    assert apps.create_namespaced_deployment("default", dep).metadata.generation == 1
    d = apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"l": "v"}}})
    assert d.metadata.generation == 1
    d = apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 2}})
    assert (d.metadata.generation, d.status.replicas) == (1, 2)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}
    d = apps.patch_namespaced_deployment("web", "default", patch)
    assert d.metadata.generation == 2
    assert [c.image for c in d.spec.template.spec.containers] == ["nginx:2"]


def test_status_subresource_separates_spec_and_status(api: ApiClient) -> None:
    core = client.CoreV1Api(api)
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }
    created = core.create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"
    p = core.patch_namespaced_pod(
        "p", "default", {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}}
    )
    assert p.status.phase == "Pending" and p.metadata.labels == {"a": "b"}
    p = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"c": "d"}}}
    )
    assert p.status.phase == "Running" and p.metadata.labels == {"a": "b"}


def test_patch_content_types(core: client.CoreV1Api, api: ApiClient) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "pt"}, "data": {"a": "1", "b": "2"}}
    )
    cm = core.patch_namespaced_config_map(
        "pt",
        "default",
        {"data": {"a": None, "c": "3"}},
        _content_type="application/merge-patch+json",
    )
    assert cm.data == {"b": "2", "c": "3"}
    cm = core.patch_namespaced_config_map(
        "pt", "default", [{"op": "replace", "path": "/data/b", "value": "x"}]
    )
    assert cm.data == {"b": "x", "c": "3"}
    code, body = _err(
        core.patch_namespaced_config_map,
        "pt",
        "default",
        [{"op": "test", "path": "/data/b", "value": "nope"}],
    )
    assert code == 422
    pod = {
        "metadata": {"name": "sp"},
        "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
    }
    core.create_namespaced_pod("default", pod)
    p = core.patch_namespaced_pod(
        "sp", "default", {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}
    )
    assert [(c.name, c.image) for c in p.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    code, _ = _err(
        core.patch_namespaced_config_map,
        "pt",
        "default",
        {"data": {}},
        _content_type="application/apply-patch+yaml",
    )
    assert code == 422  # server-side apply needs a fieldManager


def test_yaml_request_bodies_are_decoded(server: APIServer) -> None:
    body = b"metadata:\n  name: from-yaml\ndata:\n  a: '1'\n"
    code, obj = _raw(
        server, "POST", "/api/v1/namespaces/default/configmaps", body, "application/yaml"
    )
    assert (code, obj["metadata"]["name"], obj["data"]) == (201, "from-yaml", {"a": "1"})


def test_bad_requests(server: APIServer) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    assert _raw(server, "POST", base, b"{not json")[0] == 400
    code, body = _raw(server, "POST", base + "/named", b'{"metadata":{"name":"named"}}')
    assert code == 405
    code, body = _raw(server, "POST", base, b"a: b", "text/plain")
    assert (code, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )
    assert _raw(server, "GET", "/api/v1/nothings")[0] == 404
    assert _raw(server, "GET", base + "?labelSelector=a%20in%20(")[0] == 400
    assert _raw(server, "GET", base + "?fieldSelector=spec.x%3D1")[0] == 400


def test_update_name_must_match_url(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "url"}})
    code, _ = _err(
        core.replace_namespaced_config_map, "url", "default", {"metadata": {"name": "other"}}
    )
    assert code == 400


def test_list_selectors_pagination_and_scopes(server: APIServer, core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    for i in range(7):
        core.create_namespaced_config_map(
            "default",
            {
                "metadata": {
                    "name": f"item-{i}",
                    "labels": {"tier": "a" if i % 2 else "b", **({"x": "1"} if i < 3 else {})},
                }
            },
        )
    core.create_namespaced_config_map(
        "other", {"metadata": {"name": "item-0", "labels": {"tier": "a"}}}
    )

    def names(lst: client.V1ConfigMapList) -> list[str]:
        return [i.metadata.name for i in lst.items]

    assert names(core.list_namespaced_config_map("default", label_selector="tier=a")) == [
        "item-1",
        "item-3",
        "item-5",
    ]
    assert names(core.list_namespaced_config_map("default", label_selector="tier!=a,x")) == [
        "item-0",
        "item-2",
    ]
    assert names(core.list_namespaced_config_map("default", label_selector="!x,tier in (a)")) == [
        "item-3",
        "item-5",
    ]
    assert names(core.list_namespaced_config_map("default", label_selector="tier notin (a),x")) == [
        "item-0",
        "item-2",
    ]
    assert names(
        core.list_namespaced_config_map("default", field_selector="metadata.name=item-4")
    ) == ["item-4"]
    everywhere = core.list_config_map_for_all_namespaces(label_selector="tier")
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items][-1] == (
        "other",
        "item-0",
    )
    assert everywhere.metadata.resource_version == server.resource_version

    seen, token = [], None
    while True:
        page = core.list_namespaced_config_map("default", limit=3, _continue=token)
        seen += names(page)
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"item-{i}" for i in range(7)]
    assert _err(core.list_namespaced_config_map, "default", limit=1, _continue="garbage")[0] == 400
    first = core.list_namespaced_config_map("default", limit=2)
    server.compact()
    assert (
        _err(
            core.list_namespaced_config_map, "default", limit=2, _continue=first.metadata._continue
        )[1]["reason"]
        == "Expired"
    )


def test_delete_collection_honours_selectors(core: client.CoreV1Api) -> None:
    for i in range(4):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"dc-{i}", "labels": {"even": str(i % 2 == 0)}}}
        )
    core.delete_collection_namespaced_config_map("default", label_selector="even=True")
    left = [i.metadata.name for i in core.list_namespaced_config_map("default").items]
    assert left == ["dc-1", "dc-3"]


def test_secret_string_data_is_encoded(core: client.CoreV1Api) -> None:
    s = core.create_namespaced_secret(
        "default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}
    )
    assert s.data == {"k": "dg=="} and s.type == "Opaque" and s.string_data is None


def test_discovery_lists_kinds_and_subresources(api: ApiClient) -> None:
    core_res = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core_res["configmaps"].namespaced and core_res["configmaps"].short_names == ["cm"]
    assert not core_res["namespaces"].namespaced
    assert "pods/status" in core_res and "watch" in core_res["pods"].verbs
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert {"apps", "batch", "coordination.k8s.io", "apiextensions.k8s.io"} <= set(groups)
    assert groups["apps"].preferred_version.group_version == "apps/v1"
    apps = {r.name for r in client.AppsV1Api(api).get_api_resources().resources}
    assert {"deployments", "deployments/status"} <= apps
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]


def test_dry_run_validates_without_persisting(server: APIServer, core: client.CoreV1Api) -> None:
    rv = server.resource_version
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}}, dry_run="All")
    assert cm.metadata.name == "dry" and server.resource_version == rv
    assert core.list_namespaced_config_map("default").items == []
    core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}})
    assert core.patch_namespaced_config_map(
        "dry", "default", {"data": {"a": "b"}}, dry_run="All"
    ).data == {"a": "b"}
    core.delete_namespaced_config_map("dry", "default", dry_run="All")
    assert core.read_namespaced_config_map("dry", "default").data is None
    code, _ = _err(
        core.create_namespaced_config_map, "default", {"metadata": {"name": "Bad"}}, dry_run="All"
    )
    assert code == 422
