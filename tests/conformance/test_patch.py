"""PATCH with merge-patch, json-patch and strategic-merge-patch bodies."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ._support import configmap, deployment, raises_status, status_body, unique, widget

pytestmark = pytest.mark.timeout(30)

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def test_merge_patch_adds_replaces_and_removes_keys_with_null(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(
        ns, configmap(name, {"keep": "1", "change": "old", "drop": "x"}, labels={"a": "1"})
    )
    patched = core.patch_namespaced_config_map(
        name,
        ns,
        {"metadata": {"labels": {"b": "2"}}, "data": {"change": "new", "drop": None, "add": "y"}},
        _content_type=MERGE,
    )
    assert patched.data == {"keep": "1", "change": "new", "add": "y"}
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    assert core.read_namespaced_config_map(name, ns).data == patched.data


def test_merge_patch_replaces_lists_whole(apps: client.AppsV1Api, ns: str) -> None:
    name = unique("deploy")
    body = deployment(name)
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    apps.create_namespaced_deployment(ns, body)
    patched = apps.patch_namespaced_deployment(
        name,
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "nginx"}]}}}},
        _content_type=MERGE,
    )
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("only", "nginx")]


def test_json_patch_applies_operations_in_order(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1", "b": "2"}))
    patched = core.patch_namespaced_config_map(
        name,
        ns,
        [
            {"op": "add", "path": "/data/c", "value": "3"},
            {"op": "replace", "path": "/data/a", "value": "10"},
            {"op": "remove", "path": "/data/b"},
            {"op": "add", "path": "/metadata/labels", "value": {"via": "json-patch"}},
            {"op": "test", "path": "/data/c", "value": "3"},
        ],
        _content_type=JSON_PATCH,
    )
    assert patched.data == {"a": "10", "c": "3"}
    assert patched.metadata.labels == {"via": "json-patch"}


def test_json_patch_with_failing_test_op_is_invalid_and_changes_nothing(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    before = core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}))
    with raises_status(422, "Invalid"):
        core.patch_namespaced_config_map(
            name,
            ns,
            [
                {"op": "replace", "path": "/data/a", "value": "2"},
                {"op": "test", "path": "/data/a", "value": "1"},
            ],
            _content_type=JSON_PATCH,
        )
    after = core.read_namespaced_config_map(name, ns)
    assert after.data == {"a": "1"}
    assert after.metadata.resource_version == before.metadata.resource_version


def test_json_patch_removing_missing_path_is_invalid(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}))
    with raises_status(422, "Invalid"):
        core.patch_namespaced_config_map(
            name, ns, [{"op": "remove", "path": "/data/nothing"}], _content_type=JSON_PATCH
        )


#: what kube-apiserver answers any JSON patch that does not apply with: one generic message,
#: no causes, empty details (clients that want to know why read the object again)
NOT_APPLIED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server rejected our request due to an error in our request",
    "reason": "Invalid",
    "details": {},
    "code": 422,
}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/data/a", "value": "2"}],
        [{"op": "remove", "path": "/data/nothing"}],
        [{"op": "replace", "path": "/metadata/labels/x", "value": "y"}],
        [{"op": "bogus", "path": "/data/a"}],
    ],
    ids=["failed-test", "remove-missing", "replace-missing", "unknown-op"],
)
def test_json_patch_that_does_not_apply_gets_kube_apiservers_generic_invalid(
    core: client.CoreV1Api, ns: str, ops: list[dict[str, str]]
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}))
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_config_map(name, ns, ops, _content_type=JSON_PATCH)
    assert status == NOT_APPLIED


def test_json_patch_of_the_scale_subresource_that_does_not_apply_is_the_same(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name))
    with raises_status(422, "Invalid") as status:
        apps.patch_namespaced_deployment_scale(
            name,
            ns,
            [{"op": "test", "path": "/spec/replicas", "value": 7}],
            _content_type=JSON_PATCH,
        )
    assert status == NOT_APPLIED


def test_strategic_merge_patch_merges_containers_by_name(apps: client.AppsV1Api, ns: str) -> None:
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name, image="busybox:1"))
    patched = apps.patch_namespaced_deployment(
        name,
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "main", "image": "busybox:2"},
                            {"name": "side", "image": "nginx"},
                        ]
                    }
                }
            }
        },
        _content_type=STRATEGIC,
    )
    containers = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert containers == {"main": "busybox:2", "side": "nginx"}


def test_strategic_merge_patch_delete_directive_removes_list_element(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    body = deployment(name)
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    apps.create_namespaced_deployment(ns, body)
    patched = apps.patch_namespaced_deployment(
        name,
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}},
        _content_type=STRATEGIC,
    )
    assert [c.name for c in patched.spec.template.spec.containers] == ["main"]


@pytest.mark.parametrize(
    ("item", "printed"),
    [
        (
            {"image": "nginx:2", "ports": [{"containerPort": 80}]},
            "map[image:nginx:2 ports:[map[containerPort:80]]]",
        ),
        ({"$patch": "delete"}, "map[$patch:delete]"),
    ],
)
def test_strategic_merge_patch_item_without_its_merge_key_is_an_internal_error(
    apps: client.AppsV1Api, ns: str, item: dict[str, Any], printed: str
) -> None:
    # strategicpatch's ErrNoMergeKey is no Status: kube-apiserver answers it as a 500 without
    # a reason, the patch item printed as Go prints a map
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name))
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment(
            name,
            ns,
            {"spec": {"template": {"spec": {"containers": [item]}}}},
            _content_type=STRATEGIC,
        )
    status = status_body(info.value)
    assert info.value.status == 500, status
    assert (status["status"], status["code"], status.get("reason")) == ("Failure", 500, None)
    assert status["message"] == f"map: {printed} does not contain declared merge key: name"
    containers = apps.read_namespaced_deployment(name, ns).spec.template.spec.containers
    assert [c.name for c in containers] == ["main"]


def test_strategic_merge_patch_into_a_list_the_object_lacks_takes_the_patch_items(
    apps: client.AppsV1Api, ns: str
) -> None:
    # kube's strategicpatch takes a field the object lacks from the patch as it is (no merge
    # key needed: validation judges the items); kube-apiserver warns of the empty name
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name))
    patched = apps.patch_namespaced_deployment(
        name,
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "imagePullSecrets": [{}],
                        "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                    }
                }
            }
        },
        _content_type=STRATEGIC,
    )
    spec = patched.spec.template.spec
    assert [s.name for s in spec.image_pull_secrets] == [None]
    assert [(e.name, e.value) for e in spec.containers[0].env] == [("A", "1")]
    assert [v.name for v in spec.volumes] == ["data"]


def test_strategic_merge_patch_into_a_list_the_object_lacks_is_judged_by_validation(
    apps: client.AppsV1Api, ns: str
) -> None:
    # an init container without its merge key (name) is the item validation refuses
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name))
    with raises_status(422, "Invalid") as status:
        apps.patch_namespaced_deployment(
            name,
            ns,
            {"spec": {"template": {"spec": {"initContainers": [{"image": "busybox"}]}}}},
            _content_type=STRATEGIC,
        )
    causes = [(c["reason"], c["field"]) for c in status["details"]["causes"]]
    assert ("FieldValueRequired", "spec.template.spec.initContainers[0].name") in causes


def test_strategic_merge_patch_replaces_a_service_accounts_image_pull_secrets(
    core: client.CoreV1Api, ns: str
) -> None:
    # ServiceAccount.imagePullSecrets has no patchStrategy (a PodSpec's merges by name);
    # its secrets merge by name
    name = unique("sa")
    body = {
        "metadata": {"name": name},
        "imagePullSecrets": [{"name": "old"}],
        "secrets": [{"name": "kept"}],
    }
    core.create_namespaced_service_account(ns, body)
    patched = core.patch_namespaced_service_account(
        name,
        ns,
        {"imagePullSecrets": [{"name": "new"}], "secrets": [{"name": "added"}]},
        _content_type=STRATEGIC,
    )
    assert [s.name for s in patched.image_pull_secrets] == ["new"]
    assert sorted(s.name for s in patched.secrets) == ["added", "kept"]


def test_strategic_merge_patch_on_maps_behaves_like_merge(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1", "b": "2"}))
    patched = core.patch_namespaced_config_map(
        name, ns, {"data": {"a": "9", "b": None}}, _content_type=STRATEGIC
    )
    assert patched.data == {"a": "9"}


def test_client_default_patch_of_a_dict_is_accepted(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, {"a": "1"}))
    assert core.patch_namespaced_config_map(name, ns, {"data": {"b": "2"}}).data == {
        "a": "1",
        "b": "2",
    }


def test_custom_resources_accept_merge_and_json_patch(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str], ns: str
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    name = unique("w")
    custom.create_namespaced_custom_object(g, v, ns, plural, widget(name, {"size": 1, "c": "x"}))
    merged = custom.patch_namespaced_custom_object(
        g, v, ns, plural, name, {"spec": {"size": 2, "c": None}}, _content_type=MERGE
    )
    assert merged["spec"] == {"size": 2}
    jsoned = custom.patch_namespaced_custom_object(
        g,
        v,
        ns,
        plural,
        name,
        [{"op": "add", "path": "/spec/tags", "value": ["a", "b"]}],
        _content_type=JSON_PATCH,
    )
    assert jsoned["spec"] == {"size": 2, "tags": ["a", "b"]}
    assert custom.get_namespaced_custom_object(g, v, ns, plural, name)["spec"] == jsoned["spec"]
