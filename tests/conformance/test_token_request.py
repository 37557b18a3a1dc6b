"""Service account tokens (TokenRequest, ``kubectl create token``) and RBAC for their bearers.

A token authenticates as its service account until it expires or its service
account (or the object it is bound to) is deleted, and its bearer may do what
the cluster's Roles and bindings allow. A real API server applies RBAC and
token revocation through caches of its own, so these tests wait (with a
deadline) where a real cluster may take a moment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._rbac import (
    RBAC,
    SETTLE,
    as_token,
    bind,
    can_i,
    delete_cluster_scoped,
    request_token,
    status_of,
    token_of,
    whoami,
)
from ._support import configmap, raises_status, raw, unique

pytestmark = pytest.mark.timeout(60)


def test_a_token_authenticates_as_its_service_account(
    kube_backend: KubeBackend, core: client.CoreV1Api, ns: str, account: str
) -> None:
    # the typed client's own call, as `kubectl create token` makes it
    spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=1200)
    asked = time.time()
    issued = core.create_namespaced_service_account_token(
        account, ns, client.AuthenticationV1TokenRequest(spec=spec)
    )
    assert issued.status.token
    assert issued.spec.expiration_seconds == 1200
    assert issued.spec.audiences, "the API server's audiences when none are asked for"
    expires = issued.status.expiration_timestamp.timestamp()
    assert asked + 1200 - 5 <= expires <= time.time() + 1200 + 5
    with as_token(kube_backend, issued.status.token) as api:
        resp = whoami(api)
    assert resp.status == 201, resp.data
    user = resp.json()["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{ns}:{account}"
    assert {
        "system:serviceaccounts",
        f"system:serviceaccounts:{ns}",
        "system:authenticated",
    } <= set(user["groups"])


def test_a_token_lasts_an_hour_unless_asked_otherwise(
    api: ApiClient, ns: str, account: str
) -> None:
    resp = request_token(api, ns, account)
    assert resp.status == 201, resp.data
    issued = resp.json()
    assert issued["kind"] == "TokenRequest"
    assert issued["spec"]["expirationSeconds"] == 3600
    assert issued["status"]["expirationTimestamp"].endswith("Z")


def test_a_token_request_is_checked(api: ApiClient, ns: str, account: str) -> None:
    short = request_token(api, ns, account, {"expirationSeconds": 599})
    assert short.status == 422, short.data
    assert "may not specify a duration less than 10 minutes" in short.json()["message"]
    missing = request_token(api, ns, unique("nobody"))
    assert missing.status == 404, missing.data
    assert missing.json()["details"]["kind"] == "serviceaccounts"
    bad_kind = request_token(
        api, ns, account, {"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}
    )
    assert bad_kind.status == 400, bad_kind.data
    assert "cannot bind token to object of type" in bad_kind.json()["message"]


def test_a_token_for_another_audience_does_not_authenticate(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    token = token_of(api, ns, account, {"audiences": ["https://vault.example.com"]})
    with as_token(kube_backend, token) as other:
        assert whoami(other).status == 401


def test_deleting_the_service_account_revokes_its_tokens(
    kube_backend: KubeBackend, api: ApiClient, core: client.CoreV1Api, ns: str, account: str
) -> None:
    token = token_of(api, ns, account)
    with as_token(kube_backend, token) as sa_api:
        assert whoami(sa_api).status == 201
        core.delete_namespaced_service_account(account, ns)
        wait_for(lambda: whoami(sa_api).status == 401, SETTLE, "the token to be revoked")


def test_deleting_the_bound_secret_revokes_the_token(
    kube_backend: KubeBackend, api: ApiClient, core: client.CoreV1Api, ns: str, account: str
) -> None:
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": unique("bound")}})
    ref = {"apiVersion": "v1", "kind": "Secret", "name": secret.metadata.name}
    stale = request_token(api, ns, account, {"boundObjectRef": {**ref, "uid": "not-its-uid"}})
    assert stale.status == 409, stale.data
    token = token_of(api, ns, account, {"boundObjectRef": {**ref, "uid": secret.metadata.uid}})
    with as_token(kube_backend, token) as sa_api:
        assert whoami(sa_api).status == 201
        core.delete_namespaced_secret(secret.metadata.name, ns)
        wait_for(lambda: whoami(sa_api).status == 401, SETTLE, "the token to be revoked")


def test_a_service_account_may_do_what_its_role_allows(
    kube_backend: KubeBackend, api: ApiClient, core: client.CoreV1Api, ns: str, account: str
) -> None:
    core.create_namespaced_config_map(ns, configmap("present"))
    rbac = client.RbacAuthorizationV1Api(api)
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.CoreV1Api(sa_api)
        with raises_status(403, "Forbidden") as status:
            sa.list_namespaced_config_map(ns)
        assert status["message"] == (
            f'configmaps is forbidden: User "system:serviceaccount:{ns}:{account}" cannot list '
            f'resource "configmaps" in API group "" in the namespace "{ns}"'
        )
        role = unique("reader")
        rbac.create_namespaced_role(
            ns,
            {
                "metadata": {"name": role},
                "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
                ],
            },
        )
        bind(rbac, ns, account, "Role", role)
        wait_for(lambda: status_of(lambda: sa.list_namespaced_config_map(ns)) == 200, SETTLE)
        assert sa.read_namespaced_config_map("present", ns).metadata.name == "present"
        # what the rules leave out stays forbidden: other verbs, resources and subresources
        assert status_of(lambda: sa.create_namespaced_config_map(ns, configmap("new"))) == 403
        assert status_of(lambda: sa.list_namespaced_secret(ns)) == 403
        assert status_of(lambda: sa.list_config_map_for_all_namespaces()) == 403
        assert can_i(sa_api, ns, "list", "configmaps") is True
        assert can_i(sa_api, ns, "delete", "configmaps") is False


def test_a_cluster_role_bound_to_a_group_reaches_every_service_account_in_it(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    name = unique("conformance-secrets")
    rbac.create_cluster_role(
        {
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "verbs": ["list"],
                    "resourceNames": [],
                }
            ],
        }
    )
    try:
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
                "subjects": [
                    {"apiGroup": RBAC, "kind": "Group", "name": f"system:serviceaccounts:{ns}"}
                ],
            }
        )
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            sa = client.CoreV1Api(sa_api)
            wait_for(lambda: status_of(lambda: sa.list_secret_for_all_namespaces()) == 200, SETTLE)
            assert status_of(lambda: sa.list_namespaced_config_map(ns)) == 403
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role_binding, name)
        delete_cluster_scoped(rbac.delete_cluster_role, name)


def test_resource_names_and_subresources_narrow_a_rule(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("scaler")
    rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a"]},
        {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["get"]},
    ]
    rbac.create_namespaced_role(ns, {"metadata": {"name": role}, "rules": rules})
    bind(rbac, ns, account, "Role", role)
    core = client.CoreV1Api(api)
    for name in ("a", "b"):
        core.create_namespaced_config_map(ns, configmap(name))
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.CoreV1Api(sa_api)
        wait_for(lambda: status_of(lambda: sa.read_namespaced_config_map("a", ns)) == 200, SETTLE)
        assert status_of(lambda: sa.read_namespaced_config_map("b", ns)) == 403
        assert status_of(lambda: sa.list_namespaced_config_map(ns)) == 403
        scale_of = client.AppsV1Api(sa_api).read_namespaced_deployment_scale
        assert status_of(lambda: scale_of("none", ns)) == 404  # allowed, and not there
        assert (
            status_of(lambda: client.AppsV1Api(sa_api).read_namespaced_deployment("none", ns))
            == 403
        )


def test_a_list_or_watch_of_one_name_is_allowed_by_that_resource_name(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    """An informer of one object (a field selector on ``metadata.name``) under a Role that
    names it, as kube-apiserver authorizes the list and watch for that name."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("one-object")
    rule = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]}
    rule["verbs"] = ["get", "list", "watch"]
    rbac.create_namespaced_role(ns, {"metadata": {"name": role}, "rules": [rule]})
    bind(rbac, ns, account, "Role", role)
    client.CoreV1Api(api).create_namespaced_config_map(ns, configmap("settings"))
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.CoreV1Api(sa_api)

        def listed(selector: str) -> int:
            return status_of(lambda: sa.list_namespaced_config_map(ns, field_selector=selector))

        wait_for(lambda: listed("metadata.name=settings") == 200, SETTLE, "the role")
        assert listed("metadata.name==settings") == 200
        assert listed("metadata.name=other") == 403
        assert listed("metadata.name!=other") == 403
        assert status_of(lambda: sa.list_namespaced_config_map(ns)) == 403
        watch = raw(
            sa_api,
            "GET",
            f"/api/v1/namespaces/{ns}/configmaps",
            query=[("watch", "true"), ("fieldSelector", "metadata.name=settings"),
                   ("timeoutSeconds", "1")],
        )  # fmt: skip
        assert watch.status == 200, watch.data


