"""What a server that delegates to the API server asks it: TokenReviews (who is this token?)
and SubjectAccessReviews (may this user do that?), as a secured metrics endpoint, an
aggregated API server or kube-rbac-proxy ask them; and the bootstrap roles they rely on
(``system:auth-delegator``, ``view``, ``edit``, ``admin``).

Written to pass on a real cluster too: audiences are compared with what the server
says its own are, and RBAC changes are awaited (`SETTLE`).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._rbac import RBAC, SETTLE, as_token, bind, delete_cluster_scoped, status_of, token_of
from ._support import assert_status, raw, unique

pytestmark = pytest.mark.timeout(60)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def review_token(api: ApiClient, token: str, audiences: list[str] | None = None) -> Any:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    return raw(api, "POST", TOKEN_REVIEWS, body=body)


def review_access(api: ApiClient, spec: dict[str, Any], ns: str | None = None) -> Any:
    kind = "LocalSubjectAccessReview" if ns else "SubjectAccessReview"
    path = (
        f"/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews"
        if ns
        else ACCESS_REVIEWS
    )
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
    return raw(api, "POST", path, body=body)


def allowed(api: ApiClient, spec: dict[str, Any], ns: str | None = None) -> bool:
    resp = review_access(api, spec, ns)
    assert resp.status == 201, resp.data
    return bool(resp.json()["status"]["allowed"])


def service_account_user(ns: str, account: str) -> dict[str, Any]:
    """A SubjectAccessReview's subject as a TokenReview names a service account."""
    return {
        "user": f"system:serviceaccount:{ns}:{account}",
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{ns}",
            "system:authenticated",
        ],
    }


def get_path(path: str) -> dict[str, Any]:
    return {"nonResourceAttributes": {"verb": "get", "path": path}}


def test_a_token_review_names_the_service_account_of_a_token(
    api: ApiClient, ns: str, account: str
) -> None:
    uid = client.CoreV1Api(api).read_namespaced_service_account(account, ns).metadata.uid
    resp = review_token(api, token_of(api, ns, account))
    assert resp.status == 201, resp.data
    review = resp.json()
    assert review["kind"] == "TokenReview"
    status = review["status"]
    assert status["authenticated"] is True
    user = status["user"]
    assert user["username"] == f"system:serviceaccount:{ns}:{account}"
    assert user["uid"] == uid
    assert {"system:serviceaccounts", f"system:serviceaccounts:{ns}"} <= set(user["groups"])
    assert "system:authenticated" in user["groups"]
    assert status["audiences"]  # the API server's own
    # answered, not stored: nothing to list
    assert raw(api, "GET", TOKEN_REVIEWS).status in (404, 405)


def test_a_token_review_refuses_a_token_that_is_not_one(api: ApiClient) -> None:
    status = review_token(api, "not-a-token").json()["status"]
    assert status["authenticated"] is False
    assert status.get("error")
    assert not (status.get("user") or {}).get("username")


def test_a_token_review_checks_the_audiences_asked_for(
    api: ApiClient, ns: str, account: str
) -> None:
    token = token_of(api, ns, account, {"audiences": ["metrics.example.com"]})
    # not meant for the API server: no default review accepts it
    assert review_token(api, token).json()["status"]["authenticated"] is False
    status = review_token(api, token, ["metrics.example.com", "other"]).json()["status"]
    assert status["authenticated"] is True
    assert status["audiences"] == ["metrics.example.com"]
    assert review_token(api, token, ["other"]).json()["status"]["authenticated"] is False


def test_a_token_review_needs_a_token(api: ApiClient) -> None:
    body = assert_status(review_token(api, ""), 400, "BadRequest")
    assert body["message"] == "token is required for TokenReview in authentication"


def test_a_subject_access_review_answers_for_a_path_by_rbac(
    api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    who = service_account_user(ns, account)
    # everyone authenticated may read health and version (system:public-info-viewer)
    assert allowed(api, {**who, **get_path("/healthz")})
    assert not allowed(api, {**who, **get_path("/metrics")})
    # a name with a colon, as kubebuilder's "<project>-metrics-reader" roles and the
    # bootstrap "system:..." ones have: RBAC names are path segments, not DNS names
    role = f"{unique('conformance')}:metrics-reader"
    rbac.create_cluster_role(
        {"metadata": {"name": role}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    )
    try:
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            }
        )
        wait_for(lambda: allowed(api, {**who, **get_path("/metrics")}), SETTLE, "the binding")
        assert not allowed(
            api, {**who, "nonResourceAttributes": {"verb": "post", "path": "/metrics"}}
        )
        assert not allowed(api, {**who, **get_path("/metrics/extra")})
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role_binding, role)
        delete_cluster_scoped(rbac.delete_cluster_role, role)


