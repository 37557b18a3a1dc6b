"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml`` and ``managedFields``.

Written against kube-apiserver's behaviour, so they pass on a real cluster too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    WIDGET_GROUP,
    Raw,
    assert_status,
    configmap,
    deployment,
    raw,
    served_crd,
    unique,
    widget,
)

pytestmark = pytest.mark.timeout(30)

APPLY = "application/apply-patch+yaml"
GIZMOS = "gizmos"


def apply(
    api: ApiClient,
    path: str,
    body: dict[str, Any] | str,
    manager: str | None,
    *,
    force: bool = False,
) -> Raw:
    query: list[tuple[str, Any]] = []
    if manager is not None:
        query.append(("fieldManager", manager))
    if force:
        query.append(("force", "true"))
    data = body if isinstance(body, str) else json.dumps(body)
    return raw(api, "PATCH", path, query=query, body=data, content_type=APPLY)


def cm_path(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps/{name}"


def cm(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", **configmap(name, data, **meta)}


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or []}


@pytest.fixture(scope="module")
def gizmos(kube_backend: KubeBackend) -> Iterator[str]:
    """A CRD whose schema declares list and map types: the path of its ``gizmos``."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "color": {"type": "string"},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "port": {"type": "integer"},
                            },
                        },
                    },
                    "endpoints": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "items": {
                            "type": "object",
                            "required": ["port"],
                            "properties": {
                                "port": {"type": "integer"},
                                "protocol": {"type": "string", "default": "TCP"},
                                "owner": {"type": "string"},
                            },
                        },
                    },
                    "tags": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"},
                    },
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {
                        "type": "object",
                        "x-kubernetes-map-type": "atomic",
                        "additionalProperties": {"type": "string"},
                    },
                },
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "ready": {"type": "integer"}},
            },
        },
    }
    manifest = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{GIZMOS}.{WIDGET_GROUP}"},
        "spec": {
            "group": WIDGET_GROUP,
            "names": {"plural": GIZMOS, "singular": "gizmo", "kind": "Gizmo"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    with served_crd(kube_backend, manifest) as path:
        yield path


def gizmo(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Gizmo",
        "metadata": {"name": name},
        "spec": spec,
    }


# ------------------------------------------------------------------ basics


def test_apply_creates_the_object_and_records_an_apply_entry(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "1"}, labels={"app": "x"}), "ctl")
    assert resp.status == 201
    obj = resp.json()
    assert obj["data"] == {"a": "1"}
    entry = managers(obj)[("ctl", "Apply")]
    assert entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1"
    fields = entry["fieldsV1"]
    assert "f:a" in fields["f:data"]
    assert "f:app" in fields["f:metadata"]["f:labels"]


def test_apply_accepts_a_yaml_body(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n"
    resp = apply(api, cm_path(ns, name), body, "ctl")
    assert resp.status == 201
    assert resp.json()["data"] == {"k": "v"}


def test_apply_without_field_manager_is_invalid(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), None)
    body = assert_status(resp, 422, "Invalid")
    assert "fieldManager" in body["message"]


def test_force_on_a_non_apply_patch_is_invalid(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}))
    resp = raw(
        api,
        "PATCH",
        cm_path(ns, name),
        query=[("force", "true")],
        body=json.dumps({"data": {"a": "2"}}),
        content_type="application/merge-patch+json",
    )
    body = assert_status(resp, 422, "Invalid")
    assert "force" in body["message"]


def test_reapplying_the_same_configuration_changes_nothing(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    first = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "ctl").json()
    again = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "ctl")
    assert again.status == 200
    assert again.json()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


# ------------------------------------------------------------------ ownership


def test_create_and_update_record_update_entries(api: ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}), field_manager="maker")
    core.patch_namespaced_config_map(name, ns, {"data": {"b": "2"}}, field_manager="patcher")
    obj = raw(api, "GET", cm_path(ns, name)).json()
    entries = managers(obj)
    assert "f:a" in entries[("maker", "Update")]["fieldsV1"]["f:data"]
    assert entries[("maker", "Update")]["apiVersion"] == "v1"
    patched = entries[("patcher", "Update")]["fieldsV1"]["f:data"]
    assert "f:b" in patched and "f:a" not in patched


def test_entries_are_listed_apply_first_then_by_time_then_manager(api: ApiClient, ns: str) -> None:
    """kube-apiserver sorts ``managedFields`` as it encodes them (``sortEncodedManagedFields``):
    by operation (``Apply`` before ``Update``), then time, then manager, whatever order the
    writes came in."""
    core = client.CoreV1Api(api)
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}), field_manager="zeta")
    core.patch_namespaced_config_map(name, ns, {"data": {"b": "2"}}, field_manager="alpha")
    assert apply(api, cm_path(ns, name), cm(name, {"c": "3"}), "applier").status == 200
    obj = raw(api, "GET", cm_path(ns, name)).json()
    order = [(e["operation"], e["manager"]) for e in obj["metadata"]["managedFields"]]
    assert order[0] == ("Apply", "applier")
    updates = [e for e in obj["metadata"]["managedFields"] if e["operation"] == "Update"]
    # by time, then by manager when in the same second
    keys = [(e["time"], e["manager"]) for e in updates]
    assert keys == sorted(keys), keys


def test_an_update_takes_the_fields_it_changes_from_other_managers(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}), "applier")
    core = client.CoreV1Api(api)
    core.patch_namespaced_config_map(name, ns, {"data": {"a": "2"}}, field_manager="other")
    entries = managers(raw(api, "GET", cm_path(ns, name)).json())
    assert set(entries[("applier", "Apply")]["fieldsV1"]["f:data"]) == {"f:b"}
    assert set(entries[("other", "Update")]["fieldsV1"]["f:data"]) == {"f:a"}


def next_second() -> None:
    """Wait until the clock's second has passed: entry times have second precision, so a
    time set after this differs from one set before."""
    t0 = int(time.time())
    wait_for(lambda: int(time.time()) > t0, what="the next second")


def made_by_a(core: client.CoreV1Api, api: ApiClient, ns: str) -> tuple[str, str]:
    """A ConfigMap with ``data.x`` and ``data.y`` created by the field manager "a", a
    second ago: its name, and the time of a's entry."""
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"x": "1", "y": "1"}), field_manager="a")
    made = managers(raw(api, "GET", cm_path(ns, name)).json())[("a", "Update")]["time"]
    next_second()
    return name, made