def test_a_role_binding_grants_a_cluster_role_in_its_namespace_only(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    name = unique("conformance-lister")
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    try:
        bind(rbac, ns, account, "ClusterRole", name)
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            sa = client.CoreV1Api(sa_api)
            wait_for(lambda: status_of(lambda: sa.list_namespaced_config_map(ns)) == 200, SETTLE)
            assert status_of(lambda: sa.list_namespaced_config_map("default")) == 403
            assert status_of(lambda: sa.list_config_map_for_all_namespaces()) == 403
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role, name)


def test_a_role_binding_s_service_account_without_a_namespace_is_of_its_namespace(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    """A RoleBinding may name a ServiceAccount subject without its namespace (as many charts
    do): it is the binding's own; a ClusterRoleBinding has none to default to and must name it."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("lister")
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    rbac.create_namespaced_role(ns, {"metadata": {"name": role}, "rules": rules})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account}],
        },
    )
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.CoreV1Api(sa_api)
        wait_for(lambda: status_of(lambda: sa.list_namespaced_config_map(ns)) == 200, SETTLE)
        assert can_i(sa_api, ns, "list", "configmaps") is True
    with raises_status(422, "Invalid") as status:
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": unique("no-namespace")},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": account}],
            }
        )
    assert "subjects[0].namespace: Required value" in status["message"]


def test_a_token_binds_only_to_a_pod_of_its_service_account(
    api: ApiClient, core: client.CoreV1Api, ns: str, account: str
) -> None:
    pod = core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": unique("pod")},
            "spec": {
                "serviceAccountName": "default",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )
    ref = {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name}
    other = request_token(api, ns, account, {"boundObjectRef": ref})
    assert other.status == 400, other.data
    assert "cannot bind token for serviceaccount" in other.json()["message"]
    own = request_token(api, ns, "default", {"boundObjectRef": {**ref, "uid": pod.metadata.uid}})
    assert own.status == 201, own.data
    assert own.json()["spec"]["boundObjectRef"]["name"] == pod.metadata.name


def test_a_rules_review_lists_what_the_service_account_may_do(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("lister")
    rule = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}
    rbac.create_namespaced_role(ns, {"metadata": {"name": role}, "rules": [rule]})
    bind(rbac, ns, account, "Role", role)
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": ns},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"

    def deployments_rule() -> bool:
        resp = raw(sa_api, "POST", path, body=body)
        assert resp.status == 201, resp.data
        rules = resp.json()["status"]["resourceRules"]
        return any(
            r["resources"] == ["deployments"] and sorted(r["verbs"]) == ["list", "watch"]
            for r in rules
        )

    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        wait_for(deployments_rule, SETTLE, "the Role's rule in the review")
        # in another namespace the Role does not apply
        other = raw(sa_api, "POST", path, body={**body, "spec": {"namespace": "default"}})
        assert not any(
            r["resources"] == ["deployments"] for r in other.json()["status"]["resourceRules"]
        )


def test_a_rules_review_without_a_namespace_is_refused(api: ApiClient) -> None:
    """Rules are reviewed in one namespace (``kubectl auth can-i --list`` sends the current
    one, and refuses ``-A``); a review naming none is a 400, not the cluster scope's rules."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {}}
    resp = raw(api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", body=body)
    assert resp.status == 400, resp.data
    assert resp.json()["message"] == "no namespace on request"


def test_an_aggregated_cluster_role_holds_the_rules_of_the_roles_it_selects(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    name = unique("conformance-agg")
    label = f"conformance.mcruntime.io/aggregate-to-{name}"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}
    selector = {"matchLabels": {label: "true"}}
    rbac.create_cluster_role(
        {"metadata": {"name": name}, "aggregationRule": {"clusterRoleSelectors": [selector]}}
    )
    part = f"{name}-part"
    try:
        rbac.create_cluster_role(
            {"metadata": {"name": part, "labels": {label: "true"}}, "rules": [rule]}
        )

        def rules_of(role: str) -> list[dict[str, Any]]:
            resp = raw(api, "GET", f"/apis/{RBAC}/v1/clusterroles/{role}")
            assert resp.status == 200, resp.data
            return list(resp.json().get("rules") or [])

        wait_for(lambda: rules_of(name) == [rule], SETTLE, "the aggregated rules")
        bind(rbac, ns, account, "ClusterRole", name)
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            sa = client.CoreV1Api(sa_api)
            wait_for(lambda: status_of(lambda: sa.list_namespaced_config_map(ns)) == 200, SETTLE)
        rbac.delete_cluster_role(part)
        wait_for(lambda: rules_of(name) == [], SETTLE, "the part's rules to leave")
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role, part, name)


def test_cluster_admin_may_do_anything(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    name = unique("conformance-admin")
    bind(rbac, ns, account, "ClusterRole", "cluster-admin", binding=name)
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.CoreV1Api(sa_api)
        wait_for(
            lambda: (
                status_of(lambda: sa.create_namespaced_secret(ns, {"metadata": {"name": name}}))
                == 200
            ),
            SETTLE,
        )
        # a RoleBinding grants it in its namespace only
        assert status_of(lambda: sa.list_namespaced_secret("default")) == 403


def test_a_service_account_grants_only_what_it_holds(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    manager = unique("rbac-manager")
    rules = [
        {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
    ]
    rbac.create_namespaced_role(ns, {"metadata": {"name": manager}, "rules": rules})
    bind(rbac, ns, account, "Role", manager)
    secrets_role = unique("secrets")
    secrets = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    rbac.create_namespaced_role(ns, {"metadata": {"name": secrets_role}, "rules": secrets})
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        sa = client.RbacAuthorizationV1Api(sa_api)

        def create_role(role_rules: list[dict[str, Any]]) -> int:
            body = {"metadata": {"name": unique("made")}, "rules": role_rules}
            return status_of(lambda: sa.create_namespaced_role(ns, body))

        # what it holds it may grant
        wait_for(lambda: create_role(rules[1:]) == 200, SETTLE)
        with raises_status(403, "Forbidden") as status:
            sa.create_namespaced_role(ns, {"metadata": {"name": unique("made")}, "rules": secrets})
        assert "is attempting to grant RBAC permissions not currently held" in status["message"]
        assert 'Resources:["secrets"]' in status["message"]

        def bind_secrets() -> int:
            body = {
                "metadata": {"name": unique("made")},
                "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": secrets_role},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            }
            return status_of(lambda: sa.create_namespaced_role_binding(ns, body))

        assert bind_secrets() == 403
        # `bind` on that one role lets it bind the role; `escalate` lets it write such roles
        extra = [
            {
                "apiGroups": [RBAC],
                "resources": ["roles"],
                "verbs": ["bind"],
                "resourceNames": [secrets_role],
            },
            {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]},
        ]
        rbac.patch_namespaced_role(manager, ns, {"rules": rules + extra})
        wait_for(lambda: bind_secrets() == 200, SETTLE)
        wait_for(lambda: create_role(secrets) == 200, SETTLE)


def test_an_aggregated_cluster_role_needs_escalate(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    name = unique("conformance-roles-writer")
    rules = [{"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["create"]}]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    try:
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            }
        )
        aggregated = unique("conformance-aggregated")
        body = {
            "metadata": {"name": aggregated},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": aggregated}}]},
        }
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            sa = client.RbacAuthorizationV1Api(sa_api)
            wait_for(
                lambda: (
                    "must have cluster-admin privileges to use the aggregationRule"
                    in str(getattr(_raised(lambda: sa.create_cluster_role(body)), "body", ""))
                ),
                SETTLE,
            )
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role_binding, name)
        delete_cluster_scoped(rbac.delete_cluster_role, name)


def _raised(call: Callable[[], Any]) -> BaseException | None:
    try:
        call()
    except client.ApiException as e:
        return e
    return None
