"""``controller_runtime_reconcile_timeouts_total``: the reconciles that reached their
``reconcile_timeout``, as controller-runtime counts those its ``ReconciliationTimeout`` ended."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import CM, cluster_of, create_cms, running

pytestmark = pytest.mark.timeout(60)


def timeouts(mgr: mcruntime.Manager) -> float | None:
    return mgr.metrics.sample(
        "controller_runtime_reconcile_timeouts_total",
        {"controller": "configmap", "cluster": "local"},
    )


@pytest.mark.parametrize("kind", ["async", "def"])
def test_a_reconcile_that_reaches_its_timeout_is_counted(
    make_envtest_server: Any, kind: str
) -> None:
    server = make_envtest_server(f"timeouts-{kind}")
    create_cms(server, ["slow", "fast"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    runs: list[str] = []

    async def reconcile_async(req: Request) -> None:
        runs.append(req.name)
        if req.name == "slow" and runs.count("slow") == 1:
            await asyncio.sleep(10)  # cancelled at its reconcile_timeout

    def reconcile_def(req: Request) -> None:
        runs.append(req.name)
        if req.name == "slow" and runs.count("slow") == 1:
            time.sleep(0.6)  # runs past it (a def reconcile is not interrupted)

    reconcile = reconcile_async if kind == "async" else reconcile_def
    mcruntime.controller_managed_by(mgr).named("configmap").for_(CM).with_options(
        reconcile_timeout=0.3
    ).complete(reconcile)
    with running(mgr):
        wait_for(lambda: "fast" in runs and timeouts(mgr) == 1, what="the slow one counted")
        if kind == "async":  # cancelled, it failed with DeadlineExceeded: retried, in time
            wait_for(lambda: runs.count("slow") >= 2, what="the slow one retried")
        assert timeouts(mgr) == 1  # the fast one (and the retry) ended in time
