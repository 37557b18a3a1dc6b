"""A wrong kind name is a clear error for its own controller only; other controllers and clusters run."""

from __future__ import annotations

import logging
import threading

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(60)


def test_a_malformed_kind_fails_when_the_controller_is_built():
    mgr = mcruntime.Manager(provider=Provider())
    with pytest.raises(ValueError, match="ConfigMap"):
        mcruntime.controller_managed_by(mgr).named("bad").for_("ConfigMap").complete(lambda r: None)


def test_an_unknown_kind_does_not_stop_the_other_controllers(make_envtest_fleet, caplog):
    caplog.set_level(logging.INFO, logger="mcruntime")
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in fleet.names:
        c = Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name)
        c.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default"},
            }
        )
        provider.add(name, c)
    mgr = mcruntime.Manager(provider=provider)
    good: set[str] = set()
    done = threading.Event()

    def reconcile(req: mcruntime.Request) -> None:
        good.add(req.cluster_name)
        if good == set(fleet.names):
            done.set()

    mcruntime.controller_managed_by(mgr).named("typo").for_("v1/ConfigMapp").complete(
        lambda r: None
    )
    mcruntime.controller_managed_by(mgr).named("good").for_("v1/ConfigMap").complete(reconcile)
    with mgr:
        assert done.wait(15), f"the good controller reconciled only {good}"
        assert set(mgr.engaged_clusters()) == set(fleet.names)
        wait_for(
            lambda: all(mgr.cluster_states()[n][1] for n in fleet.names),
            timeout=10,
            what="an error in every cluster's state",
        )
        for name in fleet.names:
            state, error = mgr.cluster_states()[name]
            assert state == "engaged"
            assert "controller typo" in error and "ConfigMapp" in error
        assert "cluster=cluster-0" in caplog.text and "ConfigMapp" in caplog.text


def test_a_cluster_whose_only_controller_watches_a_kind_it_cannot_watch_is_engaged(
    make_envtest_server, caplog
):
    # its discovery answered (the kind's API allows create only, as a review kind; or get and
    # list, as metrics.k8s.io's): the cluster is there for get_cluster, the controller is
    # said to fail once with the reason, as for a kind not served
    caplog.set_level(logging.INFO, logger="mcruntime")
    server = make_envtest_server("eu-1")
    provider = Provider()
    provider.add("eu-1", Cluster.from_kubeconfig(server.kubeconfig(), name="eu-1"))
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).named("reviews").for_(
        "authorization.k8s.io/v1/SubjectAccessReview"
    ).complete(lambda r: None)
    with mgr:
        wait_for(lambda: mgr.engaged_clusters() == ["eu-1"], timeout=10, what="eu-1 engaged")
        assert mgr.get_cluster("eu-1").name == "eu-1"
        state, error = mgr.cluster_states()["eu-1"]
        assert state == "engaged"
        assert "controller reviews: MethodNotSupported" in error
        assert "its API allows create, not list and watch" in error
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "controller reviews" in w]) == 1, warnings
