"""The priority queue: what a cluster's initial list (and a resync) enqueues waits behind the
changes made since, as with controller-runtime's default ``UsePriorityQueue``.

A controller that starts, or a cluster that joins, queues a request for every object it
lists; a change made meanwhile must not wait for all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import mcruntime
from mcruntime import Manager, Request, Result
from mcruntime.cache import CacheOptions
from mcruntime.cluster import Cluster
from mcruntime.controller import Controller, ControllerOptions
from mcruntime.envtest import wait_for
from mcruntime.predicate import label_selector
from mcruntime.workqueue import LOW_PRIORITY
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(60)

LISTED = 60
#: the test's own ConfigMaps (the server may hold others, such as kube-root-ca.crt)
OURS = {"test": "priority"}


def _order_after_a_change(
    kube: Cluster, make_manager: Callable[..., Manager], **options: bool
) -> list[str]:
    """Names in the order they were reconciled, by one worker: ``LISTED`` ConfigMaps were
    there before the start; ``changed`` was created while the first of them reconciled."""
    for i in range(LISTED):
        kube.client.create(configmap(f"listed-{i:03}", labels=OURS))
    mgr = make_manager()
    calls = Calls()
    first_started = threading.Event()
    release = threading.Event()

    def reconcile(req: Request) -> None:
        if not first_started.is_set():
            first_started.set()
            assert release.wait(20), "the test did not release the first reconcile"
        calls.record(req)

    ctrl: Controller = (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap", label_selector(OURS))
        .with_options(ControllerOptions(max_concurrent_reconciles=1, **options))
        .complete(reconcile)
    )
    mgr.start()
    assert first_started.wait(20), "no reconcile started"
    kube.client.create(configmap("changed", labels=OURS))
    # the change's request is queued behind the LISTED - 1 still waiting
    wait_for(lambda: len(ctrl.queue) == LISTED, timeout=10)
    release.set()
    calls.wait_count(LISTED + 1)
    return [r.name for r in calls.requests()]


def test_a_change_is_reconciled_before_the_rest_of_the_initial_list(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    order = _order_after_a_change(kube, make_manager)
    assert order[1] == "changed", order[:5]
    assert sorted(order[2:]) == order[2:], "the initial list kept its order"


def test_without_the_priority_queue_a_change_waits_for_the_whole_list(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    order = _order_after_a_change(kube, make_manager, use_priority_queue=False)
    assert order[-1] == "changed", order[-5:]


def test_a_retry_keeps_its_priority_unless_the_result_names_one(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(configmap("listed"))
    mgr = make_manager()
    seen: list[tuple[str, int]] = []
    calls = Calls()
    ctrl: Controller | None = None

    def reconcile(req: Request) -> Result | None:
        assert ctrl is not None
        seen.append((req.name, ctrl.queue.held_priority(req)))
        calls.record(req)
        n = calls.count(req.name)
        if req.name == "listed" and n == 1:
            raise RuntimeError("a transient failure")  # retried at the priority it had
        if req.name == "listed" and n == 2:
            return Result(requeue=True, priority=5)
        return None

    ctrl = mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    mgr.start()
    calls.wait_count(3, "listed")
    kube.client.create(configmap("made"))
    calls.wait_count(1, "made")
    assert seen == [
        ("listed", LOW_PRIORITY),
        ("listed", LOW_PRIORITY),
        ("listed", 5),
        ("made", 0),
    ]


def test_a_resync_is_queued_at_low_priority_and_an_update_is_not(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(configmap("cm"))
    mgr = make_manager(cache=CacheOptions(resync=0.2))
    seen: list[int] = []
    calls = Calls()
    ctrl: Controller | None = None

    def reconcile(req: Request) -> None:
        assert ctrl is not None
        seen.append(ctrl.queue.held_priority(req))
        calls.record(req)

    ctrl = mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    mgr.start()
    calls.wait_count(2)  # the initial list, then a resync
    assert seen[:2] == [LOW_PRIORITY, LOW_PRIORITY]
    n = calls.count()
    kube.client.patch("v1/ConfigMap", "cm", {"data": {"k": "v"}}, "default")
    calls.wait(
        lambda c: 0 in seen[n:],
        what="the update reconciled at priority 0",
    )