def test_an_update_leaves_the_time_of_the_entries_it_takes_fields_from(
    api: ApiClient, ns: str
) -> None:
    core = client.CoreV1Api(api)
    name, made = made_by_a(core, api, ns)
    core.patch_namespaced_config_map(name, ns, {"data": {"x": "2"}}, field_manager="b")
    entries = managers(raw(api, "GET", cm_path(ns, name)).json())
    assert set(entries[("a", "Update")]["fieldsV1"]["f:data"]) == {"f:y"}
    assert entries[("a", "Update")]["time"] == made
    assert entries[("b", "Update")]["time"] > made
    # a write that only removes fields changes none: the writer gets no entry
    core.patch_namespaced_config_map(name, ns, {"data": {"y": None}}, field_manager="c")
    entries = managers(raw(api, "GET", cm_path(ns, name)).json())
    assert ("a", "Update") not in entries
    assert ("c", "Update") not in entries


def test_an_update_sets_its_time_only_when_it_changes_something(api: ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    name, made = made_by_a(core, api, ns)
    core.patch_namespaced_config_map(name, ns, {"data": {"x": "1"}}, field_manager="a")
    entry = managers(raw(api, "GET", cm_path(ns, name)).json())[("a", "Update")]
    assert entry["time"] == made
    core.patch_namespaced_config_map(name, ns, {"data": {"y": None}}, field_manager="a")
    entry = managers(raw(api, "GET", cm_path(ns, name)).json())[("a", "Update")]
    assert (set(entry["fieldsV1"]["f:data"]), entry["time"]) == ({"f:x"}, made)
    core.patch_namespaced_config_map(name, ns, {"data": {"x": "2"}}, field_manager="a")
    entry = managers(raw(api, "GET", cm_path(ns, name)).json())[("a", "Update")]
    assert entry["time"] > made


def test_an_apply_leaves_the_time_of_the_entries_it_takes_fields_from(
    api: ApiClient, ns: str
) -> None:
    name = unique("cm")
    first = apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}), "first").json()
    made = managers(first)[("first", "Apply")]["time"]
    next_second()
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "second", force=True)
    entries = managers(resp.json())
    assert set(entries[("first", "Apply")]["fieldsV1"]["f:data"]) == {"f:b"}
    assert entries[("first", "Apply")]["time"] == made
    assert entries[("second", "Apply")]["time"] > made


