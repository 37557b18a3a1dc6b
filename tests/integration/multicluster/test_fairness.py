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
