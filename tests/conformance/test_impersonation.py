"""Impersonation (``kubectl --as``, a kubeconfig's ``as:``): a request acts as another user
when its sender may ``impersonate`` that user, its groups, uid and extras.

Written to pass on a real cluster too (RBAC changes are awaited).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._rbac import RBAC, SETTLE, as_token, bind, delete_cluster_scoped, token_of
from ._support import assert_status, raw, unique

pytestmark = pytest.mark.timeout(60)

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def whoami_as(api: ApiClient, headers: list[tuple[str, str]]) -> Any:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return raw(api, "POST", WHOAMI, body=body, headers=headers)


def user_info(api: ApiClient, headers: list[tuple[str, str]]) -> dict[str, Any]:
    resp = whoami_as(api, headers)
    assert resp.status == 201, resp.data
    return dict(resp.json()["status"]["userInfo"])


def test_an_admin_acts_as_a_user_and_its_groups(api: ApiClient) -> None:
    info = user_info(
        api,
        [
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "developers"),
            ("Impersonate-Group", "auditors"),
        ],
    )
    assert info["username"] == "jane"
    assert info["groups"] == ["developers", "auditors", "system:authenticated"]


def test_the_impersonated_uid_and_extras_are_who_the_request_is(api: ApiClient) -> None:
    """``kubectl auth whoami --as-uid ...`` answers the uid and the extras impersonated; an
    extra's key arrives %-escaped in its header name (``example.com%2Fteam``)."""
    info = user_info(
        api,
        [
            ("Impersonate-User", "jane"),
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Extra-example.com%2Fteam", "a"),
            ("Impersonate-Extra-example.com%2Fteam", "b"),
            ("Impersonate-Extra-scopes", "view"),
        ],
    )
    assert info["username"] == "jane"
    assert info["uid"] == "u-1"
    assert info["extra"] == {"example.com/team": ["a", "b"], "scopes": ["view"]}


def test_a_service_account_is_impersonated_with_its_groups(api: ApiClient, ns: str) -> None:
    info = user_info(api, [("Impersonate-User", f"system:serviceaccount:{ns}:builder")])
    assert info["username"] == f"system:serviceaccount:{ns}:builder"
    assert info["groups"] == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{ns}",
        "system:authenticated",
    ]


def test_the_impersonated_user_has_its_own_rights(api: ApiClient, ns: str, account: str) -> None:
    as_account = [("Impersonate-User", f"system:serviceaccount:{ns}:{account}")]
    path = f"/api/v1/namespaces/{ns}/configmaps"
    body = assert_status(raw(api, "GET", path, headers=as_account), 403, "Forbidden")
    assert f'User "system:serviceaccount:{ns}:{account}" cannot list' in body["message"]
    bind(client.RbacAuthorizationV1Api(api), ns, account, "ClusterRole", "view")
    wait_for(lambda: raw(api, "GET", path, headers=as_account).status == 200, SETTLE, "view")


def test_groups_without_a_user_are_refused(api: ApiClient) -> None:
    body = assert_status(whoami_as(api, [("Impersonate-Group", "developers")]), 400, "BadRequest")
    assert "without impersonating a user" in body["message"]


def test_impersonating_takes_the_impersonate_verb_on_each_name(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("conformance-impersonator")
    rbac.create_cluster_role(
        {
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["users"],
                    "resourceNames": ["jane"],
                    "verbs": ["impersonate"],
                }
            ],
        }
    )
    try:
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            body = assert_status(
                whoami_as(sa_api, [("Impersonate-User", "jane")]), 403, "Forbidden"
            )
            assert body["message"] == (
                f'users "jane" is forbidden: User "system:serviceaccount:{ns}:{account}" '
                'cannot impersonate resource "users" in API group "" at the cluster scope'
            )
            rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": role},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
                }
            )
            wait_for(
                lambda: whoami_as(sa_api, [("Impersonate-User", "jane")]).status == 201,
                SETTLE,
                "the binding",
            )
            assert user_info(sa_api, [("Impersonate-User", "jane")])["username"] == "jane"
            # only jane, and no group on top
            assert whoami_as(sa_api, [("Impersonate-User", "john")]).status == 403
            with_group = [("Impersonate-User", "jane"), ("Impersonate-Group", "system:masters")]
            body = assert_status(whoami_as(sa_api, with_group), 403, "Forbidden")
            assert 'cannot impersonate resource "groups"' in body["message"]
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role_binding, role)
        delete_cluster_scoped(rbac.delete_cluster_role, role)
