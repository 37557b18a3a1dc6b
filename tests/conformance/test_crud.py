"""Create, get, list, update and delete of every built-in kind through the typed client."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime._threads import start_thread, thread_name
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    configmap,
    data_and_code,
    deployment,
    gone,
    raises_status,
    raw,
    retry_on_conflict,
    rv,
    unique,
    user_names,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

PAUSE = "registry.k8s.io/pause:3.9"


def _pod_spec() -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": PAUSE}], "terminationGracePeriodSeconds": 0}


@dataclass(frozen=True)
class Kind:
    """How to reach one namespaced built-in kind through the typed client."""

    api: str
    suffix: str
    body: Callable[[str, str], dict[str, Any]]

    def call(self, apis: dict[str, Any], verb: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(apis[self.api], f"{verb}_namespaced_{self.suffix}")(*args, **kwargs)


KINDS = {
    "configmaps": Kind("core", "config_map", lambda name, ns: configmap(name)),
    "secrets": Kind(
        "core",
        "secret",
        lambda name, ns: {
            "metadata": {"name": name},
            "type": "Opaque",
            "data": {"password": base64.b64encode(b"s3cret").decode()},
        },
    ),
    "services": Kind(
        "core",
        "service",
        lambda name, ns: {
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    ),
    "serviceaccounts": Kind(
        "core", "service_account", lambda name, ns: {"metadata": {"name": name}}
    ),
    "pods": Kind("core", "pod", lambda name, ns: {"metadata": {"name": name}, "spec": _pod_spec()}),
    "events": Kind(
        "core",
        "event",
        lambda name, ns: {
            "metadata": {"name": name},
            "involvedObject": {
                "kind": "ConfigMap",
                "name": "x",
                "namespace": ns,
                "apiVersion": "v1",
            },
            "reason": "Testing",
            "message": "conformance",
            "type": "Normal",
        },
    ),
    "deployments": Kind("apps", "deployment", lambda name, ns: deployment(name)),
    "jobs": Kind(
        "batch",
        "job",
        lambda name, ns: {
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {**_pod_spec(), "restartPolicy": "Never"},
                },
            },
        },
    ),
    "leases": Kind(
        "coordination",
        "lease",
        lambda name, ns: {
            "metadata": {"name": name},
            "spec": {"holderIdentity": "conformance", "leaseDurationSeconds": 15},
        },
    ),
}


@pytest.fixture
def apis(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    batch: client.BatchV1Api,
    coordination: client.CoordinationV1Api,
) -> dict[str, Any]:
    return {"core": core, "apps": apps, "batch": batch, "coordination": coordination}


@pytest.mark.parametrize("resource", list(KINDS))
def test_builtin_kind_round_trips_create_get_list_update_delete(
    apis: dict[str, Any], api: ApiClient, ns: str, resource: str
) -> None:
    kind = KINDS[resource]
    name = unique(resource[:-1])
    created = kind.call(apis, "create", ns, kind.body(name, ns))
    assert created.metadata.name == name
    assert created.metadata.namespace == ns
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    rv(created)

    got = kind.call(apis, "read", name, ns)
    assert got.metadata.uid == created.metadata.uid

    listed = kind.call(apis, "list", ns)
    assert name in [item.metadata.name for item in listed.items]

    def relabel() -> Any:
        current = kind.call(apis, "read", name, ns)
        current.metadata.labels = {**(current.metadata.labels or {}), "touched": "yes"}
        return kind.call(apis, "replace", name, ns, current)

    updated = retry_on_conflict(relabel)
    assert updated.metadata.labels["touched"] == "yes"
    assert rv(updated) > rv(created)
    assert kind.call(apis, "read", name, ns).metadata.labels["touched"] == "yes"

    kind.call(apis, "delete", name, ns, grace_period_seconds=0)
    wait_for(gone(lambda: kind.call(apis, "read", name, ns)), 30, what=f"{resource}/{name} deleted")
    with raises_status(404, "NotFound"):
        kind.call(apis, "read", name, ns)


def test_create_answers_201_and_get_200(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    _, code = data_and_code(core.create_namespaced_config_map_with_http_info(ns, configmap(name)))
    assert code == 201
    got, code = data_and_code(core.read_namespaced_config_map_with_http_info(name, ns))
    assert code == 200
    assert got.data == {"key": "value"}


def test_delete_without_finalizers_answers_success_status(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    uid = core.create_namespaced_config_map(ns, configmap(name)).metadata.uid
    resp = raw(api, "DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}")
    assert resp.status == 200
    status = resp.json()
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == name
    assert status["details"]["uid"] == uid
    with raises_status(404, "NotFound"):
        core.read_namespaced_config_map(name, ns)


def test_objects_are_scoped_to_their_namespace(core: client.CoreV1Api, ns: str) -> None:
    other = core.create_namespace({"metadata": {"name": unique("other")}}).metadata.name
    try:
        name = unique("cm")
        core.create_namespaced_config_map(ns, configmap(name, {"in": ns}))
        core.create_namespaced_config_map(other, configmap(name, {"in": other}))
        assert core.read_namespaced_config_map(name, ns).data == {"in": ns}
        assert core.read_namespaced_config_map(name, other).data == {"in": other}
        assert user_names(core.list_namespaced_config_map(other).items) == [name]
    finally:
        core.delete_namespace(other)


def test_secret_string_data_is_stored_base64_in_data(core: client.CoreV1Api, ns: str) -> None:
    name = unique("secret")
    created = core.create_namespaced_secret(
        ns, {"metadata": {"name": name}, "stringData": {"user": "admin"}}
    )
    assert created.type == "Opaque"
    assert created.string_data is None
    got = core.read_namespaced_secret(name, ns)
    assert got.data == {"user": base64.b64encode(b"admin").decode()}
    assert got.string_data is None


def test_namespace_round_trip_is_active_then_gone(core: client.CoreV1Api) -> None:
    name = unique("ns")
    created = core.create_namespace({"metadata": {"name": name}})
    assert created.status.phase == "Active"
    assert created.metadata.namespace is None
    assert name in [n.metadata.name for n in core.list_namespace().items]
    core.delete_namespace(name)
    wait_for(gone(lambda: core.read_namespace(name)), 60, f"namespace {name} removed", interval=0.1)


def test_default_and_kube_system_namespaces_exist(core: client.CoreV1Api) -> None:
    for name in ("default", "kube-system"):
        assert core.read_namespace(name).status.phase == "Active"


def test_concurrent_read_modify_write_loses_no_update(
    kube_backend: KubeBackend, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("counter")
    core.create_namespaced_config_map(ns, configmap(name, {"n": "0"}))
    workers, increments = 4, 10
    errors: list[BaseException] = []

    def work() -> None:
        with kube_backend.api_client() as api:
            mine = client.CoreV1Api(api)

            def increment() -> None:
                cm = mine.read_namespaced_config_map(name, ns)
                cm.data = {"n": str(int(cm.data["n"]) + 1)}
                mine.replace_namespaced_config_map(name, ns, cm)

            try:
                for _ in range(increments):
                    retry_on_conflict(increment, attempts=200)
            except BaseException as e:
                errors.append(e)

    threads = [
        start_thread(work, thread_name("conformance-counter", kube_backend.name, str(i)))
        for i in range(workers)
    ]
    for t in threads:
        t.join(30)
    assert errors == []
    assert core.read_namespaced_config_map(name, ns).data == {"n": str(workers * increments)}
