"""``async def`` reconcilers with the AsyncClient: writes of several workers really overlap.

Twelve writes at 0.5 s API latency take about 0.5 s with twelve workers, not
six; deadlines and a leaving cluster behave as for the sync client.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime.client import AsyncClient, CallThreads, deadline
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import OperationResult, create_or_update
from mcruntime.envtest import APIServer, WaitTimeout, wait_for
from mcruntime.errors import DeadlineExceeded
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import running

pytestmark = pytest.mark.timeout(60)

N = 12
LATENCY = 0.5


def _cm(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


def _run_writes(server: APIServer, workers: int) -> float:
    """Reconcile N ConfigMaps, each writing one annotation; seconds from the first write to the last."""
    writer = Cluster.from_kubeconfig(server.kubeconfig())
    for i in range(N):
        writer.client.create(_cm(f"w{workers}-{i}"))
    writer.stop()
    mgr = mcruntime.Manager(server.kubeconfig())
    done: list[float] = []
    began: list[float] = []
    lock = threading.Lock()
    all_done = threading.Event()

    async def reconcile(req: Request) -> None:
        if not req.name.startswith(f"w{workers}-"):
            return
        cluster = mgr.get_cluster(req.cluster_name)
        with lock:
            began.append(time.monotonic())
        await cluster.aclient.patch(
            "v1/ConfigMap", req.name, {"metadata": {"annotations": {"done": "1"}}}, req.namespace
        )
        with lock:
            done.append(time.monotonic())
            if len(done) >= N:
                all_done.set()

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").with_options(
        max_concurrent_reconciles=workers
    ).complete(reconcile)
    server.latency = 0.0
    mgr.start()
    try:
        server.latency = LATENCY
        assert all_done.wait(40)
    finally:
        server.latency = 0.0
        mgr.stop(10)
    return max(done) - min(began)


def test_async_writes_of_many_workers_run_concurrently(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("async-writes")
    took = _run_writes(server, workers=N)
    # one round trip of latency (plus scheduling), far from N * LATENCY = 6 s
    assert took < 3 * LATENCY, took


def test_async_calls_keep_the_deadline_of_their_context(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("async-deadline")
    c = Cluster.from_kubeconfig(server.kubeconfig())
    c.client.create(_cm("x"))
    c.stop()
    mgr = mcruntime.Manager(server.kubeconfig())
    errors: list[BaseException] = []
    took: list[float] = []

    async def reconcile(req: Request) -> None:
        server.freeze()
        began = time.monotonic()
        try:
            with deadline(0.4):  # the worker thread of the call gets this context
                await mgr.get_cluster("").aclient.create(_cm("y"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            took.append(time.monotonic() - began)
            server.thaw()
        await asyncio.sleep(0)

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    mgr.start()
    try:
        with contextlib.suppress(WaitTimeout):  # the assertion below shows what was seen
            wait_for(lambda: errors, timeout=10, what="the reconcile's error")
    finally:
        mgr.stop(10)
    assert errors and isinstance(errors[0], DeadlineExceeded), errors
    assert took[0] < 1.5


def test_a_cancelled_call_frees_its_thread_at_once(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # one thread: the next call runs only once the cancelled one's thread is free. Its
    # connection is cut, not left waiting on the hung server until its 30 s deadline
    server = make_envtest_server("async-cut")
    c = Cluster.from_kubeconfig(server.kubeconfig())
    c.uncached_client.create(_cm("x"))
    threads = CallThreads("async-cut", size=1)
    ac = AsyncClient(c.uncached_client, threads=threads)
    patch = {"metadata": {"annotations": {"a": "1"}}}

    async def run() -> tuple[BaseException | None, float]:
        server.freeze()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                await ac.patch("v1/ConfigMap", "x", patch, "default")  # its deadline: 30 s
        began = time.monotonic()
        try:
            async with asyncio.timeout(10):
                await ac.patch("v1/ConfigMap", "x", patch, "default", timeout=0.5)
        except BaseException as exc:  # (the frozen server does not answer this one either)
            return exc, time.monotonic() - began
        return None, time.monotonic() - began

    try:
        error, took = asyncio.run(run())
    finally:
        server.thaw()
        threads.close()
        c.stop()
    assert isinstance(error, DeadlineExceeded) and error.sent, error
    assert took < 2.0, f"the next call waited {took:.1f}s for the thread"


def test_run_sync_runs_a_blocking_helper_on_the_clusters_threads_and_a_cancel_cuts_it(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # create_or_update takes the sync client: awaited through asyncio.to_thread, its calls
    # ran on the controller loop's few threads, shared by every cluster, and a cancel left
    # them running until their deadline (30 s on a frozen cluster)
    server = make_envtest_server("run-sync")
    c = Cluster.from_kubeconfig(server.kubeconfig())
    threads = CallThreads("run-sync", size=1)
    ac = AsyncClient(c.uncached_client, threads=threads)
    ran_on: list[str] = []

    def mutate(obj: dict[str, Any]) -> None:
        ran_on.append(threading.current_thread().name)
        obj.setdefault("data", {})["n"] = str(len(ran_on))

    async def run() -> tuple[OperationResult, BaseException | None, float]:
        made = await ac.run_sync(create_or_update, c.uncached_client, _cm("y"), mutate)
        server.freeze()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                await ac.run_sync(create_or_update, c.uncached_client, _cm("y"), mutate)
        began = time.monotonic()
        try:  # (one thread: it runs once the cancelled helper's thread is free)
            async with asyncio.timeout(10):
                await ac.patch("v1/ConfigMap", "y", {"data": {"n": "x"}}, "default", timeout=0.5)
        except BaseException as exc:  # (the frozen server does not answer this one either)
            return made, exc, time.monotonic() - began
        return made, None, time.monotonic() - began

    try:
        made, error, took = asyncio.run(run())
    finally:
        server.thaw()
        threads.close()
        c.stop()
    assert made == OperationResult.CREATED
    assert ran_on == ["mcruntime/client/run-sync/async_0"], ran_on  # (the frozen read: no mutate)
    assert isinstance(error, DeadlineExceeded) and error.sent, error
    assert took < 2.0, f"the next call waited {took:.1f}s for the thread"


def test_calls_stuck_on_one_cluster_keep_no_other_clusters_call_waiting(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # a reconcile fans out to a hung cluster (calls in flight, not cancelled): the calls of
    # another cluster's reconcile run on threads of their own cluster, at once
    servers = {n: make_envtest_server(f"async-{n}") for n in ("hung", "ok")}
    provider = clusters.Provider()
    for name, server in servers.items():
        c = Cluster.from_kubeconfig(server.kubeconfig(), name=name)
        c.uncached_client.create(_cm(name))
        provider.add(name, c)
    mgr = mcruntime.Manager(provider=provider)
    fanned_out = threading.Event()
    took: list[float] = []

    async def reconcile(req: Request) -> None:
        if req.name != req.cluster_name:
            return
        cluster = mgr.get_cluster(req.cluster_name)
        patch = {"metadata": {"annotations": {"seen": "1"}}}
        if req.cluster_name == "hung":
            servers["hung"].freeze()
            calls = [
                asyncio.ensure_future(
                    cluster.aclient.patch("v1/ConfigMap", "hung", patch, "default", timeout=4)
                )
                for _ in range(6)
            ]
            await asyncio.sleep(0.3)  # (its calls are on their threads)
            fanned_out.set()
            await asyncio.gather(*calls, return_exceptions=True)
            return
        while not fanned_out.is_set():
            await asyncio.sleep(0.02)
        began = time.monotonic()
        await cluster.aclient.patch("v1/ConfigMap", "ok", patch, "default")
        took.append(time.monotonic() - began)

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").with_options(
        max_concurrent_reconciles=2
    ).complete(reconcile)
    with running(mgr):  # (and no thread of it is left after)
        try:
            wait_for(lambda: took, timeout=20, what="the healthy cluster's write")
        finally:
            servers["hung"].thaw()
    assert took[0] < 1.0, f"the healthy cluster's write waited {took[0]:.1f}s for a thread"
