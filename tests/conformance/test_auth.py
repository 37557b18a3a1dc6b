"""Authentication (bearer tokens) and authorization (the embedded read-only token)."""

from __future__ import annotations

import pytest
from kubernetes import client

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import assert_status, configmap, raises_status, raw, unique, user_names

pytestmark = pytest.mark.timeout(30)


def test_wrong_token_is_unauthorized(kube_backend: KubeBackend, ns: str) -> None:
    with kube_backend.client_with_token("not-a-valid-token") as api:
        with raises_status(401, "Unauthorized"):
            client.CoreV1Api(api).list_namespaced_config_map(ns)
        assert_status(raw(api, "GET", "/api/v1/namespaces"), 401, "Unauthorized")


def test_wrong_token_is_unauthorized_for_discovery(kube_backend: KubeBackend) -> None:
    with kube_backend.client_with_token("not-a-valid-token") as api:
        assert raw(api, "GET", "/api").status == 401
        assert raw(api, "GET", "/apis").status == 401


def test_missing_token_is_rejected(kube_backend: KubeBackend, ns: str) -> None:
    with kube_backend.client_with_token(None) as api:
        resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/configmaps")
    if kube_backend.embedded:
        assert_status(resp, 401, "Unauthorized")
    else:
        # A real API server may authenticate the request as system:anonymous and then deny it.
        assert resp.status in (401, 403), resp.data


def test_read_only_token_can_read_and_watch(
    kube_backend: KubeBackend, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    with kube_backend.read_only_client() as ro_api:
        ro = client.CoreV1Api(ro_api)
        assert ro.read_namespaced_config_map(name, ns).metadata.name == name
        assert user_names(ro.list_namespaced_config_map(ns).items) == [name]
        resp = raw(
            ro_api,
            "GET",
            f"/api/v1/namespaces/{ns}/configmaps",
            query=[("watch", "true"), ("timeoutSeconds", "1")],
        )
        assert resp.status == 200
        assert b'"ADDED"' in resp.data


def test_read_only_token_writing_is_forbidden(
    kube_backend: KubeBackend, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    with kube_backend.read_only_client() as ro_api:
        ro = client.CoreV1Api(ro_api)
        with raises_status(403, "Forbidden"):
            ro.create_namespaced_config_map(ns, configmap(unique("cm")))
        with raises_status(403, "Forbidden"):
            ro.patch_namespaced_config_map(name, ns, {"data": {"k": "v"}})
        with raises_status(403, "Forbidden"):
            ro.delete_namespaced_config_map(name, ns)
    assert core.read_namespaced_config_map(name, ns).data == {"key": "value"}
