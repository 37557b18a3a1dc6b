"""A hung cluster (accepts connections, never answers) never stalls the others and leaves nothing behind.

The reconciler writes to its own cluster, as most do: once a cluster freezes,
its reconciles block in that write until their deadline. With two workers and
three clusters, the healthy clusters are still served at once, and removing
the hung cluster frees its workers within a second.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterLeft, DeadlineExceeded
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(90)


def test_a_hung_cluster_holds_at_most_its_share_of_workers_and_leaving_frees_them(
    make_envtest_server: Any,
) -> None:
    servers = {n: make_envtest_server(n) for n in ("a", "b", "hung")}
    create_cms(servers["hung"], [f"h{i}" for i in range(4)])
    provider = clusters.Provider()
    for name, server in servers.items():
        provider.add(name, cluster_of(server, name))
    mgr = mcruntime.Manager(provider=provider)
    gate = threading.Event()
    outcomes: list[tuple[str, str, BaseException | None, float]] = []
    lock = threading.Lock()

    def reconcile(req: Request) -> None:
        if req.cluster_name == "hung":
            gate.wait(30)
        error: BaseException | None = None
        try:
            mgr.get_cluster(req.cluster_name).client.patch(
                CM, req.name, {"metadata": {"annotations": {"seen": "yes"}}}, req.namespace
            )
        except BaseException as exc:
            error = exc
        with lock:
            outcomes.append((req.cluster_name, req.name, error, time.monotonic()))
        if error is not None:
            raise error

    rec = Recorder(reconcile)
    ctrl = configmap_controller(mgr, rec, max_concurrent_reconciles=2)
    with running(mgr):
        wait_for(lambda: rec.count("hung") >= 1, what="a reconcile of the hung cluster")
        assert ctrl.max_concurrent_reconciles_per_cluster == 1
        servers["hung"].freeze()
        gate.set()  # the hung cluster's reconciles now block on its frozen API server
        wait_for(lambda: ctrl.queue.in_flight >= 1, what="a worker stuck on the hung cluster")
        # the other clusters are served at once although every write to "hung" hangs
        began = time.monotonic()
        create_cms(servers["a"], ["a1", "a2"])
        create_cms(servers["b"], ["b1"])
        wait_for(
            lambda: all(
                rec.saw(c, f"default/{n}") for c, n in [("a", "a1"), ("a", "a2"), ("b", "b1")]
            ),
            timeout=10,
            what="the healthy clusters' requests",
        )
        assert time.monotonic() - began < 5
        healthy_done = [o for o in outcomes if o[0] != "hung"]
        assert healthy_done and all(err is None for _, _, err, _ in healthy_done)
        # one hung reconcile in flight: its share (the others' own writes re-trigger theirs)
        assert len(ctrl.queue.in_flight_ages().get("hung", [])) == 1
        # the hung cluster leaves: its stuck reconcile ends at once, with ClusterLeft
        removed_at = time.monotonic()
        provider.remove("hung")
        wait_for(
            lambda: any(c == "hung" and isinstance(e, ClusterLeft) for c, _, e, _ in outcomes),
            timeout=5,
            what="the stuck reconcile to end",
        )
        ended = min(t for c, _, e, t in outcomes if c == "hung" and isinstance(e, ClusterLeft))
        assert ended - removed_at < 1.0
        wait_for(
            lambda: "hung" not in ctrl.queue.in_flight_ages(), timeout=2, what="the worker free"
        )
        wait_for(lambda: not threads_for("hung"), timeout=5, what="no thread of hung left")
        assert "hung" not in ctrl.engaged_clusters()
        # and the freed worker serves the others again
        create_cms(servers["b"], ["b2"])
        wait_for(lambda: rec.saw("b", "default/b2"), timeout=5, what="b2 reconciled")
    servers["hung"].thaw()


def test_a_reconcile_deadline_makes_client_calls_fail_fast(make_envtest_server: Any) -> None:
    server = make_envtest_server("slow")
    create_cms(server, ["x"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    errors: list[BaseException] = []
    took: list[float] = []

    def reconcile(req: Request) -> None:
        began = time.monotonic()
        server.freeze()
        try:
            mgr.get_cluster("").client.create(configmap("y"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            took.append(time.monotonic() - began)
            server.thaw()

    mcruntime.controller_managed_by(mgr).for_(CM).with_options(reconcile_timeout=0.5).complete(
        Recorder(reconcile)
    )
    with running(mgr):
        wait_for(lambda: errors, what="the reconcile to fail")
    assert isinstance(errors[0], DeadlineExceeded), errors[0]
    assert took[0] < 1.5


def test_a_def_reconcile_past_its_deadline_without_a_client_call_is_said_once_per_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a def reconciler cannot be interrupted, and one that makes no client call after its
    # deadline meets no error: the overrun is logged, once per streak of overruns
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    server = make_envtest_server("slow")
    create_cms(server, ["slow-1", "slow-2", "slow-3"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    done: list[str] = []

    def reconcile(req: Request) -> None:
        threading.Event().wait(0.3)  # a slow computation, not an API call
        done.append(req.name)

    mcruntime.controller_managed_by(mgr).for_(CM).with_options(
        reconcile_timeout=0.1, max_concurrent_reconciles=1
    ).complete(reconcile)
    with running(mgr):
        wait_for(lambda: len(done) == 3, what="the three reconciles")
    said = [r for r in caplog.records if "past its reconcile_timeout" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG, logging.DEBUG], said
    assert "cluster=local request=default/slow-" in said[0].getMessage()
    assert "s, past its reconcile_timeout of 0.1s (overrun 1)" in said[0].getMessage()


def test_an_async_reconcile_past_its_deadline_is_cancelled(make_envtest_server: Any) -> None:
    import asyncio

    server = make_envtest_server("async")
    create_cms(server, ["x"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    cancelled = threading.Event()

    async def reconcile(req: Request) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    mcruntime.controller_managed_by(mgr).for_(CM).with_options(reconcile_timeout=0.3).complete(
        reconcile
    )
    with running(mgr):
        assert cancelled.wait(5)


def test_with_one_worker_a_cluster_that_stops_answering_waits_while_the_others_are_served(
    make_envtest_server: Any,
) -> None:
    # the default single worker: every request of a hung cluster would hold it until its
    # write's deadline, taking turns with the healthy clusters' requests
    servers = {n: make_envtest_server(n) for n in ("ok", "hung")}
    create_cms(servers["hung"], [f"h{i}" for i in range(6)])
    provider = clusters.Provider()
    for name, server in servers.items():
        provider.add(name, cluster_of(server, name))
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(
            cluster_health_interval=0.3,
            cluster_health_timeout=0.3,
            cluster_health_retry_interval=0.2,
        ),
    )
    reconciled: dict[str, float] = {}

    def reconcile(req: Request) -> Any:
        mgr.get_cluster(req.cluster_name).client.patch(
            CM, req.name, {"metadata": {"annotations": {"seen": "yes"}}}, req.namespace, timeout=2
        )
        reconciled[f"{req.cluster_name}/{req.name}"] = time.monotonic()
        # the hung cluster's objects are looked at again and again (a periodic check)
        return mcruntime.Result(requeue_after=0.1) if req.cluster_name == "hung" else None

    ctrl = configmap_controller(mgr, Recorder(reconcile))
    assert ctrl.max_concurrent_reconciles == 1
    with running(mgr):
        wait_for(lambda: len([k for k in reconciled if k.startswith("hung/")]) == 6)
        servers["hung"].freeze()
        wait_for(lambda: ctrl.queue.paused() == {"hung"}, what="the hung cluster held back")
        health = mgr.health.state("hung")
        assert health is not None and not health.healthy
        # at most the one reconcile in flight when it froze still holds the worker (2 s)
        began = time.monotonic()
        create_cms(servers["ok"], [f"ok{i}" for i in range(5)])
        wait_for(
            lambda: all(f"ok/ok{i}" in reconciled for i in range(5)),
            timeout=15,
            what="the healthy cluster's five requests",
        )
        took = time.monotonic() - began
        # held back, the hung cluster's six requests are not run in turn with them (5 x 2 s)
        assert took < 3, f"the healthy cluster waited {took:.1f}s behind the hung one"
        thawed = time.monotonic()
        servers["hung"].thaw()
        wait_for(lambda: not ctrl.queue.paused(), what="the cluster answering again")
        wait_for(
            lambda: all(reconciled[f"hung/h{i}"] > thawed for i in range(6)),
            what="the hung cluster's requests reconciled again",
        )