def test_applying_a_field_owned_by_another_manager_conflicts(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}), "first")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2", "b": "2"}), "second")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"].startswith('Apply failed with 2 conflicts: conflicts with "first":')
    causes = body["details"]["causes"]
    assert sorted(c["field"] for c in causes) == [".data.a", ".data.b"]
    assert {c["reason"] for c in causes} == {"FieldManagerConflict"}
    assert {c["message"] for c in causes} == {'conflict with "first"'}
    assert raw(api, "GET", cm_path(ns, name)).json()["data"] == {"a": "1", "b": "1"}


def test_a_conflict_with_an_updater_names_its_api_version(api: ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}), field_manager="maker")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "applier")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "maker" using v1: .data.a'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "maker" using v1',
            "field": ".data.a",
        }
    ]


def test_applying_the_same_value_shares_ownership(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "first")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "second")
    assert resp.status == 200
    entries = managers(resp.json())
    assert "f:a" in entries[("first", "Apply")]["fieldsV1"]["f:data"]
    assert "f:a" in entries[("second", "Apply")]["fieldsV1"]["f:data"]


def test_force_takes_the_conflicting_fields_over(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}), "first")
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "second", force=True)
    assert resp.status == 200
    obj = resp.json()
    assert obj["data"] == {"a": "2", "b": "1"}
    entries = managers(obj)
    assert set(entries[("first", "Apply")]["fieldsV1"]["f:data"]) == {"f:b"}
    assert set(entries[("second", "Apply")]["fieldsV1"]["f:data"]) == {"f:a"}


def test_a_field_no_longer_applied_is_removed(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}, labels={"x": "1"}), "ctl")
    obj = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "ctl").json()
    assert obj["data"] == {"a": "1"}
    assert "x" not in (obj["metadata"].get("labels") or {})


def test_a_field_no_longer_applied_stays_while_another_manager_owns_it(
    api: ApiClient, ns: str
) -> None:
    name = unique("cm")
    apply(api, cm_path(ns, name), cm(name, {"a": "1", "b": "1"}), "first")
    apply(api, cm_path(ns, name), cm(name, {"b": "1"}), "second")
    obj = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "first").json()
    assert obj["data"] == {"a": "1", "b": "1"}
    entries = managers(obj)
    assert set(entries[("second", "Apply")]["fieldsV1"]["f:data"]) == {"f:b"}
    assert set(entries[("first", "Apply")]["fieldsV1"]["f:data"]) == {"f:a"}


def test_fields_set_by_others_are_left_alone(api: ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"mine": "no"}), field_manager="maker")
    obj = apply(api, cm_path(ns, name), cm(name, {"theirs": "yes"}), "ctl").json()
    assert obj["data"] == {"mine": "no", "theirs": "yes"}


def test_filling_an_empty_map_leaves_the_map_to_its_owner(
    api: ApiClient, ns: str, widget_crds: dict[str, str]
) -> None:
    # structured-merge-diff decides (typed/compare.go, merge/update.go): an empty map is a
    # leaf only while it is empty on both sides of an update, so filling ``data: {}`` adds
    # ``data.x`` and neither modifies nor removes ``data`` (its owner keeps it); emptying it
    # removes ``data.x`` and adds nothing. A custom resource, since a built-in kind's Go type
    # drops an empty ``data`` (``omitempty``) before field management sees it.
    name, plural = unique("wdg"), widget_crds["widgets"]
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        WIDGET_GROUP,
        "v1",
        ns,
        plural,
        widget(name, {"color": "red", "data": {}}),
        field_manager="maker",
    )
    path = f"/apis/{WIDGET_GROUP}/v1/namespaces/{ns}/{plural}/{name}"

    def write(manager: str, data: dict[str, Any]) -> dict[str, Any]:
        resp = raw(
            api,
            "PATCH",
            path,
            query=[("fieldManager", manager)],
            body={"spec": {"data": data}},
            content_type="application/merge-patch+json",
        )
        assert resp.status == 200, resp.data
        out: dict[str, Any] = resp.json()
        return out

    obj = write("filler", {"x": "1"})
    assert obj["spec"]["data"] == {"x": "1"}
    spec = managers(obj)[("maker", "Update")]["fieldsV1"]["f:spec"]
    assert spec["f:data"] == {} and "f:color" in spec
    filler = managers(obj)[("filler", "Update")]["fieldsV1"]
    assert filler == {"f:spec": {"f:data": {"f:x": {}}}}

    obj = write("emptier", {"x": None})
    assert obj["spec"]["data"] == {}
    assert {m for m, _ in managers(obj)} == {"maker"}
    assert managers(obj)[("maker", "Update")]["fieldsV1"]["f:spec"]["f:data"] == {}


