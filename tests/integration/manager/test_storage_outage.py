"""A cluster whose API server answers but whose storage (etcd) is down is flagged unhealthy
within the health bound, named in /readyz, and served again once its storage is back; a
cluster that forbids /readyz is checked by any answer instead."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import Fleet, wait_for
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.providers.clusters import Provider
from mcruntime.source import Channel
from tests._logs import logged
from tests.integration.manager.test_cluster_health import cm, get

pytestmark = pytest.mark.timeout(90)

#: short health timings so the test runs in seconds
INTERVAL, TIMEOUT, RETRY = 1.0, 0.5, 0.2
#: the bound to notice: silent for the interval, one probe's deadline, a scheduler tick
#: (half the shorter of retry interval and interval), and slack for a loaded machine
BOUND = INTERVAL + TIMEOUT + min(RETRY, INTERVAL) / 2 + 1.0


class Fixture:
    """A manager with one controller over ``fleet``: ConfigMaps, and a Channel to queue a
    request of any cluster; each reconcile reads its ConfigMap from the API (storage)."""

    def __init__(self, fleet: Fleet, kubeconfigs: dict[str, dict[str, Any]] | None = None) -> None:
        self.fleet = fleet
        self.provider = Provider()
        for name in fleet.names:
            config = (kubeconfigs or {}).get(name) or fleet[name].kubeconfig()
            self.provider.add(name, Cluster.from_kubeconfig(config, name=name))
        self.mgr = Manager(
            provider=self.provider,
            options=ManagerOptions(
                health_probe_bind_address="127.0.0.1:0",
                cluster_health_interval=INTERVAL,
                cluster_health_timeout=TIMEOUT,
                cluster_health_retry_interval=RETRY,
            ),
        )
        self.channel = Channel()
        self.lock = threading.Lock()
        #: (cluster, name) of each reconcile, when it began and when it had read the object
        self.started: list[tuple[str, str, float]] = []
        self.done: list[tuple[str, str, float]] = []

        def reconcile(req: mcruntime.Request) -> None:
            with self.lock:
                self.started.append((req.cluster_name, req.name, time.monotonic()))
            cluster = self.mgr.get_cluster(req.cluster_name)
            cluster.api_reader.get("v1/ConfigMap", req.name, "default")
            with self.lock:
                self.done.append((req.cluster_name, req.name, time.monotonic()))

        (
            mcruntime.controller_managed_by(self.mgr)
            .for_("v1/ConfigMap")
            .watches(self.channel)
            .with_options(max_concurrent_reconciles=4)
            .complete(reconcile)
        )

    def create(self, cluster: str, name: str, timeout: float = 10) -> None:
        c = Cluster.from_kubeconfig(self.fleet[cluster].kubeconfig(), name="test-writer")
        try:
            c.client.create(cm(name), timeout=timeout)
        finally:
            c.stop()

    def reconciled(self, cluster: str, name: str, after: float = 0.0) -> float | None:
        with self.lock:
            times = [t for c, n, t in self.done if (c, n) == (cluster, name) and t >= after]
        return times[0] if times else None

    def healthy(self, cluster: str) -> float | None:
        return self.mgr.metrics.sample("mcruntime_cluster_healthy", {"cluster": cluster})


@pytest.fixture
def fx(make_envtest_fleet: Callable[..., Fleet]) -> Iterator[Fixture]:
    fixture = Fixture(make_envtest_fleet(3, prefix="st"))
    fixture.mgr.start()
    wait_for(lambda: len(fixture.mgr.engaged_clusters()) == 3, 15, "the clusters engaged")
    try:
        yield fixture
    finally:
        for server in fixture.fleet:
            server.storage_restored()
        fixture.mgr.stop(10)


def test_a_cluster_whose_storage_is_down_is_flagged_in_time_and_served_once_it_is_back(
    fx: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    down, *others = fx.fleet.names
    for name in fx.fleet.names:
        fx.create(name, "before")
    for name in fx.fleet.names:
        wait_for(lambda n=name: fx.reconciled(n, "before"), 10, f"{name} reconciled")
    caplog.set_level(logging.INFO, logger="mcruntime.manager")

    def lines(level: int, containing: str = "") -> list[str]:
        return logged(caplog, level, starting=f"cluster={down} ", containing=containing)

    # its API server keeps answering /version, discovery and watches (bookmarks every
    # second): only a readiness check tells that its storage is gone
    fx.fleet.storage_outage(down)
    began = time.monotonic()
    wait_for(lambda: fx.healthy(down) == 0.0, BOUND + 2, "the cluster without storage flagged")
    detected = time.monotonic() - began
    assert detected < BOUND, detected
    wait_for(lambda: lines(logging.WARNING), 5, "its warning")
    (warning,) = lines(logging.WARNING)
    assert warning.startswith(
        f"cluster={down} health: probing GET /readyz failed: "
        "not ready: etcd, etcd-readiness failed; "
    ), warning
    address = fx.mgr.health_probe_address
    assert address is not None
    status, body = get(address, "/readyz?verbose")
    assert status == 200, body  # a provider cluster is informational
    assert f"[!]cluster/{down} not answering for " in body, body
    assert "not ready: etcd, etcd-readiness failed" in body
    assert all(f"[+]cluster/{name} ok" in body for name in others), body
    # the other clusters go on being reconciled
    for name in others:
        t = time.monotonic()
        fx.create(name, "during")
        wait_for(lambda n=name: fx.reconciled(n, "during"), 5, f"{name} served meanwhile")
        reconciled = fx.reconciled(name, "during")
        assert reconciled is not None and reconciled - t < 2
    # a request for it queued meanwhile waits, with no worker held; a write waits for etcd
    fx.channel.send({"metadata": {"name": "before", "namespace": "default"}}, cluster_name=down)
    writer_done = threading.Event()

    def write() -> None:
        try:
            fx.create(down, "written-during", timeout=30)
        finally:
            writer_done.set()

    writer = threading.Thread(target=write, name="mcruntime/test-writer/st", daemon=True)
    writer.start()
    assert not writer_done.wait(1.0)
    with fx.lock:
        assert [s for s in fx.started if s[0] == down and s[2] > began] == []
    # storage back: healthy again within a retry interval and a probe, the held request
    # and the write's event reconciled
    fx.fleet.storage_restored(down)
    restored = time.monotonic()
    wait_for(lambda: fx.healthy(down) == 1.0, 5, "recovery noticed")
    assert time.monotonic() - restored < RETRY + TIMEOUT + 1
    wait_for(lambda: fx.reconciled(down, "before", after=restored), 5, "the held request")
    assert writer_done.wait(5)
    wait_for(lambda: fx.reconciled(down, "written-during"), 5, "the write's event")
    wait_for(lambda: lines(logging.INFO, "works again"), 5, "recovery logged")
    (recovery,) = lines(logging.INFO, "works again")
    assert recovery.startswith(f"cluster={down} health: probing GET /readyz works again after ")
    assert len(lines(logging.WARNING)) == 1


def _prober_forbidden_readyz(fleet: Fleet, name: str) -> dict[str, Any]:
    """The kubeconfig of a service account of ``name`` that may read ConfigMaps, and that
    nothing grants /readyz."""
    admin = Cluster.from_kubeconfig(fleet[name].kubeconfig(), name="test-admin")
    try:
        admin.client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "prober-view"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "view",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "prober", "namespace": "default"}],
            }
        )
        _forbid_readyz(admin)
    finally:
        admin.stop()
    return fleet[name].kubeconfig(service_account="default/prober")


def _forbid_readyz(cluster: Cluster, forbid: bool = True) -> None:
    """Take ``/readyz`` out of the bootstrap ClusterRoles that grant it to every user."""
    for name in ("system:public-info-viewer", "system:discovery"):
        role = cluster.uncached_client.get("rbac.authorization.k8s.io/v1/ClusterRole", name)
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:
                urls = [u for u in rule["nonResourceURLs"] if u != "/readyz"]
                rule["nonResourceURLs"] = urls if forbid else [*urls, "/readyz"]
        cluster.uncached_client.update(role)


def test_a_cluster_that_serves_readyz_again_has_its_storage_checked_again(
    make_envtest_fleet: Callable[..., Fleet], caplog: pytest.LogCaptureFixture
) -> None:
    # bookmarks five times an interval: its watches never fall silent, so only a probe
    # that asks for /readyz again (the recheck) finds out that it is served again
    fleet = make_envtest_fleet(1, prefix="ra", bookmark_interval=INTERVAL / 5)
    (name,) = fleet.names
    kubeconfig = _prober_forbidden_readyz(fleet, name)
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    fx = Fixture(fleet, {name: kubeconfig})
    fx.mgr.start()
    try:

        def said(containing: str) -> list[str]:
            return logged(
                caplog,
                logging.INFO,
                starting=f"cluster={name} health: GET /readyz ",
                containing=containing,
            )

        wait_for(lambda: said("answered 403"), BOUND + 2, "the fallback said")
        admin = Cluster.from_kubeconfig(fleet[name].kubeconfig(), name="test-admin")
        try:
            _forbid_readyz(admin, forbid=False)  # the role granted back
        finally:
            admin.stop()
        granted = time.monotonic()
        wait_for(lambda: said("served again"), 6 * INTERVAL + BOUND + 2, "the recheck said")
        assert time.monotonic() - granted < 6 * INTERVAL + BOUND
        assert said("served again") == [
            f"cluster={name} health: GET /readyz is served again; its storage is checked again"
        ]
        # its storage is checked again: an outage is flagged though its watches go on
        fleet.storage_outage(name)
        down = time.monotonic()
        wait_for(lambda: fx.healthy(name) == 0.0, BOUND + 2, "the storage outage flagged")
        assert time.monotonic() - down < BOUND
    finally:
        fleet[name].storage_restored()
        fx.mgr.stop(10)


def test_a_cluster_that_forbids_readyz_counts_as_healthy_while_it_answers(
    make_envtest_fleet: Callable[..., Fleet], caplog: pytest.LogCaptureFixture
) -> None:
    fleet = make_envtest_fleet(2, prefix="rb")
    closed, _ = fleet.names
    kubeconfig = _prober_forbidden_readyz(fleet, closed)
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    fx = Fixture(fleet, {closed: kubeconfig})
    fx.mgr.start()
    try:
        wait_for(lambda: len(fx.mgr.engaged_clusters()) == 2, 15, "the clusters engaged")

        def said() -> list[str]:
            return logged(caplog, logging.INFO, starting=f"cluster={closed} health: GET /readyz")

        wait_for(said, BOUND + 2, "the fallback said")
        assert said() == [
            f"cluster={closed} health: GET /readyz answered 403; any answer counts as "
            "healthy for this cluster (its storage is not checked)"
        ]
        assert fx.healthy(closed) == 1.0
        fx.create(closed, "served")
        wait_for(lambda: fx.reconciled(closed, "served"), 5, "the cluster served")
        # answering, it stays healthy; hung, it is flagged as any cluster is
        fleet.freeze(closed)
        frozen = time.monotonic()
        wait_for(lambda: fx.healthy(closed) == 0.0, BOUND + 2, "the hung cluster flagged")
        assert time.monotonic() - frozen < BOUND
        fleet.thaw(closed)
        wait_for(lambda: fx.healthy(closed) == 1.0, 5, "recovery noticed")
        assert len(said()) == 1  # said once
        assert not logged(
            caplog, logging.WARNING, starting=f"cluster={closed} health: ", containing="403"
        )
    finally:
        for server in fleet:
            server.thaw()
        fx.mgr.stop(10)
