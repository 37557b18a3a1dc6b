"""Fairness: a cluster with thousands of queued events does not delay another cluster's requests."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    running,
)

pytestmark = pytest.mark.timeout(90)

NOISY = 3000


def _bulk_create(server: Any, n: int, workers: int = 4) -> None:
    def create(part: range) -> None:
        c = Cluster.from_kubeconfig(server.kubeconfig(), name="test-writer")
        try:
            for i in part:
                c.client.create(configmap(f"noise-{i:05d}"))
        finally:
            c.stop()

    threads = [
        threading.Thread(target=create, args=(range(w, n, workers),)) for w in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_a_noisy_cluster_does_not_delay_a_quiet_clusters_request(make_envtest_server: Any) -> None:
    noisy, quiet = make_envtest_server("noisy"), make_envtest_server("quiet")
    _bulk_create(noisy, NOISY)
    provider = clusters.Provider()
    provider.add("noisy", cluster_of(noisy, "noisy"))
    mgr = mcruntime.Manager(provider=provider)
    done_noisy = [0]
    noisy_done_when_quiet_ran: list[int] = []
    lock = threading.Lock()

    def reconcile(req: Request) -> None:
        with lock:
            if req.cluster_name == "noisy":
                done_noisy[0] += 1
            else:
                noisy_done_when_quiet_ran.append(done_noisy[0])
        time.sleep(0.0005)  # a little work per request, so the noisy backlog lasts

    rec = Recorder(reconcile)
    configmap_controller(mgr, rec, max_concurrent_reconciles=1)
    with running(mgr):
        # the noisy cluster's whole initial list is queued before the quiet one joins
        wait_for(lambda: rec.count("noisy") >= 50, timeout=30)
        with lock:
            backlog_at_join = NOISY - done_noisy[0]
        quiet_cluster = cluster_of(quiet, "quiet")
        quiet_cluster.client.create(configmap("hello"))
        provider.add("quiet", quiet_cluster)
        wait_for(lambda: rec.saw("quiet", "default/hello"), timeout=30)
        with lock:
            waited_behind = noisy_done_when_quiet_ran[0] - (NOISY - backlog_at_join)
        assert backlog_at_join > NOISY // 2, (
            "the test needs a real backlog when the quiet cluster joins"
        )
        # round-robin: the quiet request runs after a handful of noisy ones, not after the backlog
        assert waited_behind < NOISY // 10, (waited_behind, backlog_at_join)
        wait_for(lambda: rec.count("noisy") >= NOISY, timeout=60)


def test_a_cluster_whose_requests_keep_failing_does_not_hold_back_another_clusters_retry(
    make_envtest_server: Any,
) -> None:
    # the default rate limiter is per request (as controller-runtime's with its priority
    # queue): no bucket of retries shared by every cluster, which 200 requests failing in a
    # row in one cluster would fill for tens of seconds ahead of another cluster's first retry
    noisy, quiet = make_envtest_server("noisy"), make_envtest_server("quiet")
    _bulk_create(noisy, 200)
    provider = clusters.Provider()
    provider.add("noisy", cluster_of(noisy, "noisy"))
    provider.add("quiet", cluster_of(quiet, "quiet"))
    mgr = mcruntime.Manager(provider=provider)
    noisy_failures = [0]
    quiet_runs: list[float] = []
    lock = threading.Lock()

    def reconcile(req: Request) -> None:
        with lock:
            if req.cluster_name == "noisy":
                noisy_failures[0] += 1
                raise RuntimeError("this cluster's requests keep failing")
            quiet_runs.append(time.monotonic())
            if len(quiet_runs) == 1:
                raise RuntimeError("fails once")

    rec = Recorder(reconcile)
    configmap_controller(mgr, rec, max_concurrent_reconciles=4)
    with running(mgr):
        wait_for(lambda: noisy_failures[0] >= 300, timeout=30, what="300 failures in noisy")
        mgr.get_cluster("quiet").client.create(configmap("q"))
        wait_for(lambda: len(quiet_runs) >= 2, timeout=5, what="the quiet request's retry")
        retried_after = quiet_runs[1] - quiet_runs[0]
    assert retried_after < 2.0, f"retried {retried_after:.1f}s after its failure"
