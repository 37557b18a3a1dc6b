"""Service accounts, their tokens and RBAC bindings, for the conformance tests of authentication
and authorization. A real API server caches authentications and RBAC decisions, so callers
wait (with a deadline of `SETTLE`) where a real cluster may take a moment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import raw

RBAC = "rbac.authorization.k8s.io"
#: a real API server caches authentications and RBAC for up to ~10 s
SETTLE = 30.0


def request_token(api: ApiClient, ns: str, sa: str, spec: dict[str, Any] | None = None) -> Any:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec or {}}
    return raw(api, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", body=body)


def token_of(api: ApiClient, ns: str, sa: str, spec: dict[str, Any] | None = None) -> str:
    resp = request_token(api, ns, sa, spec)
    assert resp.status == 201, resp.data
    return str(resp.json()["status"]["token"])


@contextmanager
def as_token(backend: KubeBackend, token: str) -> Iterator[ApiClient]:
    with backend.client_with_token(token) as api:
        yield api


def whoami(api: ApiClient) -> Any:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return raw(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=body)


def status_of(call: Callable[[], Any]) -> int:
    try:
        call()
    except client.ApiException as e:
        return int(e.status)
    return 200


def bind(
    rbac: client.RbacAuthorizationV1Api,
    ns: str,
    account: str,
    kind: str,
    role: str,
    binding: str | None = None,
) -> None:
    """Bind Role or ClusterRole ``role`` to ServiceAccount ``account`` of ``ns``, in ``ns``."""
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": binding or role},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            # a ServiceAccount subject names its namespace
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
        },
    )


def delete_cluster_scoped(delete: Callable[[str], Any], *names: str) -> None:
    """Delete what a test made at the cluster scope; gone already is fine."""
    for name in names:
        try:
            delete(name)
        except client.ApiException as e:
            if e.status != 404:
                raise


def can_i(api: ApiClient, ns: str, verb: str, resource: str) -> bool:
    spec = {"resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource}}
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": spec,
    }
    resp = raw(api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body)
    assert resp.status == 201, resp.data
    return bool(resp.json()["status"]["allowed"])