# ------------------------------------------------------------------ merge semantics


def test_containers_merge_by_name_and_ports_by_container_port(api: ApiClient, ns: str) -> None:
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    base = {"apiVersion": "apps/v1", "kind": "Deployment", **deployment(name)}
    base["spec"]["template"]["spec"]["containers"] = [
        {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}
    ]
    assert apply(api, path, base, "web-owner").status == 201
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": base["spec"]["selector"],
            "template": {
                "metadata": base["spec"]["template"]["metadata"],
                "spec": {
                    "containers": [
                        {"name": "web", "ports": [{"containerPort": 9090, "name": "metrics"}]},
                        {"name": "side", "image": "busybox"},
                    ]
                },
            },
        },
    }
    resp = apply(api, path, sidecar, "side-owner")
    assert resp.status == 200, resp.json()
    containers = resp.json()["spec"]["template"]["spec"]["containers"]
    by_name = {c["name"]: c for c in containers}
    assert set(by_name) == {"web", "side"}
    assert by_name["web"]["image"] == "nginx"
    assert sorted(p["containerPort"] for p in by_name["web"]["ports"]) == [80, 9090]


def _dns_deployment(name: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", **deployment(name)}
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "dns", "image": "registry.k8s.io/pause:3.9", "ports": ports}
    ]
    return body


def test_container_ports_are_keyed_by_port_and_protocol(api: ApiClient, ns: str) -> None:
    # k8s.io/api core/v1 Container.Ports: +listType=map +listMapKey=containerPort
    # +listMapKey=protocol, and protocol defaults to TCP (structured-merge-diff keys an item
    # without it by the default: merge/default_keys_test.go), so UDP/53 and TCP/53 are two
    # items and another manager's UDP/53 neither conflicts with nor replaces TCP/53
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    resp = apply(api, path, _dns_deployment(name, [{"containerPort": 53, "name": "dns"}]), "op")
    assert resp.status == 201, resp.json()
    udp = _dns_deployment(name, [{"containerPort": 53, "protocol": "UDP", "name": "dns-udp"}])
    resp = apply(api, path, udp, "human")
    assert resp.status == 200, resp.json()
    ports = resp.json()["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert sorted((p["protocol"], p["name"]) for p in ports) == [
        ("TCP", "dns"),
        ("UDP", "dns-udp"),
    ]
    fields = managers(resp.json())[("op", "Apply")]["fieldsV1"]["f:spec"]["f:template"]
    container = fields["f:spec"]["f:containers"]['k:{"name":"dns"}']
    assert set(container["f:ports"]) == {'k:{"containerPort":53,"protocol":"TCP"}'}


def test_a_service_port_no_longer_applied_is_removed_by_port_and_protocol(
    api: ApiClient, ns: str
) -> None:
    # core/v1 ServiceSpec.Ports: +listType=map +listMapKey=port +listMapKey=protocol
    name = unique("svc")
    path = f"/api/v1/namespaces/{ns}/services/{name}"

    def svc(ports: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": ports},
        }

    both = [
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
    ]
    resp = apply(api, path, svc(both), "op")
    assert resp.status == 201, resp.json()
    assert len(resp.json()["spec"]["ports"]) == 2
    resp = apply(api, path, svc([{"name": "dns-tcp", "port": 53}]), "op")
    assert resp.status == 200, resp.json()
    ports = resp.json()["spec"]["ports"]
    assert [(p["name"], p["protocol"]) for p in ports] == [("dns-tcp", "TCP")]


