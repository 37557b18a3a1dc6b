"""The manager lets go of its clusters before it tells the provider to stop.

A provider that owns its clusters' API servers (the embedded one) stops them
when it stops; what the manager does on the way out of a cluster (removing
webhook configurations, releasing fences) must be over by then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(30)


class OwningProvider(Provider):
    """Records when it is told to stop, as a provider that then stops its servers would."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.told = threading.Event()

    def run(self, stop: threading.Event) -> None:
        try:
            super().run(stop)
        finally:
            self.events.append("provider stops")
            self.told.set()


def test_clusters_are_torn_down_before_the_provider_is_told_to_stop(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    srv = make_envtest_server("owned")
    provider = OwningProvider()
    provider.add("owned", Cluster.from_kubeconfig(srv.kubeconfig(), name="owned"))
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)

    def disengaged(name: str) -> None:
        # a provider told to stop first would record it before this wait is over
        provider.told.wait(0.5)
        provider.events.append(f"{name} torn down")

    mgr.on_cluster_disengaged(disengaged)
    mgr.start()
    wait_for(lambda: mgr.engaged_clusters() == ["owned"], what="engaged")
    mgr.stop()
    assert provider.events == ["owned torn down", "provider stops"]


def test_a_stopped_manager_refuses_to_start_again(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # a fixture that enters one manager in two tests: the second run would reconcile nothing
    server = make_envtest_server("restart")
    mgr = mcruntime.Manager(server.kubeconfig())
    mgr.start()
    mgr.stop()
    with pytest.raises(RuntimeError, match="a stopped manager cannot be started again"):
        mgr.start()
    with pytest.raises(RuntimeError, match="a stopped manager cannot be started again"), mgr:
        pass
