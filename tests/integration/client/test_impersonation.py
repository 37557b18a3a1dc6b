"""A kubeconfig user's ``as:`` (and ``as-groups``, ``as-uid``): every request of the cluster,
watches and informers included, acts as the impersonated user, as kubectl's and client-go's do.

The ``kubernetes`` package's loader ignores these fields, so a kubeconfig that narrows an
admin's rights to a user's would act with the admin's rights: the test would pass with
that bug only if the admin's rights were the user's, which they are not here.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import Forbidden

pytestmark = pytest.mark.timeout(60)

RBAC = "rbac.authorization.k8s.io/v1"


def impersonating(server: APIServer, **fields: Any) -> dict[str, Any]:
    """The admin's kubeconfig with ``fields`` (``as``, ``as-groups``) on its user."""
    doc = copy.deepcopy(server.kubeconfig())
    doc["users"][0]["user"].update(fields)
    return doc


def test_every_request_and_watch_acts_as_the_impersonated_user(envtest_server: APIServer) -> None:
    admin = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="admin")
    admin.client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "robot", "namespace": "default"},
        }
    )
    robot = Cluster.from_kubeconfig(
        impersonating(envtest_server, **{"as": "system:serviceaccount:default:robot"}), name="robot"
    )
    path = "/api/v1/namespaces/default/configmaps"
    with pytest.raises(Forbidden, match='User "system:serviceaccount:default:robot" cannot list'):
        robot.rest.request("GET", path)
    with pytest.raises(Forbidden, match="cannot watch"):
        robot.rest.watch(path, query={"timeoutSeconds": 1})
    admin.client.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",  # an informer lists at the cluster scope
            "metadata": {"name": "robot-view"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
        }
    )
    # an informer (list, then watch) as the robot, bound to view
    robot.start()
    try:
        assert robot.wait_for_cache_sync(10)
        admin.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "seen", "namespace": "default"},
            }
        )
        wait_for(lambda: robot.cache.list("v1/ConfigMap", namespace="default"), 10, "the watch")
        with pytest.raises(Forbidden, match="robot"):  # view does not reach Secrets
            robot.api_reader.list("v1/Secret", namespace="default")
    finally:
        robot.stop()
        admin.stop()


def test_groups_are_sent_one_header_each(envtest_server: APIServer) -> None:
    cluster = Cluster.from_kubeconfig(
        impersonating(envtest_server, **{"as": "jane", "as-groups": ["devs", "auditors"]}),
        name="jane",
    )
    review = cluster.client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    assert review["status"]["userInfo"] == {
        "username": "jane",
        "groups": ["devs", "auditors", "system:authenticated"],
    }


def test_a_uid_and_extras_are_sent_as_kubectl_sends_them(envtest_server: APIServer) -> None:
    extra = {"example.com/team": ["a", "b"], "scopes": ["view"]}
    cluster = Cluster.from_kubeconfig(
        impersonating(envtest_server, **{"as": "jane", "as-uid": "u-1", "as-user-extra": extra}),
        name="jane",
    )
    try:
        review = cluster.client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    finally:
        cluster.stop()
    assert review["status"]["userInfo"] == {
        "username": "jane",
        "uid": "u-1",
        "groups": ["system:authenticated"],
        "extra": extra,
    }
