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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterLeft, ClusterNotAnswering, DeadlineExceeded
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    CM,
    NOTICED,
    RETRY,
    TIMEOUT,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    fast_health,
    running,
    thread_names,
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
        # the one reconcile in flight when it froze held the worker until the failed probe cut
        # its write
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


class _FrozenMidReconcile:
    """A fleet of "ok" and "hung" with one worker; the first reconcile of ``hung/h0`` freezes
    its cluster, then writes to it with the default deadline (30 s): it blocks there."""

    def __init__(self, make_envtest_server: Any) -> None:
        self.servers = {n: make_envtest_server(n) for n in ("ok", "hung")}
        create_cms(self.servers["hung"], ["h0"])
        self.provider = clusters.Provider()
        for name, server in self.servers.items():
            self.provider.add(name, cluster_of(server, name))
        self.mgr = mcruntime.Manager(
            provider=self.provider,
            options=fast_health(),
        )
        self.froze = threading.Event()
        self.frozen_at = 0.0
        #: (cluster, name, what the write raised or None, when it ended)
        self.outcomes: list[tuple[str, str, BaseException | None, float]] = []
        self.ctrl = configmap_controller(self.mgr, Recorder(self._reconcile))
        assert self.ctrl.max_concurrent_reconciles == 1

    def _reconcile(self, req: Request) -> None:
        if req.cluster_name == "hung" and not self.froze.is_set():
            self.servers["hung"].freeze()
            self.frozen_at = time.monotonic()
            self.froze.set()
        error: BaseException | None = None
        try:
            self.mgr.get_cluster(req.cluster_name).client.patch(
                CM, req.name, {"metadata": {"annotations": {"seen": "yes"}}}, req.namespace
            )
        except BaseException as exc:
            error = exc
        self.outcomes.append((req.cluster_name, req.name, error, time.monotonic()))
        if error is not None:
            raise error

    def ended(self, cluster: str, name: str, *, ok: bool, after: float = 0.0) -> float | None:
        """When a write of ``cluster/name`` first ended (well, or not) after ``after``."""
        times = [
            t
            for c, n, e, t in list(self.outcomes)
            if c == cluster and n == name and (e is None) == ok and t > after
        ]
        return min(times, default=None)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Run the manager; once ``hung`` froze, check that a healthy cluster's new object
        is reconciled (the one worker freed) well before the call deadline."""
        with running(self.mgr):
            try:
                assert self.froze.wait(10), "no reconcile of the hung cluster"
                create_cms(self.servers["ok"], ["ok1"])
                wait_for(
                    lambda: self.ended("ok", "ok1", ok=True) is not None,
                    timeout=NOTICED + 5,
                    what="the healthy cluster's new object reconciled",
                )
                served = self.ended("ok", "ok1", ok=True)
                assert served is not None and served - self.frozen_at < NOTICED, (
                    f"the healthy cluster waited {served and served - self.frozen_at:.1f}s"
                )
                cut = [e for c, _, e, _ in self.outcomes if c == "hung" and e is not None]
                assert len(cut) == 1 and isinstance(cut[0], ClusterNotAnswering), cut
                assert str(cut[0]).startswith(
                    "[cluster hung] PATCH /api/v1/namespaces/default/configmaps/h0: cut after "
                ) and str(cut[0]).endswith(
                    f"of its 30s deadline: the cluster is not answering (its health probe, "
                    f"GET /readyz, got no answer within {TIMEOUT:g}s)"
                ), str(cut[0])
                yield
            finally:
                self.servers["hung"].thaw()


def test_with_one_worker_a_call_blocked_on_a_cluster_that_stops_answering_is_cut_at_its_failed_probe(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the one worker was blocked in the hung cluster's write, with 30 s to its deadline: the
    # health check's failed probe cuts it, the healthy cluster is served within the health
    # check's bound, and the cut request waits behind the hold until the cluster answers
    caplog.set_level(logging.INFO, logger="mcruntime")
    fleet = _FrozenMidReconcile(make_envtest_server)
    with fleet.frozen():
        assert fleet.ctrl.queue.paused() == {"hung"}
        assert fleet.ended("hung", "h0", ok=True) is None  # not retried while it is silent
        fleet.servers["hung"].thaw()
        thawed = time.monotonic()
        wait_for(
            lambda: fleet.ended("hung", "h0", ok=True, after=thawed) is not None,
            timeout=10,
            what="the cut request reconciled once the cluster answers",
        )
    warned = logged(caplog, logging.WARNING, containing="cluster=hung")
    # the informer's watch, when it was still opening at the freeze (it opens after the list
    # the first reconcile follows), is cut too: one line of its own, or none
    opening = [m for m in warned if m.startswith("cluster=hung informer ")]
    assert len(opening) <= 1 and all("WATCH " in m and ": cut after " in m for m in opening)
    warned = [m for m in warned if m not in opening]
    assert [m.split(": ")[0] for m in warned] == [
        "cluster=hung health",
        "cluster=hung controller=configmaps",
    ], warned  # once per streak each: the probe's failure, and the reconcile it cut
    assert "reconciling failed: [cluster hung] PATCH " in warned[1]
    assert "the cluster is not answering (its health probe" in warned[1]
    assert logged(
        caplog, logging.INFO, starting="cluster=hung controller=configmaps: reconciling works again"
    )


def test_a_cluster_that_stops_answering_and_leaves_after_its_calls_were_cut_leaves_no_thread(
    make_envtest_server: Any,
) -> None:
    fleet = _FrozenMidReconcile(make_envtest_server)
    with fleet.frozen():
        # the fleet's threads without the hung cluster's (the probe pool's stay for the others)
        baseline = {n for n in thread_names() if "/hung" not in n}
        fleet.provider.remove("hung")
        wait_for(lambda: not threads_for("hung"), timeout=5, what="no thread of hung left")
        wait_for(
            lambda: (
                {n for n in thread_names() if not n.startswith("mcruntime/health/probe")}
                <= baseline
            ),
            timeout=5,
            what="the threads back to the fleet's without the hung cluster",
        )
        create_cms(fleet.servers["ok"], ["ok2"])
        wait_for(lambda: fleet.ended("ok", "ok2", ok=True) is not None, what="ok2 reconciled")


def test_a_slow_cluster_that_answers_its_probes_keeps_its_calls(make_envtest_server: Any) -> None:
    # each request takes longer than the probe interval: a probe goes out while every write is
    # in flight, and is answered (slowly) within its deadline; nothing is cut or held back
    server = make_envtest_server("slow")
    create_cms(server, ["s0", "s1", "s2"])
    provider = clusters.Provider()
    provider.add("slow", cluster_of(server, "slow"))
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(
            cluster_health_interval=0.2,
            cluster_health_timeout=2.0,
            cluster_health_retry_interval=RETRY,
        ),
    )
    done: dict[str, float] = {}
    errors: list[BaseException] = []
    entered, slowed = threading.Event(), threading.Event()

    def reconcile(req: Request) -> None:
        entered.set()
        slowed.wait(10)
        try:
            mgr.get_cluster("slow").client.patch(
                CM, req.name, {"metadata": {"annotations": {"seen": "yes"}}}, req.namespace
            )
        except BaseException as exc:
            errors.append(exc)
            raise
        done[req.name] = time.monotonic()

    configmap_controller(mgr, Recorder(reconcile))
    with running(mgr):
        assert entered.wait(10), "no reconcile"
        server.latency = 0.6  # every answer, the probes' included, comes 0.6 s late
        began = time.monotonic()
        slowed.set()
        try:
            wait_for(lambda: len(done) == 3, timeout=20, what="the three slow writes")
        finally:
            server.latency = 0.0
        health = mgr.health.state("slow")
        assert health is not None and health.healthy and health.last_probe > began
    assert errors == []


def test_a_reconcile_blocked_on_a_cluster_that_stopped_answering_does_not_hold_the_stop(
    make_envtest_server: Any,
) -> None:
    # a reconcile of "a" reads from "b", which froze a moment ago (so the health check has
    # not missed it yet): the manager's stop probes every cluster at once, and b's failed
    # probe cuts the read, where the stop used to wait for graceful_shutdown_timeout (30 s)
    servers = {name: make_envtest_server(name) for name in ("a", "b")}
    provider = clusters.Provider()
    for name, server in servers.items():
        provider.add(name, cluster_of(server, name))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(cluster_health_timeout=1.0)
    )
    blocked = threading.Event()
    outcome: list[BaseException] = []

    def reconcile(req: Request) -> None:
        if req.cluster_name != "a":
            return
        blocked.set()
        try:
            mgr.get_cluster("b").uncached_client.get(CM, "other", "default")
        except BaseException as exc:
            outcome.append(exc)
            raise

    configmap_controller(mgr, Recorder(reconcile))
    mgr.start()
    try:
        wait_for(lambda: sorted(mgr.engaged_clusters()) == ["a", "b"], what="both engaged")
        servers["b"].freeze()
        create_cms(servers["a"], ["a0"])
        assert blocked.wait(10), "the reconcile of a did not start"
    finally:
        began = time.monotonic()
        mgr.stop()
        took = time.monotonic() - began
        servers["b"].thaw()
    assert took < 5, f"the stop took {took:.1f}s"
    assert len(outcome) == 1 and isinstance(outcome[0], ClusterNotAnswering), outcome
