"""The most common of kube-apiserver's validation refusals of built-in kinds, on create
and update: a workload whose selector does not match its template, a pod without
containers or images or with a bad container name, a Service without ports, a
ConfigMap or Secret key that is not a config key."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from ._support import raises_status, unique

pytestmark = pytest.mark.timeout(60)

PAUSE = "registry.k8s.io/pause:3.9"


def causes(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def deployment(name: str, labels: dict[str, str], containers: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
        },
    }


def test_a_selector_that_does_not_match_the_template_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("web")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(
            ns, deployment(name, {"app": "other"}, [{"name": "main", "image": PAUSE}])
        )
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"other"}: `selector` does not match template `labels`'
    )
    good = deployment(name, {"app": name, "tier": "web"}, [{"name": "main", "image": PAUSE}])
    apps.create_namespaced_deployment(ns, good)
    # an update that breaks the match is refused too
    with raises_status(422, "Invalid") as status:
        apps.patch_namespaced_deployment(
            name, ns, {"spec": {"template": {"metadata": {"labels": {"app": None}}}}}
        )
    assert causes(status) == [("spec.template.metadata.labels", "FieldValueInvalid")]
    sts = deployment(unique("sts"), {"app": "other"}, [{"name": "main", "image": PAUSE}])
    sts["spec"]["serviceName"] = sts["metadata"]["name"]
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(ns, sts)
    assert causes(status) == [("spec.template.metadata.labels", "FieldValueInvalid")]


def test_a_pod_needs_named_containers_with_images(core: client.CoreV1Api, ns: str) -> None:
    name = unique("pod")

    def create(spec: dict[str, Any]) -> dict[str, Any]:
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
        return status

    assert causes(create({"containers": []})) == [("spec.containers", "FieldValueRequired")]
    status = create({"containers": [{"name": "Main_1", "image": PAUSE}]})
    assert causes(status) == [("spec.containers[0].name", "FieldValueInvalid")]
    assert (
        'Invalid value: "Main_1": a lowercase RFC 1123 label must consist of' in status["message"]
    )
    assert causes(create({"containers": [{"name": "main"}]})) == [
        ("spec.containers[0].image", "FieldValueRequired")
    ]
    twice = {
        "initContainers": [{"name": "main", "image": PAUSE}],
        "containers": [{"name": "main", "image": PAUSE}],
    }
    assert causes(create(twice)) == [("spec.initContainers[0].name", "FieldValueDuplicate")]


def test_a_service_needs_ports_unless_headless(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(ns, {"metadata": {"name": name}, "spec": {}})
    assert status["message"] == f'Service "{name}" is invalid: spec.ports: Required value'
    headless = {"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": {"a": "b"}}}
    assert core.create_namespaced_service(ns, headless).spec.cluster_ip == "None"


def test_config_keys_are_checked(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": name}, "data": {"good.key_1": "", "bad key": ""}}
        )
    assert status["message"] == (
        f'ConfigMap "{name}" is invalid: data[bad key]: Invalid value: "bad key": a valid '
        "config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
        "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    )
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": {"a/b": "x"}})
    assert causes(status) == [("data[a/b]", "FieldValueInvalid")]
