"""Engage/disengage churn leaves thread count and memory flat."""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    thread_count,
)

WARMUP = 10
#: allowed growth of traced memory over the measured cycles (bytes); a leak of a
#: cluster's cache, client or thread per cycle is far larger than this
MEMORY_TOLERANCE = 512 * 1024


def _cycle(
    mgr: mcruntime.Manager, provider: clusters.Provider, server: Any, rec: Recorder, name: str
) -> None:
    provider.add(name, cluster_of(server, name))
    wait_for(
        lambda: rec.saw(name, "default/churn"),
        timeout=10,
        interval=0.005,
        what=f"{name} reconciled",
    )
    provider.remove(name)
    wait_for(
        lambda: name not in mgr.cluster_states(),
        timeout=10,
        interval=0.005,
        what=f"{name} disengaged",
    )


_NOT_THE_RUNTIME = (
    tracemalloc.Filter(False, "*/mcruntime/envtest/*", all_frames=True),
    tracemalloc.Filter(False, tracemalloc.__file__),
)


def _runtime_memory() -> int:
    """Bytes traced now, leaving out what the in-process API server allocated."""
    snapshot = tracemalloc.take_snapshot().filter_traces(_NOT_THE_RUNTIME)
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _churn(server: Any, cycles: int) -> None:
    create_cms(server, ["churn"])
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec, max_concurrent_reconciles=2)
    mgr.start()
    try:
        for i in range(WARMUP):
            _cycle(mgr, provider, server, rec, f"warm-{i}")
        rec.clear()
        gc.collect()
        threads_before = thread_count()
        # the runtime's memory only: the embedded API server runs in this process too, and
        # what it allocates for the simulated cluster (TLS, watch history) is not ours to keep flat
        tracemalloc.start(25)
        try:
            gc.collect()
            mem_before = _runtime_memory()
            began = time.monotonic()
            for i in range(cycles):
                _cycle(mgr, provider, server, rec, f"churn-{i}")
                rec.clear()
            elapsed = time.monotonic() - began
            wait_for(
                lambda: thread_count() <= threads_before,
                timeout=10,
                what="threads back to the baseline",
            )
            gc.collect()
            mem_after = _runtime_memory()
        finally:
            tracemalloc.stop()
        growth = mem_after - mem_before
        assert growth < MEMORY_TOLERANCE, (
            f"memory grew by {growth} bytes over {cycles} cycles ({elapsed:.1f}s)"
        )
        assert mgr.engaged_clusters() == []
        assert all(c.engaged_clusters() == [] for c in mgr.controllers)
    finally:
        mgr.stop(10)


@pytest.mark.timeout(120)
def test_200_engage_disengage_cycles_leave_threads_and_memory_flat(envtest_server: Any) -> None:
    _churn(envtest_server, 200)