def test_an_item_dropped_goes_with_the_fields_another_manager_added_to_it(
    api: ApiClient, ns: str
) -> None:
    # structured-merge-diff merge/update.go prune + typed/remove.go: an item the applier
    # owned and no longer applies is removed whole, with what an updater added to it
    # (multiple_appliers_test.go "remove_one_with_dangling_subitem_keep_one"), and the
    # updater no longer owns those fields; the item the updater added itself stays
    name = unique("deploy")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    body = {"apiVersion": "apps/v1", "kind": "Deployment", **deployment(name)}
    image = "registry.k8s.io/pause:3.9"
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "app", "image": image},
        {"name": "old", "image": image},
    ]
    assert apply(api, path, body, "op").status == 201
    injected = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "old", "env": [{"name": "INJ", "value": "1"}]},
                        {"name": "sidecar", "image": image},
                    ]
                }
            }
        }
    }
    resp = raw(
        api,
        "PATCH",
        path,
        query=[("fieldManager", "injector")],
        body=injected,
        content_type="application/strategic-merge-patch+json",
    )
    assert resp.status == 200, resp.data
    body["spec"]["template"]["spec"]["containers"] = [{"name": "app", "image": image}]
    resp = apply(api, path, body, "op")
    assert resp.status == 200, resp.json()
    obj = resp.json()
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == [
        "app",
        "sidecar",
    ]
    injector = managers(obj)[("injector", "Update")]["fieldsV1"]
    containers = injector["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(containers) == {'k:{"name":"sidecar"}'}


def test_keyed_lists_strategic_merge_does_not_merge_are_keyed_for_apply(api: ApiClient) -> None:
    # k8s.io/api admissionregistration/v1 ValidatingAdmissionPolicySpec.Variables:
    # +listType=map +listMapKey=name, with no strategic merge key: two managers' variables
    # are two items, not one atomic list that conflicts
    name = unique("policy") + ".example.com"
    path = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}"

    def policy(variables: list[dict[str, str]], **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"variables": variables, **spec},
        }

    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["configmaps"],
        }
    ]
    first = policy(
        [{"name": "a", "expression": "1"}],
        matchConstraints={"resourceRules": rules},
        validations=[{"expression": "true"}],
    )
    try:
        assert apply(api, path, first, "first").status == 201
        resp = apply(api, path, policy([{"name": "b", "expression": "2"}]), "second")
        assert resp.status == 200, resp.json()
        assert [v["name"] for v in resp.json()["spec"]["variables"]] == ["a", "b"]
    finally:
        raw(api, "DELETE", path)


