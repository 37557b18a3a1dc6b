"""Failures come back as ``Status`` objects with the reason and code kube-apiserver uses."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    WIDGET_GROUP,
    assert_status,
    configmap,
    raises_status,
    raw,
    unique,
    widget,
)

pytestmark = pytest.mark.timeout(30)


def test_get_missing_object_is_not_found_with_details(core: client.CoreV1Api, ns: str) -> None:
    name = unique("missing")
    with raises_status(404, "NotFound") as status:
        core.read_namespaced_config_map(name, ns)
    assert status["details"]["name"] == name
    assert status["details"]["kind"] == "configmaps"
    assert name in status["message"]


def test_delete_and_patch_of_missing_object_are_not_found(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(404, "NotFound"):
        core.delete_namespaced_config_map(unique("missing"), ns)
    with raises_status(404, "NotFound"):
        core.patch_namespaced_config_map(unique("missing"), ns, {"data": {"a": "b"}})
    with raises_status(404, "NotFound"):
        core.replace_namespaced_config_map("gone", ns, configmap("gone", resourceVersion="1"))


def test_create_twice_is_already_exists(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    with raises_status(409, "AlreadyExists") as status:
        core.create_namespaced_config_map(ns, configmap(name))
    assert status["details"]["name"] == name
    assert status["details"]["kind"] == "configmaps"


def test_update_with_stale_resource_version_is_conflict(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    stale = core.create_namespaced_config_map(ns, configmap(name))
    core.patch_namespaced_config_map(name, ns, {"data": {"newer": "write"}})
    stale.data = {"lost": "update"}
    with raises_status(409, "Conflict") as status:
        core.replace_namespaced_config_map(name, ns, stale)
    assert status["details"]["name"] == name
    assert core.read_namespaced_config_map(name, ns).data == {"key": "value", "newer": "write"}


def test_patch_with_stale_resource_version_is_conflict(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    stale = core.create_namespaced_config_map(ns, configmap(name)).metadata.resource_version
    core.patch_namespaced_config_map(name, ns, {"data": {"newer": "write"}})
    with raises_status(409, "Conflict"):
        core.patch_namespaced_config_map(
            name, ns, {"metadata": {"resourceVersion": stale}, "data": {"lost": "x"}}
        )
    with raises_status(409, "Conflict"):
        core.patch_namespaced_config_map(
            name,
            ns,
            [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale}],
            _content_type="application/json-patch+json",
        )


def test_update_without_resource_version_is_unconditional(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    core.patch_namespaced_config_map(name, ns, {"data": {"newer": "write"}})
    replaced = core.replace_namespaced_config_map(name, ns, configmap(name, {"last": "wins"}))
    assert replaced.data == {"last": "wins"}


def test_delete_with_wrong_uid_precondition_is_conflict(core: client.CoreV1Api, ns: str) -> None:
    """``rest.BeforeDelete`` checks the preconditions before the storage does, and names the
    kind, not the resource, in its conflict."""
    name = unique("cm")
    cm = core.create_namespaced_config_map(ns, configmap(name))
    wrong = "00000000-0000-0000-0000-000000000000"
    with raises_status(409, "Conflict") as status:
        core.delete_namespaced_config_map(name, ns, body={"preconditions": {"uid": wrong}})
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "{name}": the UID in the precondition '
        f"({wrong}) does not match the UID in record ({cm.metadata.uid}). The object might "
        "have been deleted and then recreated"
    )
    assert status["details"]["kind"] == "ConfigMap"
    version = cm.metadata.resource_version
    core.patch_namespaced_config_map(name, ns, {"data": {"changed": "yes"}})
    now = core.read_namespaced_config_map(name, ns).metadata.resource_version
    with raises_status(409, "Conflict") as status:
        core.delete_namespaced_config_map(
            name, ns, body={"preconditions": {"resourceVersion": version}}
        )
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "{name}": the ResourceVersion in the '
        f"precondition ({version}) does not match the ResourceVersion in record ({now}). "
        "The object might have been modified"
    )
    assert core.read_namespaced_config_map(name, ns).metadata.name == name


def test_a_delete_precondition_conflict_names_the_kind_and_its_group(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    body = {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }
    apps.create_namespaced_deployment(ns, body)
    with raises_status(409, "Conflict") as status:
        apps.delete_namespaced_deployment(name, ns, body={"preconditions": {"uid": "not-it"}})
    assert status["message"].startswith(
        f'Operation cannot be fulfilled on Deployment.apps "{name}": the UID in the precondition '
        "(not-it) does not match the UID in record ("
    )
    assert (status["details"]["group"], status["details"]["kind"]) == ("apps", "Deployment")


@pytest.mark.parametrize("bad_name", ["Upper_Case", "-leading-dash", "has space", "a" * 254])
def test_malformed_name_is_invalid(core: client.CoreV1Api, ns: str, bad_name: str) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(bad_name))
    causes = status["details"]["causes"]
    assert any(c.get("field") == "metadata.name" for c in causes), causes
    assert status["details"]["kind"] == "ConfigMap"


def test_missing_name_is_invalid(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {}, "data": {"k": "v"}})
    assert any(c.get("field") == "metadata.name" for c in status["details"]["causes"])


def test_name_in_body_must_match_url_on_update(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    with raises_status(400, "BadRequest"):
        core.replace_namespaced_config_map(name, ns, configmap(unique("other")))


def test_namespace_in_body_must_match_url_on_create(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(400, "BadRequest"):
        core.create_namespaced_config_map(ns, configmap(unique("cm"), namespace="elsewhere"))


def test_unparsable_body_is_bad_request(api: ApiClient, ns: str) -> None:
    resp = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body='{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {',
        content_type="application/json",
    )
    assert_status(resp, 400, "BadRequest")
    name = unique("cm")
    client.CoreV1Api(api).create_namespaced_config_map(ns, configmap(name))
    patch = raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/{name}",
        body="{not json",
        content_type="application/merge-patch+json",
    )
    assert_status(patch, 400, "BadRequest")


def test_body_of_another_kind_is_bad_request(api: ApiClient, ns: str) -> None:
    resp = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": unique("s")}},
    )
    assert_status(resp, 400, "BadRequest")


def test_unsupported_method_is_method_not_allowed(api: ApiClient, ns: str) -> None:
    resp = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps/{unique('cm')}",
        body=configmap("x"),
    )
    assert_status(resp, 405, "MethodNotAllowed")


def test_unknown_patch_media_type_is_unsupported(api: ApiClient, ns: str) -> None:
    resp = raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/{unique('cm')}",
        body='{"data": {"a": "b"}}',
        content_type="text/plain",
    )
    assert_status(resp, 415, "UnsupportedMediaType")


def test_strategic_merge_patch_on_custom_resource_is_unsupported_media_type(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str], ns: str
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    name = unique("w")
    custom.create_namespaced_custom_object(g, v, ns, plural, widget(name))
    with raises_status(415, "UnsupportedMediaType"):
        custom.patch_namespaced_custom_object(
            g,
            v,
            ns,
            plural,
            name,
            {"spec": {"size": 3}},
            _content_type="application/strategic-merge-patch+json",
        )


def test_unknown_resource_is_not_found(api: ApiClient, ns: str) -> None:
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/nonexistentthings")
    assert resp.status == 404


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/{ns}/nonexistentthings/x",  # a resource its group-version lacks
        "/apis/" + WIDGET_GROUP + "/v9/namespaces/{ns}/widgets/x",  # a version not served
        "/apis/nope.example.com/v1/namespaces/{ns}/things/x",  # a group not served
    ],
)
def test_a_path_not_served_is_a_404_that_names_no_object(
    api: ApiClient, ns: str, path: str
) -> None:
    # kube-apiserver: a path under a served group-version that no route takes gets
    # NewGenericServerResponse(404), "the server could not find the requested resource" with
    # empty details (k8s.io/apiserver/pkg/server/handler.go, serviceErrorHandler); any other
    # path falls through to its not-found handler (k8s.io/apiserver/pkg/util/notfoundhandler),
    # no Status at all. A missing object's 404 names it in details (NewNotFound,
    # k8s.io/apimachinery/pkg/api/errors/errors.go; see the test above): clients tell the two
    # apart by that name (mcruntime's raises NoKindMatch for the first once discovery agrees).
    resp = raw(api, "GET", path.format(ns=ns))
    assert resp.status == 404
    if "json" in (resp.headers.get("Content-Type") or ""):
        status = resp.json()
        assert status["kind"] == "Status" and status["reason"] == "NotFound"
        assert not (status.get("details") or {}).get("name"), status
        assert status["message"] == "the server could not find the requested resource"
    else:
        assert resp.data.strip() == b"404 page not found"


def test_expired_continue_token_is_gone(
    kube_backend: KubeBackend, core: client.CoreV1Api, ns: str
) -> None:
    server = kube_backend.require_server("needs the embedded server's compact()")
    for i in range(3):
        core.create_namespaced_config_map(ns, configmap(f"cm-{i}"))
    first = core.list_namespaced_config_map(ns, limit=1)
    assert first.metadata.var_continue
    for i in range(3):
        core.patch_namespaced_config_map(f"cm-{i}", ns, {"data": {"v": "2"}})
    server.compact()
    with raises_status(410, "Expired"):
        core.list_namespaced_config_map(ns, limit=1, _continue=first.metadata.var_continue)


def test_malformed_label_is_invalid(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(unique("cm"), labels={"bad key!": "x"}))
    assert any(
        c.get("field", "").startswith("metadata.labels") for c in status["details"]["causes"]
    )
    with raises_status(422, "Invalid"):
        core.create_namespaced_config_map(
            ns, configmap(unique("cm"), labels={"ok": "value with spaces"})
        )


def test_namespace_name_must_be_a_dns_label(core: client.CoreV1Api) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespace({"metadata": {"name": "dots.are.not.allowed"}})
    assert status["details"]["kind"] == "Namespace"


def _refused_for_its_resource_version(err: ApiException) -> None:
    # the etcd3 store's ErrResourceVersionSetOnCreate, a plain error: a 500 without reason
    assert err.status == 500, err.body
    body = json.loads(err.body)
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 500
    assert body["message"] == "resourceVersion should not be set on objects to be created"
    assert "reason" not in body and "details" not in body, body


def test_create_with_a_resource_version_is_refused(core: client.CoreV1Api, ns: str) -> None:
    # what copying an object read from one cluster into another meets
    name = unique("cm")
    read = core.create_namespaced_config_map(ns, configmap(name))
    copied = configmap(unique("cm"), resourceVersion=read.metadata.resource_version)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map(ns, copied)
    _refused_for_its_resource_version(info.value)
    with pytest.raises(ApiException) as info:  # checked before the name is found taken
        core.create_namespaced_config_map(ns, configmap(name, resourceVersion="5"))
    _refused_for_its_resource_version(info.value)
    # a dry run makes no such check; "0" and a version that is no number are let through
    core.create_namespaced_config_map(
        ns, configmap(unique("cm"), resourceVersion="5"), dry_run="All"
    )
    for version in ("0", "not-a-number"):
        made = core.create_namespaced_config_map(
            ns, configmap(unique("cm"), resourceVersion=version)
        )
        assert made.metadata.resource_version not in ("0", "not-a-number")
