"""`on_cluster_disengaged` callbacks run once the cluster's reconciles in flight have ended.

kopf's ``@kopf.daemon`` ported as the kopf page says: a thread per object that the
reconciler starts, the cluster's stopped in ``mgr.on_cluster_disengaged``. A reconcile
still running when its cluster leaves must not start one after that callback ran.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import CM, configmap

pytestmark = pytest.mark.timeout(60)


class _Daemons:
    """A thread per object, stopped per cluster: the kopf page's ``@kopf.daemon``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[tuple[str, str], tuple[threading.Thread, threading.Event]] = {}
        self.order: list[str] = []

    def start(self, req: Request) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, name=f"daemon/{req}", daemon=True)
        with self.lock:
            self.order.append(f"daemon of {req.name} started")
            self.running[req.cluster_name, req.name] = (thread, stop)
        thread.start()

    def stop_cluster(self, cluster_name: str) -> None:
        with self.lock:
            self.order.append(f"{cluster_name} forgotten")
            gone = [k for k in self.running if k[0] == cluster_name]
            threads = [self.running.pop(k) for k in gone]
        for thread, stop in threads:
            stop.set()
            thread.join()

    def stop_all(self) -> None:
        with self.lock:
            threads = list(self.running.values())
        for _, stop in threads:
            stop.set()


def _manager(
    server: APIServer, daemons: _Daemons, reconcile: Callable[[Request], None], **options: float
) -> tuple[mcruntime.Manager, Provider]:
    provider = Provider()
    provider.add("eu-1", Cluster.from_kubeconfig(server.kubeconfig(), name="eu-1"))
    mgr = mcruntime.Manager(provider=provider, options=mcruntime.ManagerOptions(**options))
    mgr.on_cluster_disengaged(daemons.stop_cluster)
    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    return mgr, provider


def test_a_reconcile_running_as_its_cluster_leaves_ends_before_the_disengaged_callbacks(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("eu-1")
    daemons = _Daemons()
    inside = threading.Event()

    def reconcile(req: Request) -> None:
        if req.name != "slow":
            return
        cluster = mgr.get_cluster(req.cluster_name)
        inside.set()
        # work that is not a call to the cluster (the leave cuts those) goes on as it leaves
        wait_for(lambda: cluster.stopped, timeout=20, what="the cluster's leave")
        daemons.start(req)

    mgr, provider = _manager(server, daemons, reconcile)
    try:
        with mgr:
            wait_for(lambda: mgr.engaged_clusters() == ["eu-1"], what="engaged")
            mgr.get_cluster("eu-1").client.create(configmap("slow"))
            assert inside.wait(20)
            provider.remove("eu-1")
            # the daemon the reconcile started was stopped with its cluster: none is left
            assert daemons.order == ["daemon of slow started", "eu-1 forgotten"]
            assert daemons.running == {}
    finally:
        daemons.stop_all()


def test_a_reconcile_still_running_past_the_leave_s_wait_is_named_and_the_callbacks_run(
    make_envtest_server: Callable[..., APIServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_envtest_server("eu-1")
    daemons = _Daemons()
    inside, release = threading.Event(), threading.Event()

    def reconcile(req: Request) -> None:
        if req.name == "hung":
            inside.set()
            release.wait(20)  # (not a call to the cluster: nothing cuts it)

    mgr, provider = _manager(server, daemons, reconcile, graceful_shutdown_timeout=0.5)
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    try:
        with mgr:
            wait_for(lambda: mgr.engaged_clusters() == ["eu-1"], what="engaged")
            mgr.get_cluster("eu-1").client.create(configmap("hung"))
            assert inside.wait(20)
            provider.remove("eu-1")  # within about half a second
            assert daemons.order == ["eu-1 forgotten"]
            release.set()
    finally:
        release.set()
    said = [r.getMessage() for r in caplog.records if "still running after" in r.getMessage()]
    assert said == [
        "controller=configmap cluster=eu-1: 1 reconcile of the cluster that left still running "
        "after 0.5s (default/hung); its on_cluster_disengaged callbacks run now, and what it "
        "does after them is not undone"
    ]
