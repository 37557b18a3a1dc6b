"""When a cluster's lifetime ends: queued requests are dropped, in-flight reconciles finish and are
not re-queued, and nothing of the cluster remains (threads, metrics series)."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import Request, Result
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)

BACKLOG = [f"queued-{i:03d}" for i in range(50)]


def _series_for(mgr: mcruntime.Manager, cluster: str) -> list[str]:
    text = mgr.metrics.exposition().decode()
    return [line for line in text.splitlines() if f'cluster="{cluster}"' in line]


@pytest.mark.parametrize("outcome", ["error", "requeue", "requeue_after", "success"])
def test_in_flight_reconciles_finish_and_are_not_requeued_after_the_cluster_is_removed(
    make_envtest_fleet: Any, outcome: str
) -> None:
    fleet = make_envtest_fleet(2)
    create_cms(fleet["cluster-1"], BACKLOG)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def reconcile(req: Request) -> Result | None:
        if req.cluster_name != "cluster-1":
            return None
        if not entered.is_set():
            entered.set()
            release.wait(10)
            finished.set()
            if outcome == "error":
                raise RuntimeError("boom")
            if outcome == "requeue":
                return Result(requeue=True)
            if outcome == "requeue_after":
                return Result(requeue_after=0.05)
        return None

    rec = Recorder(reconcile)
    ctrl = configmap_controller(mgr, rec, max_concurrent_reconciles=1)
    with running(mgr):
        assert entered.wait(10), "a reconcile of cluster-1 is in flight"
        first = rec.requests[-1]
        wait_for(lambda: len(ctrl.queue) > 0, what="a backlog queued behind it")
        # (the removal waits for the reconcile in flight before its on_cluster_disengaged
        # callbacks: on a thread of its own while the test looks at the controller)
        removal = threading.Thread(target=provider.remove, args=("cluster-1",))
        removal.start()
        wait_for(
            lambda: "cluster-1" not in ctrl.engaged_clusters(), what="disengaged while in flight"
        )
        assert len(ctrl.queue) == 0, "the gone cluster's queued requests are dropped"
        release.set()
        assert finished.wait(10), "the in-flight reconcile finishes"
        removal.join(10)
        assert not removal.is_alive(), "the removal ends with the reconcile it waited for"
        # a marker on the other cluster has run after any re-queued request would have
        create_cms(fleet["cluster-0"], ["marker"])
        wait_for(lambda: rec.saw("cluster-0", "default/marker"))
        wait_for(lambda: len(ctrl.queue) == 0 and not ctrl.queue.in_flight_ages(), timeout=5)
        assert rec.count("cluster-1") == 1, [
            str(r) for r in rec.requests if r.cluster_name == "cluster-1"
        ]
        assert rec.requests.count(first) == 1
        assert threads_for("cluster-1") == []
        assert _series_for(mgr, "cluster-1") == [], "no metrics series of the gone cluster remain"
        assert _series_for(mgr, "cluster-0"), "the remaining cluster keeps its series"


@pytest.mark.parametrize("added", ["before-start", "while-running"])
def test_a_cluster_that_left_is_freed_once_its_threads_are_gone(
    make_envtest_server: Any, added: str
) -> None:
    """Nothing keeps a disengaged Cluster alive (only a full collection is needed, for its
    reference cycles): not the worker that reconciled it last and now waits for work, not
    the provider that engaged it at start and now runs its discovery loop."""
    server = make_envtest_server("leaving")
    create_cms(server, ["cm"])
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec, max_concurrent_reconciles=1)
    cluster = cluster_of(server, "leaving")
    ref = weakref.ref(cluster)
    if added == "before-start":
        provider.add("leaving", cluster)
    with running(mgr):
        if added == "while-running":
            provider.add("leaving", cluster)
        del cluster
        wait_for(lambda: rec.saw("leaving", "default/cm"), what="reconciled")
        provider.remove("leaving")
        wait_for(lambda: not threads_for("leaving"), timeout=10, what="its threads gone")
        wait_for(lambda: gc.collect() >= 0 and ref() is None, timeout=5, what="the Cluster freed")


def test_a_failure_said_while_its_cluster_leaves_leaves_no_streak_for_its_return(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the cluster leaves between a failed reconcile's requeue and its log line: the streak
    # it would start is the gone engagement's, so the cluster's return begins a new one, whose
    # first failure shows its traceback (and the controller keeps nothing of the gone cluster)
    caplog.set_level(logging.ERROR, logger="mcruntime.controller")
    (srv,) = make_envtest_fleet(1)
    create_cms(srv, ["flaky"])
    provider = clusters.Provider()
    provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    left = threading.Event()
    ctrl: Any = None

    class Boom(Exception):
        def __str__(self) -> str:
            if not left.is_set():  # said first once requeued: the cluster leaves right then
                left.set()
                ctrl.disengage(srv.name)
            return "db down"

    def reconcile(req: Request) -> None:
        if req.key == "default/flaky":
            raise Boom()

    ctrl = configmap_controller(mgr, reconcile)
    with running(mgr):
        wait_for(left.is_set, what="the first failure")
        wait_for(lambda: srv.name not in ctrl.engaged_clusters(), what="disengaged")
        provider.remove(srv.name)
        provider.add(srv.name, cluster_of(srv, srv.name))
        wait_for(lambda: len(_failures(caplog)) >= 2, what="a failure after its return")
    first, again = _failures(caplog)[:2]
    assert first[1] and again[1], "each engagement's first failure shows its traceback"
    assert again[0].startswith(f"controller=configmaps cluster={srv.name} request=default/flaky")
    assert "reconcile failed (retry" in again[0], again[0]


def _failures(caplog: pytest.LogCaptureFixture) -> list[tuple[str, bool]]:
    return [
        (r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if r.levelno == logging.ERROR and "request=default/flaky" in r.getMessage()
    ]
