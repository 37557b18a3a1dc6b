"""``async def`` reconcilers at their edges: a deadline the coroutine ignores, cleanup after
a timeout, a cluster leaving, a coroutine that holds the loop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
import traceback
from typing import Any

import pytest

import mcruntime
from mcruntime.controller._controller import LOOP_HELD_AFTER
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import CM, cluster_of, create_cms, running

pytestmark = pytest.mark.timeout(60)


def _reconciles(mgr: mcruntime.Manager, result: str, cluster: str = "local") -> float:
    value = mgr.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total",
        {"controller": "configmap", "cluster": cluster, "result": result},
    )
    return value or 0.0


def _stays_and_leaves(
    make_envtest_server: Any, *, stays: list[str] | None = None, leaves: list[str]
) -> tuple[mcruntime.Manager, clusters.Provider]:
    """A manager of two clusters, "stays" and "leaves", with the ConfigMaps named in each."""
    provider = clusters.Provider()
    for name, cms in (("stays", stays or []), ("leaves", leaves)):
        server = make_envtest_server(name)
        if cms:
            create_cms(server, cms)
        provider.add(name, cluster_of(server, name))
    return mcruntime.Manager(provider=provider), provider


def test_an_async_reconcile_that_swallows_its_timeout_fails_with_it(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the coroutine catches the CancelledError of its reconcile_timeout and returns later:
    # it did not succeed in time, and ran past its deadline, as a def reconciler may
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    server = make_envtest_server("swallow")
    create_cms(server, ["slow"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    runs: list[float] = []

    async def reconcile(req: Request) -> None:
        runs.append(time.monotonic())
        if len(runs) > 1:
            return
        end = time.monotonic() + 1.8
        while time.monotonic() < end:
            with contextlib.suppress(asyncio.CancelledError):  # swallowed
                await asyncio.sleep(0.05)

    mcruntime.controller_managed_by(mgr).named("configmap").for_(CM).with_options(
        reconcile_timeout=0.3
    ).complete(reconcile)
    with running(mgr):
        wait_for(lambda: len(runs) >= 2, timeout=15, what="the retry of the timed-out reconcile")
        failed = logged(caplog, logging.ERROR, containing="reconcile failed")
        assert failed and "did not finish within its deadline (0.3s)" in failed[0], failed
        assert _reconciles(mgr, "error") >= 1
        overran = logged(caplog, logging.WARNING, containing="past its reconcile_timeout")
        assert len(overran) == 1, overran
        assert "request=default/slow" in overran[0] and "async def" in overran[0], overran


def test_a_cancelled_error_nobody_asked_for_is_a_failure_naming_the_reconciles_line(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A reconcile awaiting a sub-task that something cancelled ends with its
    ``CancelledError``: the task ended cancelled, and its worker logged a fresh
    ``concurrent.futures.CancelledError`` with an empty message and mcruntime's frames only.
    Now it is an error saying what happened, raised from the original (whose traceback
    shows the reconcile's line), and retried like any failure."""
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    server = make_envtest_server("cancelled")
    create_cms(server, ["sub"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    runs: list[float] = []

    async def reconcile(req: Request) -> None:
        runs.append(time.monotonic())
        sub = asyncio.ensure_future(asyncio.sleep(10))
        sub.cancel()  # a helper cancels a slow sub-request
        await sub

    mcruntime.controller_managed_by(mgr).named("configmap").for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(lambda: len(runs) >= 2, timeout=10, what="the retry")
    [first] = [r for r in caplog.records if "reconcile failed (retry 1)" in r.getMessage()]
    assert first.getMessage().endswith(
        "RuntimeError: the reconcile raised CancelledError without being cancelled (it awaited "
        "a task that was cancelled, or raised it itself): see the traceback above"
    )
    assert first.exc_info is not None and first.exc_info[1] is not None
    cause = first.exc_info[1].__cause__
    assert isinstance(cause, asyncio.CancelledError)
    frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert "reconcile" in frames, frames


@pytest.mark.parametrize("kind", ["async", "def"])
def test_a_write_after_the_reconciles_deadline_is_no_refusal_of_its_cluster(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # past its reconcile_timeout, the reconcile writes (an async one in `finally:`, as status
    # writes often are): the write is not sent, the deadline having passed. The reconcile was
    # slow, the cluster answers: no warning that it refuses, its requests are not held back
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    server = make_envtest_server(f"late-{kind}")
    create_cms(server, ["slow"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    runs: list[float] = []

    def write() -> Any:
        return {"metadata": {"annotations": {"phase": "tried"}}}

    async def areconcile(req: Request) -> None:
        runs.append(time.monotonic())
        try:
            await asyncio.sleep(10)  # waiting for an external system
        finally:
            await mgr.get_cluster("").aclient.patch(CM, req.name, write(), req.namespace)

    def reconcile(req: Request) -> None:
        runs.append(time.monotonic())
        time.sleep(0.4)  # a slow computation
        mgr.get_cluster("").client.patch(CM, req.name, write(), req.namespace)

    mcruntime.controller_managed_by(mgr).named("configmap").for_(CM).with_options(
        reconcile_timeout=0.2
    ).complete(areconcile if kind == "async" else reconcile)
    with running(mgr) as m:
        wait_for(lambda: len(runs) >= 3, timeout=15, what="three reconciles")
        assert m.controllers[0].waiting_requests() == {}
    failed = logged(caplog, logging.ERROR, containing="reconcile failed (retry 1)")
    assert failed, caplog.text
    if kind == "async":
        assert "the reconcile did not finish within its deadline (0.2s)" in failed[0], failed
    else:
        assert "not sent: the deadline had passed" in failed[0], failed
    assert not logged(caplog, logging.WARNING, containing="reconciling failed"), caplog.text


def test_an_async_reconcile_of_a_cluster_that_leaves_is_cancelled(
    make_envtest_server: Any,
) -> None:
    # it awaits something else than its cluster's calls (which the leave cuts): cancelled
    # too, it frees its worker at once instead of running on for a cluster that is gone
    mgr, provider = _stays_and_leaves(make_envtest_server, leaves=["slow"])
    began, cancelled = threading.Event(), threading.Event()

    async def reconcile(req: Request) -> None:
        if req.cluster_name != "leaves":
            return
        began.set()
        try:
            await asyncio.sleep(30)  # an external system
        except asyncio.CancelledError:
            cancelled.set()
            raise

    ctrl = mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        assert began.wait(15)
        left = time.monotonic()
        provider.remove("leaves")
        assert cancelled.wait(5)
        wait_for(lambda: not ctrl.in_flight_reconciles(), timeout=5, what="the worker freed")
        assert time.monotonic() - left < 2


def test_an_async_reconcile_holding_the_event_loop_is_said_once_per_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a coroutine computing without awaiting stalls every async reconcile of the controller:
    # said (a warning, naming the request and where it is), once per streak in its cluster
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    server = make_envtest_server("cpu")
    create_cms(server, ["cpu-1", "cpu-2"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    done: list[str] = []

    async def reconcile(req: Request) -> None:
        end = time.monotonic() + 4 * LOOP_HELD_AFTER
        while time.monotonic() < end:  # CPU work, never awaiting
            pass
        done.append(req.name)

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(lambda: len(done) == 2, timeout=15, what="the two reconciles")
    said = [r for r in caplog.records if "held the event loop" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG], said
    first = said[0].getMessage()
    assert "cluster=local request=default/cpu-" in first, first
    assert "test_async_reconcile.py" in first and "in reconcile" in first, first


def test_a_hold_of_the_event_loop_by_a_task_a_reconcile_started_names_its_request(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A fan-out child (a ``TaskGroup``'s, as docs/concepts/fairness.md fans out with
    ``gather``) that blocks was said "not by a reconcile's own coroutine", without the
    request: the task runs in a copy of the reconcile's context, and is its work."""
    caplog.set_level(logging.WARNING, logger="mcruntime.controller")
    server = make_envtest_server("child")
    create_cms(server, ["fan-out"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    done: list[str] = []

    async def fetch_member() -> None:
        end = time.monotonic() + 1.5 * LOOP_HELD_AFTER + 0.4
        while time.monotonic() < end:  # CPU work, never awaiting
            pass

    async def reconcile(req: Request) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(fetch_member())
        done.append(req.name)

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(lambda: done == ["fan-out"], timeout=10, what="the reconcile")
    said = [r.getMessage() for r in caplog.records if "held for over" in r.getMessage()]
    said += [r.getMessage() for r in caplog.records if "held the event loop" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(
        "controller=configmap cluster=local request=default/fan-out: the reconcile has held "
        "the event loop for over 0.5s without awaiting in a task it started (at "
    ), said
    assert "in fetch_member)" in said[0], said


@pytest.mark.parametrize("awaited", [False, True], ids=["stop", "astop"])
def test_stop_called_by_an_async_reconcile_lets_the_others_finish_at_once(
    make_envtest_server: Any, awaited: bool
) -> None:
    # waiting in stop() on the event loop would hold the loop the other async reconcile
    # needs: it would always wait the whole graceful timeout; `await mgr.astop()` there
    # would wait for its own reconcile
    server = make_envtest_server("stop-inside")
    create_cms(server, ["other"])
    mgr = mcruntime.Manager(
        cluster_of(server, ""), options=mcruntime.ManagerOptions(graceful_shutdown_timeout=8)
    )
    other_began, other_done = threading.Event(), threading.Event()
    returned: list[float] = []

    async def reconcile(req: Request) -> None:
        if req.name == "other":
            other_began.set()
            await asyncio.sleep(1.0)
            other_done.set()
        elif req.name == "stopper":
            began = time.monotonic()
            if awaited:
                await mgr.astop()
            else:
                mgr.stop()
            returned.append(time.monotonic() - began)

    mcruntime.controller_managed_by(mgr).for_(CM).with_options(
        max_concurrent_reconciles=2
    ).complete(reconcile)
    with running(mgr):
        assert other_began.wait(15)
        create_cms(server, ["stopper"])
        began = time.monotonic()
        assert mgr.wait(15)
        stopped = time.monotonic() - began
    assert returned and returned[0] < 0.5, returned
    assert other_done.is_set()
    assert stopped < 4, f"the stop took {stopped:.1f}s"


def test_a_reconcile_still_running_at_stop_is_named_with_its_await_point(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.controller")
    server = make_envtest_server("stop-stuck")
    create_cms(server, ["stuck"])
    mgr = mcruntime.Manager(
        cluster_of(server, ""), options=mcruntime.ManagerOptions(graceful_shutdown_timeout=0.5)
    )
    began = threading.Event()

    async def reconcile(req: Request) -> None:
        began.set()
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            with contextlib.suppress(asyncio.CancelledError):  # swallowed
                await asyncio.sleep(0.05)

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):  # (its worker ends once the coroutine does)
        assert began.wait(15)
        mgr.stop()  # (its graceful_shutdown_timeout)
    said = logged(caplog, logging.WARNING, containing="workers still running")
    assert len(said) == 1, said
    assert "reconciles default/stuck, its coroutine at " in said[0], said
    assert "test_async_reconcile.py" in said[0] and "in reconcile" in said[0], said


def test_an_async_reconcile_of_a_cluster_the_controller_does_not_engage_runs(
    make_envtest_server: Any,
) -> None:
    # a cross-cluster map function may name any cluster: only a cluster's leave cancels
    server = make_envtest_server("elsewhere")
    mgr = mcruntime.Manager(cluster_of(server, ""))
    done = threading.Event()

    async def reconcile(req: Request) -> None:
        if req.cluster_name == "elsewhere":
            await asyncio.sleep(0.05)
            done.set()

    ctrl = mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        ctrl.queue.add(Request("default", "x", "elsewhere"))
        assert done.wait(10)


def test_a_task_a_reconcile_started_is_cancelled_when_its_cluster_leaves(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a reconcile starts a background task (an external job's watch) and returns: once its
    # cluster left, the task went on until the manager stopped, one more per cluster that
    # churned; a task started outside any request's context (a shared one) stays
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    mgr, provider = _stays_and_leaves(make_envtest_server, stays=["web"], leaves=["web"])
    polling: dict[str, asyncio.Task[None]] = {}
    cancelled: set[str] = set()

    async def poll_the_job(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.add(name)
            raise

    async def reconcile(req: Request) -> None:
        polling[req.cluster_name] = asyncio.create_task(poll_the_job(req.cluster_name))
        if req.cluster_name == "leaves" and "shared" not in polling:
            # the controller's own, started by the reconcile of the cluster that leaves, in
            # no request's context
            polling["shared"] = asyncio.create_task(
                poll_the_job("shared"), context=contextvars.Context()
            )

    ctrl = mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(lambda: {"stays", "leaves"} <= set(polling), timeout=15, what="both polling")
        wait_for(lambda: not ctrl.in_flight_reconciles(), timeout=5, what="the reconciles done")
        provider.remove("leaves")
        wait_for(lambda: "leaves" in cancelled, timeout=5, what="the task of 'leaves' cancelled")
        assert not polling["stays"].done() and not polling["shared"].done()
        said = logged(caplog, logging.INFO, containing="cluster=leaves: cancelled")
        assert said == [
            "controller=configmap cluster=leaves: cancelled 1 task its reconciles started that "
            "still ran (poll_the_job): its cluster left"
        ], said


def test_a_failure_of_a_task_nothing_awaited_names_the_request_that_started_it(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a fire-and-forget task that raised was asyncio's "Task exception was never retrieved",
    # from logger asyncio, naming neither the controller nor the cluster nor the request
    caplog.set_level(logging.ERROR)
    server = make_envtest_server("forgotten")
    create_cms(server, ["web"])
    mgr = mcruntime.Manager(cluster_of(server, ""))

    async def refresh() -> None:
        raise RuntimeError("the refresh failed")

    async def reconcile(req: Request) -> None:
        asyncio.create_task(refresh())  # noqa: RUF006 - what is tested: nothing awaits it

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(
            lambda: logged(caplog, logging.ERROR, containing="nothing awaited it"),
            timeout=15,
            what="the task's failure logged",
        )
    said = [r for r in caplog.records if "nothing awaited it" in r.getMessage()]
    assert said[0].name == "mcruntime.controller"
    assert said[0].getMessage() == (
        "controller=configmap cluster=local request=default/web: a task the reconcile started "
        "(refresh) failed and nothing awaited it: RuntimeError: the refresh failed"
    )
    assert said[0].exc_info is not None and "the refresh failed" in str(said[0].exc_info[1])
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_a_reconcile_that_outlives_its_clusters_leave_is_said_with_where_it_waits(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # it catches the CancelledError of its cluster's leave and goes on: its worker was held
    # without a word (a def reconciler's overrun of its deadline is said; this was not)
    caplog.set_level(logging.WARNING, logger="mcruntime.controller")
    mgr, provider = _stays_and_leaves(make_envtest_server, leaves=["stubborn"])
    began, release = threading.Event(), threading.Event()

    async def reconcile(req: Request) -> None:
        if req.cluster_name != "leaves":
            return
        began.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # swallowed
                await asyncio.sleep(0.05)

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        try:
            assert began.wait(15)
            provider.remove("leaves")
            wait_for(
                lambda: logged(caplog, logging.WARNING, containing="has not ended"),
                timeout=10,
                what="the warning about the reconcile that goes on",
            )
        finally:
            release.set()
    said = logged(caplog, logging.WARNING, containing="has not ended")
    assert len(said) == 1, said
    assert said[0].startswith(
        "controller=configmap cluster=leaves request=default/stubborn: cancelled as its cluster "
        "left, the reconcile has not ended 1s later (it caught the CancelledError, or awaits "
        "what ignores a cancel): its worker is held until it ends; its coroutine at "
    ), said[0]
    assert "test_async_reconcile.py" in said[0] and "in reconcile" in said[0], said[0]


def _write_blocking(cluster: mcruntime.Cluster, req: Request) -> None:
    cluster.client.patch("v1/ConfigMap", req.name, {"data": {"seen": "1"}}, req.namespace)


def test_a_blocking_api_call_on_the_event_loop_is_said_once_with_where_it_is_made(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the sync client in an async def reconcile: each call holds the event loop every async
    # reconcile of the controller needs (4.06 s instead of 0.98 s for 12 reconciles of three
    # writes at 50 ms), silently while each is shorter than the watchdog's 0.5 s
    caplog.set_level(logging.DEBUG, logger="mcruntime.client")
    server = make_envtest_server("blocking-calls")
    create_cms(server, ["a", "b", "c"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    done: set[str] = set()

    async def reconcile(req: Request) -> None:
        cluster = mgr.get_cluster(req.cluster_name)
        cluster.client.get(CM, req.name, req.namespace)  # a cache read: no call
        await cluster.aclient.patch(CM, req.name, {"data": {"async": "1"}}, req.namespace)
        _write_blocking(cluster, req)
        await asyncio.to_thread(_write_blocking, cluster, req)  # off the loop
        done.add(req.name)

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    with running(mgr):
        wait_for(lambda: done >= {"a", "b", "c"}, timeout=15, what="the three reconciled")
    said = logged(caplog, logging.WARNING, containing="on a running asyncio event loop")
    assert len(said) == 1, said
    assert said[0].startswith(
        "cluster=local: a blocking API call (PATCH /api/v1/namespaces/default/configmaps/"
    ), said[0]
    assert (
        "was made on a running asyncio event loop (at test_async_reconcile.py:" in said[0]
        and " in _write_blocking): that loop ran nothing else until it returned" in said[0]
    ), said[0]
    assert said[0].endswith(
        "await it through cluster.aclient, or run it with asyncio.to_thread; further such calls "
        "to the cluster are logged at debug level"
    ), said[0]
    more = logged(caplog, logging.DEBUG, containing="on a running asyncio event loop")
    assert len(more) >= 2, more  # (the other reconciles' own, and their re-runs)
