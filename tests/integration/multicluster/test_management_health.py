"""`ManagementCluster.check_health`: its thread is the run's, and ends with `release()` at once,
even while a probe of a hung management cluster waits for its answer."""

from __future__ import annotations

import logging
import time

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.multicluster import Clusters, ManagementCluster, _management
from tests._silent import silent_server

pytestmark = pytest.mark.timeout(30)

#: a probe that would wait long past the release, were it not cut
TIMEOUT = 10.0


def health_threads() -> list[str]:
    return [t.name for t in mcruntime_threads() if "management-health" in t.name]


@pytest.mark.parametrize("owned", [True, False], ids=["owned", "callers"])
def test_release_ends_the_check_at_once_while_its_probe_waits(
    owned: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_management, "HEALTH_INTERVAL", 0.2)
    monkeypatch.setattr(_management, "HEALTH_TIMEOUT", TIMEOUT)
    caplog.set_level(logging.WARNING, logger="mcruntime.multicluster")
    with silent_server() as server:
        cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="hub")
        management = ManagementCluster(cluster, owned=owned)
        try:
            management.acquire()  # no stop event: only release() ends the run
            management.check_health(Clusters("test"), [])
            wait_for(lambda: server.accepted, timeout=5, what="the probe sent")
            assert health_threads()
            began = time.monotonic()
            management.release()
            assert time.monotonic() - began < 2, "release() waited for the probe's deadline"
            assert health_threads() == []
            assert management.health_problem is None
            # a probe cut by the release is no failure of the management cluster
            assert not caplog.records, [r.getMessage() for r in caplog.records]
        finally:
            cluster.stop()


def test_check_health_needs_a_run() -> None:
    with silent_server() as server:
        management = ManagementCluster(Cluster.from_kubeconfig(server.kubeconfig(), name="hub"))
        try:
            with pytest.raises(RuntimeError, match="acquire"):
                management.check_health(Clusters("test"), [])
        finally:
            management.cluster.stop()
