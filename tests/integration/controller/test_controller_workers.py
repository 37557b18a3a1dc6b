"""Workers: N run in parallel, but one request never runs on two of them at once; async reconcilers."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request, Result
from mcruntime.cluster import Cluster
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)

#: simulated work per reconcile, so that overlapping runs would be caught
WORK = 0.003


class Overlap:
    """Tracks requests in flight: any request entering twice is an overlap."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[Request] = set()
        self.overlaps: list[Request] = []
        self.max_parallel = 0

    def enter(self, req: Request) -> None:
        with self.lock:
            if req in self.running:
                self.overlaps.append(req)
            self.running.add(req)
            self.max_parallel = max(self.max_parallel, len(self.running))

    def leave(self, req: Request) -> None:
        with self.lock:
            self.running.discard(req)


def test_one_request_never_runs_on_two_workers_at_once(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    overlap, calls = Overlap(), Calls()
    last_seen: dict[str, str] = {}

    def reconcile(req: Request) -> None:
        overlap.enter(req)
        try:
            cm = mgr.get_cluster("").client.get("v1/ConfigMap", req.name, req.namespace)
            time.sleep(WORK)
            last_seen[req.name] = cm["data"]["n"]
        finally:
            overlap.leave(req)
            calls.record(req)

    (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap")
        .with_options(max_concurrent_reconciles=4)
        .complete(reconcile)
    )
    mgr.start()
    names = ["hot", *(f"cold-{i}" for i in range(6))]
    for name in names:
        kube.client.create(configmap(name, data={"n": "0"}))
    updates = 60
    for n in range(1, updates + 1):
        kube.client.patch("v1/ConfigMap", "hot", {"data": {"n": str(n)}}, "default")
        if n % 10 == 0:
            for name in names[1:]:
                kube.client.patch("v1/ConfigMap", name, {"data": {"n": str(n)}}, "default")

    calls.wait(
        lambda c: all(last_seen.get(n) == str(updates) for n in names),
        15,
        f"every object's last update reconciled (seen {last_seen})",
    )
    assert overlap.overlaps == []
    assert overlap.max_parallel > 1, "several workers ran different requests in parallel"
    assert calls.count("hot") <= updates + 1, "updates made while queued were merged"


def test_async_reconciler_runs_and_can_requeue(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    loops: set[int] = set()

    async def reconcile(req: Request) -> Result | None:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        cm = mgr.get_cluster("").client.get("v1/ConfigMap", req.name, req.namespace)
        calls.record(req)
        if cm["data"].get("again") == "yes" and calls.count(req.name) == 1:
            return Result(requeue_after=0.05)
        return None

    (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap")
        .with_options(max_concurrent_reconciles=2)
        .complete(reconcile)
    )
    mgr.start()
    kube.client.create(configmap("once", data={}))
    kube.client.create(configmap("twice", data={"again": "yes"}))
    calls.wait_count(1, "once")
    calls.wait_count(2, "twice")
    assert len(loops) == 1, "every coroutine runs on the controller's one event loop"


def test_async_reconciler_errors_are_retried(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()

    async def reconcile(req: Request) -> None:
        calls.record(req)
        if calls.count(req.name) < 3:
            raise RuntimeError("not yet")

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    mgr.start()
    kube.client.create(configmap("flaky"))
    calls.wait_count(3, "flaky")


def test_async_callable_object_is_awaited(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()

    class Reconciler:
        async def __call__(self, req: Request) -> Any:
            await asyncio.sleep(0)
            calls.record(req)

    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(Reconciler())
    mgr.start()
    kube.client.create(configmap("obj"))
    calls.wait_count(1, "obj")


def test_a_negative_worker_count_is_refused(make_manager: Callable[..., Manager]) -> None:
    builder = mcruntime.controller_managed_by(make_manager()).for_("v1/ConfigMap")
    with pytest.raises(ValueError, match="max_concurrent_reconciles"):
        builder.with_options(max_concurrent_reconciles=-1).complete(lambda req: None)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"reconcile_timeout": float("nan")},
            ValueError,
            "controller 'configmap': reconcile_timeout must be positive (a finite number of "
            "seconds), got nan",
        ),
        ({"reconcile_timeout": float("inf")}, ValueError, "reconcile_timeout must be positive"),
        ({"reconcile_timeout": -1}, ValueError, "reconcile_timeout must be positive"),
        ({"reconcile_timeout": "30"}, TypeError, "reconcile_timeout must be a number of seconds"),
        ({"cache_sync_timeout": float("nan")}, ValueError, "cache_sync_timeout must be positive"),
        (
            {"max_concurrent_reconciles": 2.5},
            TypeError,
            "controller 'configmap': max_concurrent_reconciles must be an int, got 2.5 (float)",
        ),
        (
            {"max_concurrent_reconciles_per_cluster": 1.0},
            TypeError,
            "max_concurrent_reconciles_per_cluster must be an int, got 1.0",
        ),
        (
            {"max_concurrent_reconciles_per_cluster": 0},
            ValueError,
            "max_concurrent_reconciles_per_cluster must be at least 1, got 0",
        ),
    ],
)
def test_a_numeric_option_no_reconcile_could_run_with_is_refused_naming_it(
    make_manager: Callable[..., Manager],
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    """Read from the environment (``float(os.getenv("RECONCILE_TIMEOUT", "nan"))``), a
    NaN timeout once made every reconcile of every cluster fail for ever, and a float
    worker count failed with ``range()``'s bare TypeError naming no option: refused when
    the controller is built, as a negative value already was."""
    builder = mcruntime.controller_managed_by(make_manager()).for_("v1/ConfigMap")
    with pytest.raises(error, match=re.escape(message)):
        builder.with_options(**options).complete(lambda req: None)
