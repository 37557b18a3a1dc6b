"""Controllers added to a running manager engage every cluster they want, as those it started
with do: one still syncing, and one that lacks their kind once its CRD arrives."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.cache import ByKind, CacheOptions
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)


def test_a_controller_added_while_a_cluster_syncs_engages_it_once_that_attempt_succeeded(
    make_envtest_server: Any,
) -> None:
    # the attempt to engage "slow" is under way (the configmaps controller's list is held in
    # its transform) when the secrets controller is added: that attempt succeeds for the
    # controller it began with, and the one added meanwhile is engaged after it, not never
    srv = make_envtest_server("slow")
    create_cms(srv, ["cm"])
    listing, release = threading.Event(), threading.Event()

    def held(obj: dict[str, Any]) -> dict[str, Any]:
        listing.set()
        assert release.wait(20)
        return obj

    options = CacheOptions(by_kind={CM: ByKind(transform=held)})
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider)
    configmaps = Recorder()
    configmap_controller(mgr, configmaps)
    with running(mgr):
        provider.add("slow", cluster_of(srv, "slow", cache_options=options))
        assert listing.wait(10), "the configmaps controller's list did not begin"
        assert mgr.cluster_states()["slow"][0] == "syncing"
        secrets = Recorder()
        late = (
            mcruntime.controller_managed_by(mgr)
            .named("secrets")
            .for_("v1/Secret")
            .complete(secrets)
        )
        release.set()
        wait_for(lambda: configmaps.saw("slow", "default/cm"), what="the configmap reconciled")
        wait_for(
            lambda: late.engaged_clusters() == ["slow"],
            timeout=10,
            what="the controller added while the cluster synced engaged it",
        )
        mgr.get_cluster("slow").client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": "default"},
            }
        )
        wait_for(lambda: secrets.saw("slow", "default/s"), what="the secret reconciled")


def test_a_controller_added_for_a_kind_one_cluster_lacks_engages_the_others_and_it_once_served(
    make_envtest_fleet: Any,
) -> None:
    # complete() on a running manager neither raises for the cluster without the CRD nor
    # leaves the clusters after it unengaged; that cluster is retried as at start, and the
    # CRD installed there later engages it
    from mcruntime.crd import generate_crd
    from tests.integration.crd.test_crd_install import Gadget

    fleet = make_envtest_fleet(names=["a-bare", "b-served", "c-served"])
    provider = clusters.Provider()
    for srv in fleet:
        cluster = cluster_of(srv, srv.name)
        if srv.name != "a-bare":
            cluster.uncached_client.create(generate_crd(Gadget))
        provider.add(srv.name, cluster)
    mgr = mcruntime.Manager(provider=provider)
    configmap_controller(mgr, Recorder())
    with running(mgr):
        names = ["a-bare", "b-served", "c-served"]
        wait_for(lambda: mgr.engaged_clusters() == names, what="every cluster engaged")
        gadgets = Recorder()
        late = mcruntime.controller_managed_by(mgr).named("gadgets").for_(Gadget).complete(gadgets)
        wait_for(
            lambda: late.engaged_clusters() == ["b-served", "c-served"],
            timeout=10,
            what="the clusters serving Gadgets engaged",
        )
        mgr.get_cluster("a-bare").uncached_client.create(generate_crd(Gadget))
        wait_for(
            lambda: late.engaged_clusters() == names,
            timeout=20,
            what="the cluster engaged once its CRD was installed",
        )