def test_custom_resource_lists_merge_by_their_declared_list_type(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    first = {
        "ports": [{"name": "http", "port": 80}],
        "tags": ["a"],
        "args": ["--one"],
        "selector": {"app": "x", "tier": "web"},
    }
    assert apply(api, path, gizmo(name, first), "first").status == 201
    second = {
        "ports": [{"name": "metrics", "port": 9090}],
        "tags": ["b"],
    }
    spec = apply(api, path, gizmo(name, second), "second").json()["spec"]
    assert sorted(p["name"] for p in spec["ports"]) == ["http", "metrics"]
    assert sorted(spec["tags"]) == ["a", "b"]
    assert spec["args"] == ["--one"]
    # An atomic list or map belongs to one manager as a whole: changing it conflicts.
    resp = apply(api, path, gizmo(name, {"args": ["--two"]}), "third")
    body = assert_status(resp, 409, "Conflict")
    assert [c["field"] for c in body["details"]["causes"]] == [".spec.args"]
    resp = apply(api, path, gizmo(name, {"selector": {"app": "x"}}), "third")
    body = assert_status(resp, 409, "Conflict")
    assert [c["field"] for c in body["details"]["causes"]] == [".spec.selector"]


def test_conflicts_in_keyed_lists_name_the_item(api: ApiClient, ns: str, gizmos: str) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    apply(api, path, gizmo(name, {"ports": [{"name": "http", "port": 80}]}), "first")
    resp = apply(api, path, gizmo(name, {"ports": [{"name": "http", "port": 81}]}), "second")
    body = assert_status(resp, 409, "Conflict")
    assert [c["field"] for c in body["details"]["causes"]] == ['.spec.ports[name="http"].port']


def test_a_list_map_key_left_out_counts_with_its_schema_default(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    # structured-merge-diff keys an item without a defaulted key field by the default
    # (merge/default_keys_test.go "apply_missing_defaulted_key_with_conflict")
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    human = gizmo(name, {"endpoints": [{"port": 80, "owner": "human"}]})
    resp = apply(api, path, human, "human")
    assert resp.status == 201, resp.json()
    assert resp.json()["spec"]["endpoints"] == [{"port": 80, "protocol": "TCP", "owner": "human"}]
    fields = managers(resp.json())[("human", "Apply")]["fieldsV1"]["f:spec"]["f:endpoints"]
    assert set(fields) == {'k:{"port":80,"protocol":"TCP"}'}
    op = gizmo(name, {"endpoints": [{"port": 80, "protocol": "TCP", "owner": "op"}]})
    body = assert_status(apply(api, path, op, "op"), 409, "Conflict")
    assert [c["field"] for c in body["details"]["causes"]] == [
        '.spec.endpoints[port=80,protocol="TCP"].owner'
    ]
    resp = apply(api, path, human, "human")
    assert resp.status == 200, resp.json()
    assert resp.json()["spec"]["endpoints"] == [{"port": 80, "protocol": "TCP", "owner": "human"}]


def test_an_item_no_longer_applied_is_removed_from_a_keyed_list(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    both = {"ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 81}]}
    apply(api, path, gizmo(name, both), "ctl")
    spec = apply(api, path, gizmo(name, {"ports": [{"name": "http", "port": 80}]}), "ctl")
    assert [p["name"] for p in spec.json()["spec"]["ports"]] == ["http"]


# ------------------------------------------------------------------ status


def test_apply_to_the_status_subresource_changes_only_status(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    apply(api, path, gizmo(name, {"size": 1}), "spec-owner")
    body = {**gizmo(name, {"size": 5}), "status": {"phase": "Ready", "ready": 1}}
    resp = apply(api, path + "/status", body, "status-owner")
    assert resp.status == 200, resp.json()
    obj = resp.json()
    assert obj["status"] == {"phase": "Ready", "ready": 1}
    assert obj["spec"] == {"size": 1}
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == "status-owner")
    assert entry["operation"] == "Apply"
    assert entry["subresource"] == "status"
    assert set(entry["fieldsV1"]) == {"f:status"}
    # The main resource ignores status in an applied configuration.
    obj = apply(api, path, {**gizmo(name, {"size": 1}), "status": {"phase": "x"}}, "spec-owner")
    assert obj.json()["status"]["phase"] == "Ready"


def test_a_strategic_merge_patch_on_a_custom_resource_lists_the_accepted_types(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    apply(api, path, gizmo(name, {"size": 1}), "ctl")
    resp = raw(
        api,
        "PATCH",
        path,
        body=json.dumps({"spec": {"size": 2}}),
        content_type="application/strategic-merge-patch+json",
    )
    body = assert_status(resp, 415, "UnsupportedMediaType")
    accepted = body["message"].split("accepted media types include: ", 1)[1]
    types = {t.strip() for t in accepted.split(",")}
    assert "application/strategic-merge-patch+json" not in types
    assert {"application/merge-patch+json", "application/json-patch+json", APPLY} <= types


def _untracked_cm(api: ApiClient, ns: str, data: dict[str, str]) -> str:
    """A ConfigMap whose managedFields were reset (an update with ``managedFields: []``,
    as kube-apiserver allows): nobody owns its fields, as an object written before field
    management or restored from a backup."""
    name = unique("cm")
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, configmap(name, data), field_manager="maker")
    obj = core.read_namespaced_config_map(name, ns).to_dict()
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "resourceVersion": obj["metadata"]["resource_version"],
            "managedFields": [],
        },
        "data": data,
    }
    resp = raw(api, "PUT", cm_path(ns, name), body=body, content_type="application/json")
    assert resp.status == 200, resp.data
    assert not resp.json()["metadata"].get("managedFields")
    return name


def test_a_first_apply_conflicts_with_the_fields_nobody_owned(api: ApiClient, ns: str) -> None:
    # k8s.io/apimachinery managedfields/internal/skipnonapplied.go: the fields of an object
    # without managedFields are recorded as an Update of "before-first-apply" before the
    # first apply
    name = _untracked_cm(api, ns, {"a": "1", "b": "2"})
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "9"}), "op")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a'
    )
    obj = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "op").json()
    first = managers(obj)[("before-first-apply", "Update")]
    assert first["apiVersion"] == "v1"
    assert set(first["fieldsV1"]["f:data"]) == {"f:a", "f:b"}
    # dropping a field the applier only shared keeps it
    obj = apply(api, cm_path(ns, name), cm(name, {}), "op").json()
    assert obj["data"] == {"a": "1", "b": "2"}


