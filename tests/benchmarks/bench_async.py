"""Writes/s of ``async def`` reconcilers with the AsyncClient, beside the same reconcilers
calling the sync client (which blocks the event loop: one write at a time).

N objects, each reconciled once by a controller with N workers; every reconcile
writes one annotation to an envtest server with added latency. Both sides run
in the same process against the same server.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from mcruntime.cluster import Cluster
from mcruntime.controller import Controller, ControllerOptions
from mcruntime.envtest import APIServer
from mcruntime.reconcile import Request
from tests.benchmarks._common import Row

N = 12
QUICK_LATENCY = 0.05
FULL_LATENCY = 0.5


def _measure(cluster: Cluster, names: list[str], use_async_client: bool) -> float:
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    async def reconcile(req: Request) -> None:
        patch = {"metadata": {"annotations": {"at": str(time.monotonic())}}}
        if use_async_client:
            await cluster.aclient.patch("v1/ConfigMap", req.name, patch, req.namespace)
        else:
            cluster.client.patch("v1/ConfigMap", req.name, patch, req.namespace)
        with lock:
            count[0] += 1
            if count[0] == len(names):
                done.set()

    ctrl = Controller(
        "bench-async", reconcile, options=ControllerOptions(max_concurrent_reconciles=N)
    )
    ctrl.start()
    try:
        began = time.perf_counter()
        for name in names:
            ctrl.queue.add(Request(namespace="default", name=name))
        if not done.wait(120):
            raise RuntimeError(f"only {count[0]} of {len(names)} reconciled")
        return time.perf_counter() - began
    finally:
        ctrl.stop()


def run(quick: bool = False) -> list[Row]:
    latency = QUICK_LATENCY if quick else FULL_LATENCY
    server = APIServer("bench-async").start()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="bench")
    try:
        names = [f"a{i}" for i in range(N)]
        for name in names:
            obj: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
            }
            cluster.client.create(obj)
        cluster.api_reader.get("v1/ConfigMap", names[0], "default")  # discovery done
        server.latency = latency
        took_async = _measure(cluster, names, use_async_client=True)
        took_sync = _measure(cluster, names, use_async_client=False)
    finally:
        cluster.stop()
        server.close()
    return [
        Row(
            f"async reconciler writes, {N} workers, {latency:g}s latency",
            "write",
            N / took_async,
            "same with the sync client",
            N / took_sync,
        )
    ]
