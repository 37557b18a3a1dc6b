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
