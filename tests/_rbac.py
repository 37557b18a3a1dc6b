"""RBAC for tests that run a manager with a service account's narrower rights."""

from __future__ import annotations

from typing import Any

from mcruntime.client import Client

RBAC = "rbac.authorization.k8s.io"


def grant_cluster_role(
    client: Client, name: str, rules: list[dict[str, Any]], service_account: str
) -> None:
    """Create ClusterRole ``name`` with ``rules`` and bind it to ``service_account``
    (``namespace/name``)."""
    namespace, _, account = service_account.partition("/")
    client.create(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }
    )
    client.create(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )


def username_of(client: Any) -> str:
    """The user the API server authenticates ``client``'s requests as (a SelfSubjectReview,
    sent by ``client``, a `RESTClient`): which credential they presented."""
    review = client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(review["status"]["userInfo"]["username"])
