"""The rights docs/security.md lists for a manager are enough, and no more is asked: a manager
whose local cluster's credentials hold exactly those rules (a controller's kind, Events, its
leader-election Lease) leads, reconciles, records an Event and its repeat, and stops releasing
its Lease, without one warning. The rules are written here as the documented manifest writes
them; envtest authorizes them as kube-apiserver's RBAC would."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.reconcile import Request

pytestmark = pytest.mark.timeout(60)

RBAC = "rbac.authorization.k8s.io/v1"
NS = "my-operator"

#: docs/security.md, "A minimal manifest": the controller watches ConfigMaps and records Events
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
LEASE_RULES = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
]


def _grant(admin: Cluster) -> None:
    account = {"kind": "ServiceAccount", "name": "operator", "namespace": NS}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "name": "my-operator"}
    for obj in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": "my-operator"},
            "rules": CLUSTER_RULES,
        },
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "my-operator"},
            "roleRef": {**ref, "kind": "ClusterRole"},
            "subjects": [account],
        },
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "my-operator", "namespace": NS},
            "rules": LEASE_RULES,
        },
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "my-operator", "namespace": NS},
            "roleRef": {**ref, "kind": "Role"},
            "subjects": [account],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "default"},
        },
    ):
        admin.client.create(obj)


def test_the_documented_rights_are_enough_for_a_manager_and_ask_nothing_more(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_envtest_server("least-privilege")
    admin = Cluster.from_kubeconfig(server.kubeconfig(), name="admin")
    _grant(admin)
    mgr = mcruntime.Manager(
        server.kubeconfig(service_account=f"{NS}/operator"),
        options=ManagerOptions(
            leader_election=True,
            leader_election_id="my-operator",
            leader_election_namespace=NS,
            lease_duration=4.0,
            renew_deadline=3.0,
            retry_period=0.5,
        ),
    )
    recorder = mgr.get_event_recorder_for("my-operator")

    def reconcile(req: Request) -> None:
        obj = mgr.get_cluster().client.get("v1/ConfigMap", req.name, req.namespace)
        for _ in range(2):  # the repeat is a patch of the first Event's count
            recorder.event(obj, "Normal", "Synced", "synced")

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    caplog.set_level(logging.WARNING, logger="mcruntime")
    try:
        with mgr:
            assert mgr.elected().wait(10)

            def counted() -> bool:
                events = admin.uncached_client.list("v1/Event", namespace="default")
                return any(e.get("count") == 2 for e in events)

            wait_for(counted, what="the Event and its repeat")
        lease = admin.uncached_client.get("coordination.k8s.io/v1/Lease", "my-operator", NS)
        assert not lease["spec"].get("holderIdentity"), "the Lease was not released"
        assert [r.getMessage() for r in caplog.records] == []
    finally:
        admin.stop()
