"""A built-in object whose fields have the wrong JSON type is refused by the decoder.

kube-apiserver decodes a built-in kind into its Go type before anything else: a ConfigMap
whose ``data`` holds a number (a classic bug of Python operators), a Deployment with
``replicas: "3"``, a container whose ``args`` are numbers, is a 400 BadRequest with Go's
``json: cannot unmarshal ...`` in it, never stored. A patch whose result is such an object
is a 422 on the field ``patch``, with the same words at its end.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import assert_status, deployment, raw, unique

pytestmark = pytest.mark.timeout(30)

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def pod(name: str, **container: Any) -> dict[str, Any]:
    main = {"name": "main", "image": "registry.k8s.io/pause:3.9", **container}
    return {"metadata": {"name": name}, "spec": {"containers": [main]}}


def refused(api: ApiClient, method: str, path: str, body: Any) -> str:
    """The message of the 400 BadRequest that ``body`` (sent as it is, past the typed
    client's own checks) is answered with."""
    return str(assert_status(raw(api, method, path, body=body), 400, "BadRequest")["message"])


def cannot_handle(kind: str, error: str) -> str:
    return f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot unmarshal {error}'


CONFIGMAPS = "/api/v1/namespaces/{ns}/configmaps"
PODS = "/api/v1/namespaces/{ns}/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"


def test_a_configmap_s_data_number_is_a_400(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    body = {"metadata": {"name": name}, "data": {"n": 5, "o": {"x": 1}}}
    assert refused(api, "POST", CONFIGMAPS.format(ns=ns), body) == cannot_handle(
        "ConfigMap", "number into Go struct field ConfigMap.data of type string"
    )
    selector = f"metadata.name={name}"
    assert core.list_namespaced_config_map(ns, field_selector=selector).items == []


def test_a_deployment_s_replicas_as_a_string_is_a_400(api: ApiClient, ns: str) -> None:
    body = deployment(unique("d"))
    body["spec"]["replicas"] = "3"
    assert refused(api, "POST", DEPLOYMENTS.format(ns=ns), body) == cannot_handle(
        "Deployment", "string into Go struct field DeploymentSpec.spec.replicas of type int32"
    )


@pytest.mark.parametrize(
    ("container", "error"),
    [
        (
            {"ports": [{"containerPort": "abc"}]},
            "string into Go struct field ContainerPort.spec.containers.ports.containerPort "
            "of type int32",
        ),
        (
            {"args": [1]},
            "number into Go struct field Container.spec.containers.args of type string",
        ),
        (
            {"ports": [{"containerPort": 1.5}]},
            "number 1.5 into Go struct field ContainerPort.spec.containers.ports.containerPort "
            "of type int32",
        ),
        ({"tty": "yes"}, "string into Go struct field Container.spec.containers.tty of type bool"),
    ],
    ids=["port-string", "args-number", "port-not-integer", "tty-string"],
)
def test_a_wrong_type_inside_a_list_item_names_the_item_s_struct(
    api: ApiClient, ns: str, container: dict[str, Any], error: str
) -> None:
    body = pod(unique("p"), **container)
    assert refused(api, "POST", PODS.format(ns=ns), body) == cannot_handle("Pod", error)


def test_a_label_value_number_is_a_400(api: ApiClient, ns: str) -> None:
    body = {"metadata": {"name": unique("cm"), "labels": {"a": 1}}}
    assert refused(api, "POST", CONFIGMAPS.format(ns=ns), body) == cannot_handle(
        "ConfigMap", "number into Go struct field ObjectMeta.metadata.labels of type string"
    )


def test_an_object_where_a_list_belongs_names_the_go_list_type(api: ApiClient, ns: str) -> None:
    body = {"metadata": {"name": unique("p")}, "spec": {"containers": {}}}
    assert refused(api, "POST", PODS.format(ns=ns), body) == cannot_handle(
        "Pod", "object into Go struct field PodSpec.spec.containers of type []v1.Container"
    )


def test_only_the_first_wrong_field_is_reported(api: ApiClient, ns: str) -> None:
    body = {"metadata": {"name": unique("cm")}, "data": {"a": True}, "binaryData": {"b": 1}}
    assert refused(api, "POST", CONFIGMAPS.format(ns=ns), body) == cannot_handle(
        "ConfigMap", "bool into Go struct field ConfigMap.data of type string"
    )


def test_a_secret_s_data_that_is_not_base64_is_go_s_base64_error(api: ApiClient, ns: str) -> None:
    body = {"metadata": {"name": unique("s")}, "data": {"a": "not base64"}}
    assert refused(api, "POST", f"/api/v1/namespaces/{ns}/secrets", body) == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'
    )


def test_null_int_or_string_and_quantity_numbers_are_accepted(api: ApiClient, ns: str) -> None:
    service = {
        "metadata": {"name": unique("svc"), "labels": None},
        "spec": {"ports": [{"port": 80, "targetPort": 8080, "nodePort": None}]},
    }
    sent = raw(api, "POST", f"/api/v1/namespaces/{ns}/services", body=service)
    assert sent.status == 201, sent.data
    assert sent.json()["spec"]["ports"][0]["targetPort"] == 8080
    limits = {"cpu": 1, "memory": 1000000}
    sent = raw(api, "POST", PODS.format(ns=ns), body=pod(unique("p"), resources={"limits": limits}))
    assert sent.status == 201, sent.data
    resources = sent.json()["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"cpu": "1", "memory": "1M"}


def test_a_non_integer_int_or_string_is_a_400(api: ApiClient, ns: str) -> None:
    body = {
        "metadata": {"name": unique("svc")},
        "spec": {"ports": [{"port": 80, "targetPort": 1.5}]},
    }
    assert refused(api, "POST", f"/api/v1/namespaces/{ns}/services", body) == cannot_handle(
        "Service", "number 1.5 into Go struct field ServicePort.spec.ports.targetPort of type int32"
    )


def test_an_update_with_a_wrong_type_is_a_400_and_changes_nothing(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    created = core.create_namespaced_config_map(
        ns, {"metadata": {"name": name}, "data": {"a": "1"}}
    )
    meta = {"name": name, "resourceVersion": created.metadata.resource_version}
    body = {"metadata": meta, "data": {"a": 2}}
    assert refused(api, "PUT", f"{CONFIGMAPS.format(ns=ns)}/{name}", body) == cannot_handle(
        "ConfigMap", "number into Go struct field ConfigMap.data of type string"
    )
    assert core.read_namespaced_config_map(name, ns).data == {"a": "1"}


@pytest.mark.parametrize("content_type", [MERGE, JSON_PATCH])
def test_a_patch_whose_result_has_a_wrong_type_is_a_422_on_the_patch(
    api: ApiClient, apps: client.AppsV1Api, ns: str, content_type: str
) -> None:
    name = unique("d")
    apps.create_namespaced_deployment(ns, deployment(name))
    if content_type == MERGE:
        patch: Any = {"spec": {"replicas": "3"}}
    else:
        patch = [{"op": "replace", "path": "/spec/replicas", "value": "3"}]
    path = f"{DEPLOYMENTS.format(ns=ns)}/{name}"
    answer = raw(api, "PATCH", path, body=patch, content_type=content_type)
    status = assert_status(answer, 422, "Invalid")
    error = (
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
        "of type int32"
    )
    assert status["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert status["message"].endswith('}": ' + error)
    (cause,) = status["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    assert apps.read_namespaced_deployment(name, ns).spec.replicas == 1


def test_a_status_update_with_a_wrong_type_is_a_400(
    api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("d")
    created = apps.create_namespaced_deployment(ns, deployment(name))
    body = deployment(name)
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    body["status"] = {"replicas": "many"}
    path = f"{DEPLOYMENTS.format(ns=ns)}/{name}/status"
    assert refused(api, "PUT", path, body) == cannot_handle(
        "Deployment", "string into Go struct field DeploymentStatus.status.replicas of type int32"
    )
