"""The ``kubeconfig`` provider over a management cluster that hangs (accepts connections, never
answers: a frozen kube-apiserver, a black-holed path): said once, with what it means, in its
``discovery_error`` and ``/readyz``; start is not held its whole bound; the recovery re-engages
nothing and what changed meanwhile is taken once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from mcruntime.envtest import wait_for

pytest.importorskip(
    "mcruntime_kubeconfig",
    reason="the provider is not installed: pip install -e providers/kubeconfig",
)

from mcruntime_kubeconfig import DEFAULT_LABEL, Provider  # noqa: E402

import mcruntime  # noqa: E402
from mcruntime.cluster import Cluster  # noqa: E402
from mcruntime.envtest import APIServer, Fleet, Proxy  # noqa: E402
from mcruntime.manager import Manager, ManagerOptions  # noqa: E402
from mcruntime.multicluster import _management  # noqa: E402
from tests._logs import logged  # noqa: E402
from tests.integration.manager._http import get  # noqa: E402

from .._support import (  # noqa: E402
    RecordingAware,
    Running,
    delete_secret,
    ensure_namespace,
    put_secret,
)

pytestmark = pytest.mark.timeout(60)

NS = "fleet"
ON = {DEFAULT_LABEL: "true"}
#: short health timings: a hang is said within INTERVAL + TIMEOUT + a tick
INTERVAL, TIMEOUT, RETRY = 1.0, 1.0, 0.2
BOUND = INTERVAL + TIMEOUT + RETRY + 2.0
MULTICLUSTER = "mcruntime.multicluster"


@pytest.fixture(autouse=True)
def short_health(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_management, "HEALTH_INTERVAL", INTERVAL, raising=False)
    monkeypatch.setattr(_management, "HEALTH_TIMEOUT", TIMEOUT, raising=False)
    monkeypatch.setattr(_management, "HEALTH_RETRY", RETRY, raising=False)


@pytest.fixture
def path(management: APIServer) -> Iterator[Proxy]:
    """The provider's path to the management cluster, which a test freezes (the writer's is not)."""
    proxy = Proxy(management).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def writer(management: APIServer) -> Iterator[Cluster]:
    cluster = Cluster.from_kubeconfig(management.kubeconfig(), name="writer")
    ensure_namespace(cluster, NS)
    yield cluster
    cluster.stop()


@pytest.fixture
def fleet(make_envtest_fleet: Callable[..., Fleet], writer: Cluster) -> Fleet:
    """Two members, each named by a labelled Secret."""
    fleet = make_envtest_fleet(2)
    for i, name in enumerate(("eu", "us")):
        kubeconfig = yaml.safe_dump(fleet[f"cluster-{i}"].kubeconfig())
        put_secret(writer, NS, name, {"kubeconfig": kubeconfig}, ON)
    return fleet


def provider_through(path: Proxy) -> Provider:
    return Provider(Cluster.from_kubeconfig(path.kubeconfig(), name="hub"), namespace=NS)


def hang_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return logged(
        caplog, logging.WARNING, logger=MULTICLUSTER, containing="management cluster: probing"
    )


def test_a_hung_management_cluster_is_said_once_and_its_recovery_re_engages_nothing(
    path: Proxy,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=MULTICLUSTER)
    aware = RecordingAware()
    provider = provider_through(path)
    run = run_provider(provider, aware)
    wait_for(lambda: aware.names() == ["eu", "us"], timeout=15, what="both members engaged")

    path.freeze()
    frozen = time.monotonic()
    wait_for(lambda: hang_warnings(caplog), timeout=BOUND + 2, what="the hang said")
    assert time.monotonic() - frozen < BOUND
    (line,) = hang_warnings(caplog)
    assert line.startswith("cluster=hub provider=kubeconfig management cluster: probing GET ")
    assert f"no answer within {TIMEOUT:g}s" in line
    assert "no cluster is engaged or disengaged from it until it answers" in line
    assert "the 2 engaged keep running" in line
    # the provider's discovery_error (the manager names it) says it too, at its next look
    error = wait_for(lambda: provider.discovery_error, timeout=5, what="discovery_error set")
    assert "management cluster hub" in error and "no answer" in error
    # a Secret deleted and another's kubeconfig changed while the path hangs
    delete_secret(writer, NS, "us")
    moved = yaml.safe_dump(fleet["cluster-1"].kubeconfig())
    put_secret(writer, NS, "eu", {"kubeconfig": moved}, ON)
    # probed again and again meanwhile (every RETRY s, each waiting TIMEOUT): one warning
    time.sleep(3 * (TIMEOUT + RETRY))
    assert len(hang_warnings(caplog)) == 1
    assert aware.count("end", "eu") == 0 and aware.count("end", "us") == 0

    path.thaw()
    wait_for(lambda: provider.discovery_error is None, timeout=BOUND, what="the recovery")
    recovered = logged(caplog, logging.INFO, logger=MULTICLUSTER, containing="works again")
    assert len(recovered) == 1 and recovered[0].startswith("cluster=hub provider=kubeconfig")
    # what changed meanwhile is taken once: us disengaged, eu engaged again with its new
    # kubeconfig; nothing more (a relist of the same Secrets would change nothing either)
    wait_for(lambda: aware.names() == ["eu"], timeout=10, what="us disengaged")
    wait_for(lambda: aware.count("engage", "eu") == 2, timeout=10, what="eu re-engaged")
    assert aware.count("end", "us") == 1 and aware.count("engage", "us") == 1
    assert aware.count("end", "eu") == 1
    run.stop()
    thread_baseline()


def test_start_is_not_held_its_whole_bound_by_a_management_cluster_hung_from_the_start(
    path: Proxy,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
) -> None:
    path.freeze()
    aware = RecordingAware()
    provider = provider_through(path)
    began = time.monotonic()
    run = run_provider(provider, aware)
    # not the 30 s of INITIAL_LIST_TIMEOUT: the first probe waits TIMEOUT (nothing answered
    # yet), then its own TIMEOUT
    assert provider.wait_for_initial_clusters(BOUND + 5)
    assert time.monotonic() - began < 2 * TIMEOUT + BOUND
    error = provider.discovery_error
    assert error is not None and "management cluster hub" in error and "no answer" in error
    path.thaw()
    wait_for(lambda: aware.names() == ["eu", "us"], timeout=15, what="members engaged after")
    wait_for(lambda: provider.discovery_error is None, timeout=5, what="the error cleared")
    run.stop()
    thread_baseline()


def test_readyz_shows_a_hung_management_cluster_without_failing(path: Proxy, fleet: Fleet) -> None:
    provider = provider_through(path)
    mgr = Manager(
        provider=provider, options=ManagerOptions(health_probe_bind_address="127.0.0.1:0")
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    mgr.start()
    try:
        wait_for(lambda: len(mgr.engaged_clusters()) == 2, timeout=15, what="members engaged")
        address, url = mgr.health_probe_address, "/readyz?verbose"
        path.freeze()
        wait_for(lambda: provider.discovery_error is not None, timeout=BOUND, what="the hang")
        status, body = get(address, url)
        assert status == 200, body
        lines = [ln for ln in body.splitlines() if ln.startswith("[!]provider/kubeconfig ")]
        assert len(lines) == 1, body
        assert "management cluster hub" in lines[0] and "(does not fail readyz)" in lines[0]
        assert "[+]cluster/eu ok" in body and "[+]cluster/us ok" in body
        path.thaw()
        wait_for(lambda: provider.discovery_error is None, timeout=BOUND, what="the recovery")
        status, body = get(address, url)
        assert status == 200 and "provider/" not in body, body
    finally:
        path.thaw()
        mgr.stop()


def test_a_management_cluster_that_refuses_connections_is_said_once_and_is_no_recovery(
    management: APIServer,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # hung first, then refusing (its process gone): the refusal is no answer either, and
    # ends no streak ("works again" only once it answers)
    caplog.set_level(logging.INFO, logger=MULTICLUSTER)
    aware = RecordingAware()
    provider = Provider(Cluster.from_kubeconfig(management.kubeconfig(), name="hub"), namespace=NS)
    run_provider(provider, aware)
    wait_for(lambda: aware.names() == ["eu", "us"], timeout=15, what="both members engaged")
    management.freeze()
    wait_for(lambda: hang_warnings(caplog), timeout=BOUND + 2, what="the hang said")
    management.thaw()
    management.stop()
    error = wait_for(
        lambda: (e := provider.discovery_error) and "cannot reach" in e and e,
        timeout=BOUND,
        what="the refusal in discovery_error",
    )
    assert "management cluster hub" in error
    time.sleep(3 * RETRY)
    recovered = logged(caplog, logging.INFO, logger=MULTICLUSTER, containing="works again")
    assert recovered == [] and len(hang_warnings(caplog)) == 1
    management.start()
    wait_for(lambda: provider.discovery_error is None, timeout=BOUND + 5, what="the recovery")
    recovered = logged(caplog, logging.INFO, logger=MULTICLUSTER, containing="works again")
    assert len(recovered) == 1
    assert aware.count("end", "eu") == 0 and aware.count("end", "us") == 0
