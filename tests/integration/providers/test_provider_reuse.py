"""A provider serves one manager at a time, and a notebook that runs its manager cell again
with the provider of an earlier cell is told what happened to that provider's clusters.

Before, one provider given to two running managers was re-pointed at the second silently
(the first never saw a cluster added later, and the second's stop disengaged the first's
clusters); an embedded provider started again returned from the new manager's start before
its new fleet was engaged; and a clusters provider started again after its stop engaged
nothing, without a word (the stop had removed and stopped its clusters)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.providers import clusters, embedded

pytestmark = pytest.mark.timeout(60)


def _provider_of(srv: APIServer) -> clusters.Provider:
    """A clusters provider holding cluster ``a``, served by ``srv``."""
    provider = clusters.Provider()
    provider.add("a", Cluster.from_kubeconfig(srv.kubeconfig(), name="a"))
    return provider


def test_a_provider_running_for_one_manager_refuses_a_second_and_keeps_the_firsts_clusters(
    make_envtest_server: Callable[..., APIServer], caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_envtest_server("a")
    provider = _provider_of(srv)
    with mcruntime.Manager(provider=provider) as first:
        second = mcruntime.Manager(provider=provider)
        with caplog.at_level(logging.CRITICAL, logger="mcruntime.manager"):
            second.start()  # (the provider fails in its thread: the manager stops itself)
            assert second.wait(10), "the second manager did not stop"
        with pytest.raises(RuntimeError, match="runs for another manager already"):
            second.run()
        second.stop()
        provider.add("b", Cluster.from_kubeconfig(srv.kubeconfig(), name="b"))
        wait_for(lambda: first.engaged_clusters() == ["a", "b"], timeout=10)
        assert provider.names() == ["a", "b"]


def test_an_embedded_provider_started_again_engages_its_new_fleet_before_start_returns() -> None:
    provider = embedded.Provider(embedded.Options(clusters=1, tls=False))
    for _ in range(2):
        with mcruntime.Manager(provider=provider) as mgr:
            assert mgr.engaged_clusters() == ["cluster-0"]


def test_a_clusters_provider_started_again_empty_says_its_stop_removed_its_clusters(
    make_envtest_server: Callable[..., APIServer], caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_envtest_server("a")
    provider = _provider_of(srv)
    with mcruntime.Manager(provider=provider):
        pass
    with (
        caplog.at_level(logging.WARNING, logger="mcruntime.multicluster"),
        mcruntime.Manager(provider=provider) as mgr,
    ):
        assert mgr.engaged_clusters() == []
    said = [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcruntime.multicluster" and r.levelno >= logging.WARNING
    ]
    assert said == [
        "provider=clusters starts again with no cluster: the stop of the manager it ran for "
        "before removed (and stopped) the 1 it had; add them again (a stopped Cluster's "
        "clone()), or give this manager a new provider"
    ], said