def test_an_update_of_an_object_nobody_owns_fields_of_starts_no_tracking(
    api: ApiClient, ns: str
) -> None:
    # skipNonAppliedManager.Update: an existing object with empty managedFields stays so
    name = _untracked_cm(api, ns, {"a": "1"})
    resp = raw(
        api,
        "PATCH",
        cm_path(ns, name),
        query=[("fieldManager", "labeller")],
        body={"metadata": {"labels": {"x": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert resp.status == 200, resp.data
    assert resp.json()["metadata"]["labels"] == {"x": "1"}
    assert not resp.json()["metadata"].get("managedFields")


def test_a_stale_resource_version_in_the_configuration_conflicts(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    created = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "ctl").json()
    apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "ctl")
    stale = cm(name, {"a": "3"})
    stale["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    resp = apply(api, cm_path(ns, name), stale, "ctl")
    assert_status(resp, 409, "Conflict")
    assert raw(api, "GET", cm_path(ns, name)).json()["data"] == {"a": "2"}


# ------------------------------------------------------------------ undeclared fields


def test_an_apply_creating_the_object_ignores_a_resource_version(api: ApiClient, ns: str) -> None:
    # kube-apiserver creates an applied object through its registry's Update
    # (registry/generic/registry/store.go, forceAllowCreate): the configuration's
    # resourceVersion is cleared for storage, not refused as a create would refuse it
    name = unique("cm")
    body = cm(name, {"a": "1"}, resourceVersion="12345")
    resp = apply(api, cm_path(ns, name), body, "ctl")
    assert resp.status == 201, resp.data
    obj = resp.json()
    assert obj["data"] == {"a": "1"} and obj["metadata"]["resourceVersion"]


@pytest.mark.parametrize("validation", ["", "Ignore"])
def test_applying_a_field_the_kind_does_not_declare_fails_whatever_the_validation(
    api: ApiClient, ns: str, validation: str
) -> None:
    # kube-apiserver cannot convert the configuration to its typed form: a 500 that names the
    # field (upstream may make it a 400: kubernetes/kubernetes#139253)
    name = unique("dep")
    body = deployment(name)
    body["spec"]["replicaz"] = 3
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    query = [("fieldManager", "test")] + ([("fieldValidation", validation)] if validation else [])
    resp = raw(api, "PATCH", path, query=query, body=json.dumps(body), content_type=APPLY)
    assert resp.status in (400, 500), resp.data
    message = resp.json()["message"]
    assert message.startswith(
        f"failed to create typed patch object ({ns}/{name}; apps/v1, Kind=Deployment)"
    )
    assert message.endswith(".spec.replicaz: field not declared in schema"), message
    assert raw(api, "GET", path).status == 404


def test_duplicate_keys_in_an_applied_keyed_list_fail_the_apply(api: ApiClient, ns: str) -> None:
    # kube-apiserver converts the applied configuration to its typed form without
    # typed.AllowDuplicates (k8s.io/apimachinery managedfields/internal/structuredmerge.go;
    # structured-merge-diff typed/validate.go), so two env items named A fail the apply
    name = unique("dep")
    body = deployment(name)
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "A", "value": "2"},
    ]
    container = body["spec"]["template"]["spec"]["containers"][0]["name"]
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
    resp = apply(api, path, body, "test")
    assert resp.status in (400, 500), resp.data
    message = resp.json()["message"]
    assert message.startswith(
        f"failed to create typed patch object ({ns}/{name}; apps/v1, Kind=Deployment)"
    )
    assert message.endswith(
        f'.spec.template.spec.containers[name="{container}"].env: '
        'duplicate entries for key [name="A"]'
    ), message
    assert raw(api, "GET", path).status == 404


def test_an_undeclared_field_of_a_custom_resource_is_named_by_its_typed_path(
    api: ApiClient, ns: str, gizmos: str
) -> None:
    name = unique("gz")
    path = f"{gizmos}/namespaces/{ns}/{GIZMOS}/{name}"
    resp = apply(api, path, gizmo(name, {"size": 1, "colour": "red"}), "test")
    assert resp.status in (400, 500), resp.data
    assert resp.json()["message"].endswith(".spec.colour: field not declared in schema")
    spec = {"ports": [{"name": "http", "port": 80, "proto": "TCP"}]}
    resp = apply(api, path, gizmo(name, spec), "test")
    assert resp.status in (400, 500), resp.data
    assert resp.json()["message"].endswith(
        '.spec.ports[name="http"].proto: field not declared in schema'
    ), resp.json()["message"]


# ------------------------------------------------- client-side apply's annotation (kubectl)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def client_side_applied(
    core: client.CoreV1Api, ns: str, name: str, applied: dict[str, str], live: dict[str, str]
) -> None:
    """A ConfigMap as ``kubectl apply`` (client-side) leaves one: ``applied`` in the
    last-applied annotation, written by kubectl's manager with ``live`` as its data."""
    annotation = json.dumps(cm(name, applied, annotations={}, namespace=ns))
    body = configmap(name, live, annotations={LAST_APPLIED: annotation})
    core.create_namespaced_config_map(ns, body, field_manager="kubectl-client-side-apply")


def test_kubectls_server_side_apply_takes_over_what_its_client_side_apply_set(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # kube-apiserver's lastAppliedManager: `kubectl apply --server-side` after
    # `kubectl apply` changes a field the annotation holds as live, without --force-conflicts
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1", "b": "1"}, {"a": "1", "b": "1"})
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "kubectl")
    assert resp.status == 200, resp.data
    obj = resp.json()
    assert obj["data"] == {"a": "2", "b": "1"}
    entries = managers(obj)
    assert set(entries[("kubectl", "Apply")]["fieldsV1"]["f:data"]) == {"f:a"}
    assert set(entries[("kubectl-client-side-apply", "Update")]["fieldsV1"]["f:data"]) == {"f:b"}


def test_only_kubectls_manager_takes_over_what_client_side_apply_set(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1"}, {"a": "1"})
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "kubectl-other")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a'
    )


