"""A manager embedded in an asyncio application: ``astart``/``astop``/``arun``/``async with``
keep the application's event loop serving, a cancel stops the manager, and the blocking
``start()``/``stop()`` called on a running loop say what to await instead."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Awaitable
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._logs import logged
from tests._signal import signal_after
from tests.integration.multicluster._mc_helpers import (
    CM,
    cluster_of,
    create_cms,
    fast_health,
    thread_names,
)

pytestmark = pytest.mark.timeout(60)


class _Ticks:
    """The application's loop at work: a tick every 20 ms; the longest gap between two is
    how long the loop served nothing."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self.at.append(time.monotonic())
            await asyncio.sleep(0.02)

    def start(self) -> None:
        self.task = asyncio.create_task(self._tick())

    def longest_stall(self) -> float:
        return max(b - a for a, b in zip(self.at, self.at[1:], strict=False))

    async def during(self, aw: Awaitable[Any]) -> tuple[Any, float]:
        """Await ``aw``; what it returned and the loop's longest stall meanwhile."""
        self.at.clear()
        result = await aw
        await asyncio.sleep(0.05)  # (a tick after it, so a stall at its end is measured)
        return result, self.longest_stall()


def _reconciling(server: Any) -> tuple[mcruntime.Manager, threading.Event]:
    """A manager of ``server`` (with a ConfigMap) and the event its async reconcile sets."""
    create_cms(server, ["web"])
    mgr = mcruntime.Manager(cluster_of(server, ""))
    seen = threading.Event()

    async def reconcile(req: Request) -> None:
        seen.set()

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    return mgr, seen


def _with_a_frozen_member(make_envtest_server: Any, **options: Any) -> mcruntime.Manager:
    """A manager of a fleet of two servers, "frozen" not answering."""
    servers = {n: make_envtest_server(n) for n in ("a", "frozen")}
    servers["frozen"].freeze()
    provider = clusters.Provider()
    for name, server in servers.items():
        provider.add(name, cluster_of(server, name))
    mgr = mcruntime.Manager(provider=provider, options=fast_health(**options))
    mcruntime.controller_managed_by(mgr).for_(CM).complete(lambda req: None)
    return mgr


