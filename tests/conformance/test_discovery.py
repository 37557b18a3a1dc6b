"""Discovery: version, API groups and resource lists, health endpoints."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiClient

from ._support import crd_manifest, create_crd, raw, wait_for

pytestmark = pytest.mark.timeout(30)

CRUD_VERBS = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}


def resources(api: ApiClient, path: str) -> dict[str, dict[str, Any]]:
    resp = raw(api, "GET", path)
    assert resp.status == 200, resp.data
    body = resp.json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == path.removeprefix("/apis/").removeprefix("/api/")
    return {r["name"]: r for r in body["resources"]}


def test_version_reports_major_minor_and_git_version(api: ApiClient) -> None:
    resp = raw(api, "GET", "/version")
    assert resp.status == 200
    body = resp.json()
    assert body["major"].isdigit() or body["major"].rstrip("+").isdigit()
    assert body["minor"].rstrip("+").isdigit()
    assert body["gitVersion"].startswith("v")


def test_core_api_lists_version_v1(api: ApiClient) -> None:
    body = raw(api, "GET", "/api").json()
    assert body["kind"] == "APIVersions"
    assert "v1" in body["versions"]


def test_core_v1_resource_list_describes_builtin_kinds(api: ApiClient) -> None:
    res = resources(api, "/api/v1")
    expected = {
        "namespaces": ("Namespace", False, ["ns"]),
        "configmaps": ("ConfigMap", True, ["cm"]),
        "secrets": ("Secret", True, None),
        "services": ("Service", True, ["svc"]),
        "serviceaccounts": ("ServiceAccount", True, ["sa"]),
        "pods": ("Pod", True, ["po"]),
        "events": ("Event", True, ["ev"]),
    }
    for name, (kind, namespaced, short) in expected.items():
        assert name in res, f"{name} missing from /api/v1"
        r = res[name]
        assert r["kind"] == kind
        assert r["namespaced"] is namespaced
        assert r["singularName"] in ("", kind.lower())
        assert {"create", "get", "list", "watch", "update", "patch", "delete"} <= set(r["verbs"])
        if short:
            assert set(short) <= set(r.get("shortNames") or []), r
    assert set(res["configmaps"]["verbs"]) >= CRUD_VERBS


def test_status_subresources_are_listed_with_their_verbs(api: ApiClient) -> None:
    core = resources(api, "/api/v1")
    assert "pods/status" in core
    assert core["pods/status"]["kind"] == "Pod"
    assert {"get", "patch", "update"} <= set(core["pods/status"]["verbs"])
    assert "create" not in core["pods/status"]["verbs"]
    assert "namespaces/status" in core
    apps = resources(api, "/apis/apps/v1")
    assert "deployments/status" in apps


def test_api_group_list_includes_builtin_groups(api: ApiClient) -> None:
    resp = raw(api, "GET", "/apis")
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "APIGroupList"
    groups = {g["name"]: g for g in body["groups"]}
    for group in ("apps", "batch", "coordination.k8s.io", "apiextensions.k8s.io"):
        assert group in groups, f"group {group} missing from /apis"
        g = groups[group]
        assert {"groupVersion": f"{group}/v1", "version": "v1"} in g["versions"]
        assert g["preferredVersion"]["groupVersion"] == f"{group}/v1"


def test_api_group_endpoint_describes_one_group(api: ApiClient) -> None:
    body = raw(api, "GET", "/apis/apps").json()
    assert body["kind"] == "APIGroup"
    assert body["name"] == "apps"
    assert body["preferredVersion"]["version"] == "v1"


@pytest.mark.parametrize(
    ("group_version", "name", "kind", "namespaced", "short"),
    [
        ("apps/v1", "deployments", "Deployment", True, ["deploy"]),
        ("batch/v1", "jobs", "Job", True, None),
        ("coordination.k8s.io/v1", "leases", "Lease", True, None),
        (
            "apiextensions.k8s.io/v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            ["crd", "crds"],
        ),
    ],
)
def test_group_version_resource_list_describes_kind(
    api: ApiClient,
    group_version: str,
    name: str,
    kind: str,
    namespaced: bool,
    short: list[str] | None,
) -> None:
    res = resources(api, f"/apis/{group_version}")
    assert name in res
    assert res[name]["kind"] == kind
    assert res[name]["namespaced"] is namespaced
    assert set(res[name]["verbs"]) >= CRUD_VERBS
    if short:
        assert set(short) <= set(res[name].get("shortNames") or [])


def test_unknown_group_version_is_not_found(api: ApiClient) -> None:
    assert raw(api, "GET", "/apis/nothing.example.com/v1").status == 404


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
def test_health_endpoints_answer_ok(api: ApiClient, path: str) -> None:
    resp = raw(api, "GET", path)
    assert resp.status == 200
    assert resp.data.strip() == b"ok"


@pytest.mark.parametrize("endpoint", ["healthz", "readyz", "livez"])
def test_a_verbose_health_check_lists_each_check_then_the_verdict(
    api: ApiClient, endpoint: str
) -> None:
    """``kubectl get --raw '/readyz?verbose'``: one ``[+]<check> ok`` line per check."""
    resp = raw(api, "GET", f"/{endpoint}", query=[("verbose", "")])
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    lines = resp.data.decode().splitlines()
    assert lines[-1] == f"{endpoint} check passed"
    checks = lines[:-1]
    assert checks[:3] == ["[+]ping ok", "[+]log ok", "[+]etcd ok"]
    assert all(line.startswith("[+]") and line.endswith(" ok") for line in checks)
    if endpoint == "readyz":  # ready only once the informers synced, and not shutting down
        assert {"[+]informer-sync ok", "[+]shutdown ok"} <= set(checks)


def test_a_health_check_can_be_excluded_and_asked_for_alone(api: ApiClient) -> None:
    query = [("verbose", "true"), ("exclude", "etcd"), ("exclude", "no-such-check")]
    lines = raw(api, "GET", "/livez", query=query).data.decode().splitlines()
    assert "[+]etcd excluded: ok" in lines
    assert lines[-2:] == [
        'warn: some health checks cannot be excluded: no matches for "no-such-check"',
        "livez check passed",
    ]
    one = raw(api, "GET", "/readyz/etcd")
    assert (one.status, one.data) == (200, b"ok")
    assert raw(api, "GET", "/readyz/no-such-check").status == 404


#: what kubectl and client-go ask for first (then the legacy documents)
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _aggregated(api: ApiClient, path: str) -> dict[str, Any]:
    """The aggregated discovery document of ``path`` (``/api`` or ``/apis``)."""
    resp = raw(api, "GET", path, accept=f"{AGGREGATED},application/json")
    assert resp.status == 200, resp.data
    assert resp.headers["Content-Type"].replace(" ", "") == AGGREGATED
    body: dict[str, Any] = resp.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    return body


def _legacy_view(listing: list[dict[str, Any]]) -> dict[str, Any]:
    """What a resource list says of each resource: scope, kind, verbs, names, subresources."""
    subs: dict[str, dict[str, list[str]]] = {}
    for r in listing:
        base, _, sub = r["name"].partition("/")
        if sub:
            subs.setdefault(base, {})[sub] = sorted(r["verbs"])
    return {
        r["name"]: (
            r["namespaced"],
            r["kind"],
            sorted(r["verbs"]),
            r.get("singularName") or "",
            sorted(r.get("shortNames") or []),
            sorted(r.get("categories") or []),
            subs.get(r["name"], {}),
        )
        for r in listing
        if "/" not in r["name"]
    }


def _aggregated_view(listing: list[dict[str, Any]]) -> dict[str, Any]:
    """`_legacy_view` of an aggregated version's resources."""
    return {
        r["resource"]: (
            r["scope"] == "Namespaced",
            r["responseKind"]["kind"],
            sorted(r["verbs"]),
            r.get("singularResource") or "",
            sorted(r.get("shortNames") or []),
            sorted(r.get("categories") or []),
            {s["subresource"]: sorted(s["verbs"]) for s in r.get("subresources") or []},
        )
        for r in listing
    }