def test_a_field_no_longer_as_last_applied_still_conflicts_and_alone(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # b changed since it was applied client-side: the annotation no longer vouches for it,
    # and the 409 names only the conflicts the annotation does not allow
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1", "b": "1"}, {"a": "1", "b": "9"})
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "2", "b": "3"}), "kubectl")
    body = assert_status(resp, 409, "Conflict")
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.b'
    )
    assert [c["field"] for c in body["details"]["causes"]] == [".data.b"]
    assert core.read_namespaced_config_map(name, ns).data == {"a": "1", "b": "9"}


def test_kubectls_server_side_apply_rewrites_the_last_applied_configuration(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # kube-apiserver's lastAppliedUpdater: the configuration applied, as Go encodes it
    # (keys sorted, <, > and & escaped, a newline at the end), without the annotation
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1", "old": "x"}, {"a": "1", "old": "x"})
    applied = cm(name, {"a": "x<y&z>", "n": "é"}, annotations={"note": "1", LAST_APPLIED: "no"})
    resp = apply(api, cm_path(ns, name), applied, "kubectl", force=True)
    assert resp.status == 200, resp.data
    annotations = resp.json()["metadata"]["annotations"]
    assert annotations == {
        "note": "1",
        LAST_APPLIED: '{"apiVersion":"v1","data":{"a":"x\\u003cy\\u0026z\\u003e","n":"é"},'
        '"kind":"ConfigMap","metadata":{"annotations":{"note":"1"},"name":"' + name + '"}}\n',
    }


def test_a_last_applied_configuration_over_the_annotations_size_limit_is_dropped(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # SetLastApplied: the annotations may hold 256 KiB; the configuration with a 150 KB
    # annotation, and that annotation, do not fit together
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1"}, {"a": "1"})
    big = "x" * 150_000
    resp = apply(api, cm_path(ns, name), cm(name, {"a": "1"}, annotations={"big": big}), "kubectl")
    assert resp.status == 200, resp.data
    assert resp.json()["metadata"]["annotations"] == {"big": big}


def test_another_managers_apply_leaves_the_last_applied_configuration(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    client_side_applied(core, ns, name, {"a": "1"}, {"a": "1"})
    before = core.read_namespaced_config_map(name, ns).metadata.annotations
    resp = apply(api, cm_path(ns, name), cm(name, {"b": "2"}), "kubectl-other")
    assert resp.json()["metadata"]["annotations"] == before


def test_kubectls_apply_adds_no_last_applied_configuration(api: ApiClient, ns: str) -> None:
    name = unique("cm")
    created = apply(api, cm_path(ns, name), cm(name, {"a": "1"}), "kubectl")
    assert "annotations" not in created.json()["metadata"]
    updated = apply(api, cm_path(ns, name), cm(name, {"a": "2"}), "kubectl")
    assert updated.json()["data"] == {"a": "2"}
    assert "annotations" not in updated.json()["metadata"]