def test_an_rbac_name_may_not_hold_a_slash(api: ApiClient) -> None:
    resp = raw(
        api,
        "POST",
        f"/apis/{RBAC}/v1/clusterroles",
        body={"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "a/b"}},
    )
    body = assert_status(resp, 422, "Invalid")
    assert "may not contain '/'" in body["message"]


def test_masters_may_do_anything_and_nobody_may_do_nothing(api: ApiClient, ns: str) -> None:
    verb = {"namespace": ns, "verb": "delete", "resource": "secrets", "name": "any"}
    assert allowed(
        api, {"user": "someone", "groups": ["system:masters"], "resourceAttributes": verb}
    )
    assert not allowed(api, {"user": unique("nobody"), "resourceAttributes": verb})


def test_an_access_review_is_checked(api: ApiClient, ns: str) -> None:
    resource = {"resourceAttributes": {"verb": "get", "resource": "pods"}}
    body = assert_status(review_access(api, resource), 422, "Invalid")
    assert "at least one of user or group must be specified" in body["message"]
    body = assert_status(review_access(api, {"user": "u"}), 422, "Invalid")
    assert "exactly one of nonResourceAttributes or resourceAttributes" in body["message"]
    both = {"user": "u", **resource, **get_path("/metrics")}
    assert_status(review_access(api, both), 422, "Invalid")
    other = {"user": "u", "resourceAttributes": {"namespace": "default", "verb": "get"}}
    body = assert_status(review_access(api, other, ns), 400, "BadRequest")
    assert body["message"] == f"spec.resourceAttributes.namespace must match namespace: {ns}"


def test_view_edit_and_admin_grant_what_their_names_say(
    api: ApiClient, ns: str, account: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    who = service_account_user(ns, account)

    def may(verb: str, resource: str, group: str = "") -> bool:
        attrs = {"namespace": ns, "verb": verb, "resource": resource, "group": group}
        return allowed(api, {**who, "resourceAttributes": attrs}, ns)

    bind(rbac, ns, account, "ClusterRole", "view")
    wait_for(lambda: may("list", "configmaps"), SETTLE, "view")
    assert may("watch", "deployments", "apps")
    assert not may("get", "secrets")  # view leaves secrets out
    assert not may("create", "configmaps")
    bind(rbac, ns, account, "ClusterRole", "edit")
    wait_for(lambda: may("create", "configmaps"), SETTLE, "edit")
    assert may("get", "secrets") and may("patch", "deployments", "apps")
    assert not may("create", "roles", RBAC)  # only admin manages access
    bind(rbac, ns, account, "ClusterRole", "admin")
    wait_for(lambda: may("create", "roles", RBAC), SETTLE, "admin")
    assert may("delete", "leases", "coordination.k8s.io")


def test_a_role_labelled_to_aggregate_to_view_extends_view(
    api: ApiClient, ns: str, account: str
) -> None:
    """What an operator ships beside its CRD so that ``view`` (and so ``edit`` and
    ``admin``) cover its kind."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = f"{unique('conformance')}:widgets-view"
    rule = {"apiGroups": ["conformance.mcruntime.io"], "resources": ["sprockets"], "verbs": ["get"]}
    label = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
    rbac.create_cluster_role({"metadata": {"name": role, "labels": label}, "rules": [rule]})
    try:
        who = service_account_user(ns, account)
        attrs = {
            "namespace": ns,
            "verb": "get",
            "group": "conformance.mcruntime.io",
            "resource": "sprockets",
        }
        bind(rbac, ns, account, "ClusterRole", "admin")
        wait_for(lambda: allowed(api, {**who, "resourceAttributes": attrs}), SETTLE, "aggregation")
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role, role)
    wait_for(
        lambda: (
            not allowed(api, {**service_account_user(ns, account), "resourceAttributes": attrs})
        ),
        SETTLE,
        "the rule to leave view, edit and admin",
    )


def test_reviews_of_others_need_the_auth_delegator_role(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    token = token_of(api, ns, account)
    spec = {"user": "someone", **get_path("/metrics")}
    with as_token(kube_backend, token) as sa_api:
        assert review_token(sa_api, token).status == 403
        assert review_access(sa_api, spec).status == 403
        rbac = client.RbacAuthorizationV1Api(api)
        name = unique("conformance-delegator")
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": RBAC,
                    "kind": "ClusterRole",
                    "name": "system:auth-delegator",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            }
        )
        try:
            wait_for(lambda: review_token(sa_api, token).status == 201, SETTLE, "the binding")
            assert review_token(sa_api, token).json()["status"]["authenticated"] is True
            assert review_access(sa_api, spec).status == 201
            # the delegation stops there: nothing else became readable
            sa = client.CoreV1Api(sa_api)
            assert status_of(lambda: sa.list_namespaced_secret(ns)) == 403
        finally:
            delete_cluster_scoped(rbac.delete_cluster_role_binding, name)


def _storage_objects(text: str) -> dict[str, int]:
    """``apiserver_storage_objects`` of a Prometheus text scrape, by resource."""
    prefix = 'apiserver_storage_objects{resource="'
    return {
        line[len(prefix) : line.index('"}')]: int(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def test_metrics_are_served_to_whom_rbac_lets_get_the_path(
    kube_backend: KubeBackend, api: ApiClient, ns: str, account: str
) -> None:
    # `kubectl get --raw /metrics`: Prometheus text for the admin; a service account needs
    # `get` on the path (the bootstrap system:monitoring role), else a 403 naming the path
    client.CoreV1Api(api).create_namespaced_config_map(ns, {"metadata": {"name": unique("cm")}})
    scraped = raw(api, "GET", "/metrics", accept="text/plain")
    assert scraped.status == 200, scraped.data
    assert scraped.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = scraped.data.decode()
    assert "# TYPE apiserver_storage_objects gauge" in text
    assert "# TYPE kubernetes_build_info gauge" in text
    assert _storage_objects(text).get("configmaps", 0) >= 1
    user = f"system:serviceaccount:{ns}:{account}"
    rbac = client.RbacAuthorizationV1Api(api)
    binding = unique("conformance-monitoring")
    with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
        refused = raw(sa_api, "GET", "/metrics", accept="text/plain")
        status = assert_status(refused, 403, "Forbidden")
        assert status["message"] == f'forbidden: User "{user}" cannot get path "/metrics"'
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "system:monitoring"},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            }
        )
        try:
            wait_for(
                lambda: raw(sa_api, "GET", "/metrics", accept="text/plain").status == 200,
                SETTLE,
                "the system:monitoring binding",
            )
        finally:
            delete_cluster_scoped(rbac.delete_cluster_role_binding, binding)