def test_aggregated_discovery_lists_every_group_version_and_resource_as_the_legacy_documents(
    api: ApiClient, fresh_group: str
) -> None:
    # kubectl and client-go ask /api and /apis for it first: one request each, not one per
    # group-version; a client that asks for JSON alone still gets the legacy documents
    crd = crd_manifest(fresh_group, "things", "Thing", short_names=["th"])
    crd["spec"]["versions"].append(
        {**crd["spec"]["versions"][0], "name": "v1beta1", "storage": False}
    )
    create_crd(api, crd)

    def listed() -> dict[str, Any] | None:
        body = _aggregated(api, "/apis")
        groups = {g["metadata"]["name"]: g for g in body["items"]}
        return groups if fresh_group in groups else None

    groups = wait_for(listed, 15, f"{fresh_group} in aggregated discovery", interval=0.05)
    legacy = raw(api, "GET", "/apis").json()
    assert legacy["kind"] == "APIGroupList"
    for g in legacy["groups"]:
        versions = [v["version"] for v in groups[g["name"]]["versions"]]
        assert versions == [v["version"] for v in g["versions"]], g["name"]
        assert versions[0] == g["preferredVersion"]["version"]
    for group, version in (("apps", "v1"), (fresh_group, "v1"), (fresh_group, "v1beta1")):
        (entry,) = [v for v in groups[group]["versions"] if v["version"] == version]
        assert entry["freshness"] == "Current"
        old = raw(api, "GET", f"/apis/{group}/{version}").json()["resources"]
        assert _aggregated_view(entry["resources"]) == _legacy_view(old), f"{group}/{version}"
    # a custom resource's kind, and its status's, carry their group and version
    (things,) = [v for v in groups[fresh_group]["versions"] if v["version"] == "v1beta1"]
    (thing,) = things["resources"]
    kind = {"group": fresh_group, "version": "v1beta1", "kind": "Thing"}
    assert thing["responseKind"] == kind
    assert [s["responseKind"] for s in thing["subresources"]] == [kind]
    # the core group: /api, one item without a name
    (core,) = _aggregated(api, "/api")["items"]
    assert not core["metadata"].get("name")
    (v1,) = core["versions"]
    old = raw(api, "GET", "/api/v1").json()["resources"]
    assert _aggregated_view(v1["resources"]) == _legacy_view(old)