async def _cancel(task: asyncio.Task[Any], mgr: mcruntime.Manager) -> None:
    """Cancel ``task`` (awaiting one of ``mgr``'s coroutines): it ends cancelled, and the
    manager has stopped by then."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert mgr.wait(0), f"the manager was not stopped when {task.get_coro()!r} was cancelled"


def _idle(server: Any) -> mcruntime.Manager:
    """A manager of ``server`` with a controller that does nothing."""
    mgr = mcruntime.Manager(cluster_of(server, ""))
    mcruntime.controller_managed_by(mgr).for_(CM).complete(lambda req: None)
    return mgr


def test_astop_lets_a_reconcile_waiting_on_the_applications_loop_finish(
    make_envtest_server: Any,
) -> None:
    # the hand-off of docs/guides/writing-a-controller.md: the reconcile awaits work run on
    # the application's loop. mgr.stop() on that loop held it: the reconcile could not end,
    # and the stop waited the whole graceful timeout (8 s here; 30 s by default)
    server = make_envtest_server("astop")
    create_cms(server, ["web"])
    mgr = mcruntime.Manager(
        cluster_of(server, ""), options=mcruntime.ManagerOptions(graceful_shutdown_timeout=8)
    )
    began, finished = threading.Event(), threading.Event()
    app_loop: asyncio.AbstractEventLoop | None = None

    async def fetch_quota() -> int:
        await asyncio.sleep(0.3)  # the application's own client, on its loop
        return 3

    async def reconcile(req: Request) -> None:
        assert app_loop is not None
        began.set()
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fetch_quota(), app_loop))
        finished.set()

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)
    before = thread_names()

    async def app() -> tuple[float, float]:
        nonlocal app_loop
        app_loop = asyncio.get_running_loop()
        ticks = _Ticks()
        ticks.start()
        await mgr.astart()
        while not began.is_set():  # (the reconcile hands its work to this loop)
            await asyncio.sleep(0.01)
        stopping = time.monotonic()
        _, stall = await ticks.during(mgr.astop())
        return time.monotonic() - stopping, stall

    took, stall = asyncio.run(app())
    assert finished.is_set(), "the reconcile did not finish: it was cancelled at the stop's end"
    assert took < 3, f"the stop took {took:.1f}s"
    assert stall < 0.5, f"the application's loop served nothing for {stall:.2f}s"
    assert mgr.wait(0)
    wait_for(lambda: thread_names() <= before, timeout=10, what="the manager's threads gone")


def test_astart_keeps_the_applications_loop_serving_while_a_member_does_not_answer(
    make_envtest_server: Any,
) -> None:
    # start() waits for the fleet's first clusters: on the application's loop, a member that
    # does not answer held it (no request served, no liveness probe answered) until noticed
    mgr = _with_a_frozen_member(make_envtest_server, graceful_shutdown_timeout=2)

    async def app() -> tuple[float, float]:
        ticks = _Ticks()
        ticks.start()
        starting = time.monotonic()
        started, stall = await ticks.during(mgr.astart())
        took = time.monotonic() - starting
        assert started is mgr
        await mgr.astop()
        return took, stall

    took, stall = asyncio.run(app())
    assert took > 0.5, f"the start took {took:.2f}s: it did not wait for the frozen member"
    assert stall < 0.5, f"the application's loop served nothing for {stall:.2f}s"


def test_async_with_starts_and_stops_the_manager(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime")
    mgr, seen = _reconciling(make_envtest_server("awith"))

    async def app() -> None:
        async with mgr as entered:
            assert entered is mgr
            while not seen.is_set():
                await asyncio.sleep(0.01)
        assert mgr.wait(0)

    asyncio.run(app())
    assert not logged(caplog, logging.WARNING, containing="running asyncio event loop")


def test_async_with_raises_the_error_that_stopped_the_manager(make_envtest_server: Any) -> None:
    """As ``arun()`` raises it (and kopf's ``KopfRunner``): a reconciler's exit ends the block
    with it, not with a wait that times out."""
    server = make_envtest_server("afatal")
    create_cms(server, ["web"])
    mgr = mcruntime.Manager(cluster_of(server, ""))

    async def reconcile(req: Request) -> None:
        raise SystemExit(f"cannot go on with {req.name}")

    mcruntime.controller_managed_by(mgr).for_(CM).complete(reconcile)

    async def app() -> None:
        async with mgr:
            assert await asyncio.to_thread(mgr.wait, 15), "the reconciler's exit stopped it"

    with pytest.raises(SystemExit, match="cannot go on with web"):
        asyncio.run(app())


def test_arun_stops_the_manager_when_its_task_is_cancelled(make_envtest_server: Any) -> None:
    # the obvious way before: await asyncio.to_thread(mgr.run): a cancel (Ctrl-C under
    # asyncio.run) left the manager running and asyncio.run waiting for its thread for ever
    mgr, seen = _reconciling(make_envtest_server("arun"))
    before = thread_names()

    async def app() -> None:
        running = asyncio.create_task(mgr.arun())
        while not seen.is_set():
            await asyncio.sleep(0.01)
        assert not running.done()
        await _cancel(running, mgr)

    asyncio.run(app())
    wait_for(lambda: thread_names() <= before, timeout=10, what="the manager's threads gone")


def test_arun_returns_once_the_manager_is_stopped_and_raises_its_failure(
    make_envtest_server: Any,
) -> None:
    server = make_envtest_server("arun-fatal")
    create_cms(server, ["web"])
    mgr = mcruntime.Manager(cluster_of(server, ""))

    async def reconcile(req: Request) -> None:
        raise RuntimeError("the database is gone")  # fatal (recover_panic off): run() raises it

    mcruntime.controller_managed_by(mgr).for_(CM).with_options(recover_panic=False).complete(
        reconcile
    )

    async def app() -> None:
        await asyncio.wait_for(mgr.arun(), 30)

    with pytest.raises(RuntimeError, match="the database is gone"):
        asyncio.run(app())
    assert mgr.wait(0)


def test_a_cancelled_astart_stops_the_manager(make_envtest_server: Any) -> None:
    mgr = _with_a_frozen_member(
        make_envtest_server, engage_sync_timeout=30, graceful_shutdown_timeout=2
    )
    before = thread_names()

    async def app() -> None:
        starting = asyncio.create_task(mgr.astart())
        wait = time.monotonic() + 10
        while not mgr.engaged_clusters() and time.monotonic() < wait:
            await asyncio.sleep(0.01)  # ("a" engaged: start() waits for "frozen" now)
        await _cancel(starting, mgr)

    asyncio.run(app())
    wait_for(lambda: thread_names() <= before, timeout=10, what="the manager's threads gone")


def test_the_blocking_start_and_stop_on_a_running_loop_say_to_await_instead(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    mgr = _idle(make_envtest_server("blocking"))

    async def app() -> None:
        mgr.start()
        mgr.stop()

    asyncio.run(app())
    said = logged(caplog, logging.WARNING, containing="called on a running asyncio event loop")
    assert len(said) == 2, said
    assert said[0].startswith("Manager.start() called on a running asyncio event loop")
    assert said[0].endswith("await mgr.astart() instead"), said[0]
    assert said[1].endswith("await mgr.astop() instead"), said[1]


def test_the_blocking_run_on_a_running_loop_says_to_await_arun_once(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    mgr = _idle(make_envtest_server("blocking-run"))

    class StopsAtOnce:
        def start(self, stop: threading.Event) -> None:
            mgr.stop()  # (from its own thread: run() returns)

    mgr.add(StopsAtOnce())

    async def app() -> None:
        mgr.run()

    asyncio.run(app())
    said = logged(caplog, logging.WARNING, containing="called on a running asyncio event loop")
    assert len(said) == 1, said
    assert said[0].startswith("Manager.run() called on a running asyncio event loop")
    assert said[0].endswith("await mgr.arun() instead"), said[0]


def test_the_blocking_api_off_the_loop_says_nothing(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    mgr = _idle(make_envtest_server("plain"))

    async def app() -> None:
        await asyncio.to_thread(mgr.start)
        await asyncio.to_thread(mgr.stop)

    asyncio.run(app())
    assert not logged(caplog, logging.WARNING, containing="running asyncio event loop")


_ARUN_UNTIL_SIGTERM = """
import asyncio, logging, threading
import mcruntime
from mcruntime.envtest import APIServer

logging.basicConfig(level=logging.WARNING)
logging.getLogger("mcruntime.manager").setLevel(logging.INFO)
srv = APIServer("arun").start()
mgr = mcruntime.Manager(srv.kubeconfig(), options=mcruntime.ManagerOptions(graceful_shutdown_timeout=5))
mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)

class Ready:
    def start(self, stop):
        print("ready", flush=True)
        stop.wait()

mgr.add(Ready())
asyncio.run(mgr.arun())
left = [t.name for t in threading.enumerate() if t.name.startswith("mcruntime/") and "/envtest" not in t.name]
print("stopped", left, flush=True)
srv.close()
"""


def test_arun_stops_cleanly_at_sigterm() -> None:
    # what Kubernetes sends a pod; asyncio.run handles only SIGINT, so without a handler the
    # process ended at once, nothing stopped
    ended = signal_after(_ARUN_UNTIL_SIGTERM, "ready", signal.SIGTERM)
    assert ended.returncode == 0, ended.err[-2000:]
    assert ended.out.strip() == "stopped []", (ended.out, ended.err[-2000:])
    assert "signal SIGTERM received, stopping" in ended.err
    assert ended.took < 5.0
