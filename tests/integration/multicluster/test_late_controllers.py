"""Controllers added to a running manager engage every cluster they want, as those it started
with do: one still syncing, and one that lacks their kind once its CRD arrives."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.cache import ByKind, CacheOptions
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from tests._logs import logged
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


def _gadgets_served_but_in_a_bare(make_envtest_fleet: Any, names: list[str]) -> mcruntime.Manager:
    """A manager over a fleet of clusters ``names``, each with the Gadget CRD but "a-bare"."""
    from mcruntime.crd import generate_crd
    from tests.integration.crd.test_crd_install import Gadget

    provider = clusters.Provider()
    for srv in make_envtest_fleet(names=names):
        cluster = cluster_of(srv, srv.name)
        if srv.name != "a-bare":
            cluster.uncached_client.create(generate_crd(Gadget))
        provider.add(srv.name, cluster)
    return mcruntime.Manager(provider=provider)


def test_a_controller_added_for_a_kind_one_cluster_lacks_engages_the_others_and_it_once_served(
    make_envtest_fleet: Any,
) -> None:
    # complete() on a running manager neither raises for the cluster without the CRD nor
    # leaves the clusters after it unengaged; that cluster is retried as at start, and the
    # CRD installed there later engages it
    from mcruntime.crd import generate_crd
    from tests.integration.crd.test_crd_install import Gadget

    mgr = _gadgets_served_but_in_a_bare(make_envtest_fleet, ["a-bare", "b-served", "c-served"])
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


def test_a_source_watched_on_a_running_controller_reaches_every_cluster_once_it_serves_the_kind(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # watch() of a kind one engaged cluster lacks neither raises nor skips the clusters after
    # it: that cluster is let go of by the controller and engaged again, with the source, once
    # its CRD is installed, as a controller that started with the source would be
    from mcruntime.crd import generate_crd
    from mcruntime.source import Kind
    from tests.integration.crd.test_crd_install import Gadget

    mgr = _gadgets_served_but_in_a_bare(make_envtest_fleet, ["a-bare", "b-served"])
    rec = Recorder()
    ctrl = configmap_controller(mgr, rec)
    names = ["a-bare", "b-served"]

    def gadget(name: str) -> Gadget:
        return Gadget.model_validate(
            {"metadata": {"name": name, "namespace": "default"}, "spec": {"color": "red"}}
        )

    with caplog.at_level(logging.WARNING, logger="mcruntime.controller"), running(mgr):
        wait_for(lambda: ctrl.engaged_clusters() == names, what="every cluster engaged")
        ctrl.watch(Kind(Gadget))
        mgr.get_cluster("b-served").client.create(gadget("g-b"))
        wait_for(lambda: rec.saw("b-served", "default/g-b"), what="the gadget reconciled")
        mgr.get_cluster("a-bare").uncached_client.create(generate_crd(Gadget))
        wait_for(lambda: ctrl.engaged_clusters() == names, timeout=20, what="a-bare engaged again")
        mgr.get_cluster("a-bare").client.create(gadget("g-a"))
        wait_for(lambda: rec.saw("a-bare", "default/g-a"), what="its gadget reconciled")
    (line,) = logged(caplog, logging.WARNING, starting="controller=configmaps cluster=a-bare: ")
    assert "the source Kind(<class" in line and "cannot start there: no kind " in line
