"""Builder engage options and manager-level controller defaults, on a local cluster plus a provider fleet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.controller import ControllerOptions
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from mcruntime.workqueue import default_controller_rate_limiter
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def servers(make_envtest_server: Any) -> dict[str, Any]:
    """A local server and two provider servers, each holding one ConfigMap named after it."""
    out = {name: make_envtest_server(name) for name in ("local", "p-0", "p-1")}
    for name, srv in out.items():
        create_cms(srv, [f"in-{name}"])
    return out


@pytest.fixture
def provider(servers: dict[str, Any]) -> clusters.Provider:
    p = clusters.Provider()
    for name in ("p-0", "p-1"):
        p.add(name, cluster_of(servers[name], name))
    return p


@pytest.fixture
def mgr(servers: dict[str, Any], provider: clusters.Provider) -> Iterator[mcruntime.Manager]:
    m = mcruntime.Manager(servers["local"].kubeconfig(), provider=provider)
    yield m
    m.stop(10)


def _all_engaged(m: mcruntime.Manager) -> None:
    wait_for(lambda: set(m.engaged_clusters()) == {"p-0", "p-1"})


def test_with_a_provider_the_local_cluster_is_not_engaged_by_default(
    mgr: mcruntime.Manager,
) -> None:
    default, local_too, local_only = Recorder(), Recorder(), Recorder()
    mcruntime.controller_managed_by(mgr).named("default").for_(CM).complete(default)
    (
        mcruntime.controller_managed_by(mgr)
        .named("local-too")
        .for_(CM)
        .engage_with_local_cluster(True)
        .complete(local_too)
    )
    (
        mcruntime.controller_managed_by(mgr)
        .named("local-only")
        .for_(CM)
        .engage_with_local_cluster()
        .engage_with_provider_clusters(False)
        .complete(local_only)
    )
    with running(mgr):
        _all_engaged(mgr)
        wait_for(
            lambda: (
                local_too.seen()
                >= {("", "default/in-local"), ("p-0", "default/in-p-0"), ("p-1", "default/in-p-1")}
            )
        )
        wait_for(lambda: default.seen() >= {("p-0", "default/in-p-0"), ("p-1", "default/in-p-1")})
        wait_for(lambda: local_only.saw("", "default/in-local"))
        # a marker on the local cluster reaches the local-engaged controllers; by then
        # the default one would have seen it too, if it watched the local cluster
        mgr.get_cluster("").client.create(configmap("marker"))
        wait_for(
            lambda: local_too.saw("", "default/marker") and local_only.saw("", "default/marker")
        )
        mgr.get_cluster("p-0").client.create(configmap("marker"))
        wait_for(lambda: default.saw("p-0", "default/marker"))
        assert "" not in default.clusters()
        assert local_only.clusters() == {""}


def test_cluster_filter_and_engage_options_given_in_several_calls_merge(
    mgr: mcruntime.Manager,
) -> None:
    filtered, merged = Recorder(), Recorder()
    (
        mcruntime.controller_managed_by(mgr)
        .named("filtered")
        .for_(CM)
        .cluster_filter(lambda name: name == "p-1")
        .complete(filtered)
    )
    ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("merged")
        .for_(CM)
        .engage_with_local_cluster(True)
        .cluster_filter(lambda name: name != "p-1")
        .with_engage_options(provider_clusters=True)
        .complete(merged)
    )
    assert ctrl.engage_options.local_cluster is True
    assert ctrl.engage_options.cluster_filter is not None
    with running(mgr):
        _all_engaged(mgr)
        wait_for(lambda: filtered.saw("p-1", "default/in-p-1"))
        wait_for(lambda: merged.seen() >= {("", "default/in-local"), ("p-0", "default/in-p-0")})
        for name in ("", "p-0", "p-1"):
            mgr.get_cluster(name).client.create(configmap("marker"))
        wait_for(lambda: filtered.saw("p-1", "default/marker"))
        wait_for(lambda: merged.saw("", "default/marker") and merged.saw("p-0", "default/marker"))
        assert filtered.clusters() == {"p-1"}
        assert merged.clusters() == {"", "p-0"}
        assert sorted(ctrl.engaged_clusters()) == ["", "p-0"]


def test_a_cluster_filter_that_raises_vetoes_that_cluster_for_its_controller_alone(
    mgr: mcruntime.Manager, caplog: pytest.LogCaptureFixture
) -> None:
    # a filter written for names like "prod-eu" meets "p-0": its IndexError is said once,
    # naming the controller and the cluster, and only that controller leaves the cluster
    # out; the others engage it (the engagement went on), and so does a source's filter
    other, picky, source_picky = Recorder(), Recorder(), Recorder()
    mcruntime.controller_managed_by(mgr).named("other").for_(CM).complete(other)

    def eu_only(name: str) -> bool:
        return name.split("-")[2] == "eu"

    picky_ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("picky")
        .for_(CM)
        .cluster_filter(eu_only)
        .complete(picky)
    )
    source_ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("source-picky")
        .watches(CM, None, cluster_filter=eu_only)
        .complete(source_picky)
    )
    with caplog.at_level(logging.WARNING, logger="mcruntime.controller"), running(mgr):
        _all_engaged(mgr)
        wait_for(lambda: other.seen() >= {("p-0", "default/in-p-0"), ("p-1", "default/in-p-1")})
        wait_for(lambda: sorted(source_ctrl.engaged_clusters()) == ["p-0", "p-1"])
        assert picky_ctrl.engaged_clusters() == []
        assert picky.clusters() == set() and source_picky.clusters() == set()
    for cluster in ("p-0", "p-1"):
        (line,) = logged(caplog, logging.WARNING, starting=f"cluster={cluster} controller=picky: ")
        assert "the cluster_filter failed: IndexError: list index out of range" in line
        assert "this controller does not engage the cluster (the others do)" in line
        (line,) = logged(
            caplog, logging.WARNING, starting=f"cluster={cluster} controller=source-picky: "
        )
        assert "the cluster_filter of Kind('v1/ConfigMap') failed: IndexError" in line


def test_manager_controller_defaults_reach_controllers_unless_overridden(
    servers: dict[str, Any], provider: clusters.Provider
) -> None:
    limiter = default_controller_rate_limiter()
    m = mcruntime.Manager(
        provider=provider,
        options=ManagerOptions(
            controller=ControllerOptions(max_concurrent_reconciles=3, rate_limiter=limiter)
        ),
    )
    inherits = mcruntime.controller_managed_by(m).named("inherits").for_(CM).complete(Recorder())
    overrides = (
        mcruntime.controller_managed_by(m)
        .named("overrides")
        .for_(CM)
        .with_options(max_concurrent_reconciles=2)
        .with_options(recover_panic=True)
        .complete(Recorder())
    )
    assert inherits.max_concurrent_reconciles == 3
    assert inherits.queue.rate_limiter is limiter and overrides.queue.rate_limiter is limiter
    assert overrides.max_concurrent_reconciles == 2, (
        "a later with_options() call must not reset earlier ones"
    )
    with running(m):
        names = {t.name for t in threading.enumerate()}
        assert sum(n.startswith("mcruntime/controller/inherits/worker-") for n in names) == 3
        assert sum(n.startswith("mcruntime/controller/overrides/worker-") for n in names) == 2
